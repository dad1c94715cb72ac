#include "report/crc32c.h"

#include <array>

namespace dltune::crc32c {
namespace {

constexpr std::uint32_t kPolynomial = 0x82F63B78;  // 0x1EDC6F41 bit-reversed
constexpr std::uint32_t kMaskDelta = 0xa282ead8;

// kTable[b] is the CRC register after shifting byte b through it alone.
constexpr std::array<std::uint32_t, 256> kTable = [] {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t b = 0; b < 256; ++b) {
    std::uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc & 1) != 0 ? (crc >> 1) ^ kPolynomial : crc >> 1;
    table[b] = crc;
  }
  return table;
}();

}  // namespace

std::uint32_t Extend(std::uint32_t crc, std::string_view data) {
  std::uint32_t state = ~crc;
  for (const char c : data) state = kTable[(state ^ static_cast<unsigned char>(c)) & 0xFF] ^ (state >> 8);
  return ~state;
}

std::uint32_t Mask(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + kMaskDelta; }

std::uint32_t Unmask(std::uint32_t masked) {
  const std::uint32_t rotated = masked - kMaskDelta;
  return (rotated >> 17) | (rotated << 15);
}

}  // namespace dltune::crc32c
