// CRC-32C (Castagnoli; reflected polynomial 0x82F63B78, initial value and final XOR 0xFFFFFFFF), the checksum of
// TFRecord framing, and TFRecord's masking of it. Internal to the report module. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dltune::crc32c {

// The CRC of `data` appended to data whose CRC was `crc` (0 for the empty string). Extend(Extend(0, a), b) equals
// Value(a + b).
std::uint32_t Extend(std::uint32_t crc, std::string_view data);

// The CRC-32C of `data`; Value("123456789") == 0xE3069283.
inline std::uint32_t Value(std::string_view data) { return Extend(0, data); }

// TFRecord's masked CRC: rotated right by 15 bits plus 0xa282ead8 (so that a CRC of data that embeds CRCs stays
// well distributed). Unmask(Mask(c)) == c.
std::uint32_t Mask(std::uint32_t crc);
std::uint32_t Unmask(std::uint32_t masked);

}  // namespace dltune::crc32c
