#include "dltune/search/halton.h"

#include <cassert>
#include <limits>
#include <numeric>
#include <string>

#include "dltune/core/error.h"
#include "dltune/core/rng.h"

namespace dltune {
namespace {

__extension__ typedef unsigned __int128 Uint128;

// A digit group holds as many digits as fit in a table of at most this many entries.
constexpr std::uint64_t kMaxGroupEntries = 256;

// floor(digit / base^position * 2^64): the fixed-point weight of `digit` at a 1-based digit position whose power
// base^position is `power`. Zero once power > digit * 2^64.
std::uint64_t Contribution(std::uint64_t digit, Uint128 power) {
  return static_cast<std::uint64_t>((static_cast<Uint128>(digit) << 64) / power);
}

}  // namespace

std::vector<std::uint32_t> Primes(std::size_t count) {
  std::vector<std::uint32_t> primes;
  primes.reserve(count);
  for (std::uint32_t candidate = 2; primes.size() < count; ++candidate) {
    bool prime = true;
    for (std::uint32_t p : primes) {
      if (p * p > candidate) break;
      if (candidate % p == 0) {
        prime = false;
        break;
      }
    }
    if (prime) primes.push_back(candidate);
  }
  return primes;
}

namespace halton_detail {

double FixedPointToUnit(std::uint64_t fraction) {
  // Round to nearest (exact in IEEE arithmetic on every platform); only fractions within 2^-54 of 1 round up to 1.
  const double value = static_cast<double>(fraction) * 0x1p-64;
  return value < 1.0 ? value : 0x1.fffffffffffffp-1;
}

}  // namespace halton_detail

ScrambledHalton::ScrambledHalton(std::size_t dims, std::uint64_t seed, HaltonOptions options)
    : seed_(seed), options_(options) {
  if (dims == 0) throw Error("halton: the number of dimensions must be > 0");
  if (dims > kMaxDims) {
    throw Error("halton: " + std::to_string(dims) + " dimensions requested, at most " + std::to_string(kMaxDims) +
                " are supported");
  }
  const std::vector<std::uint32_t> bases = Primes(dims);
  dims_.resize(dims);
  for (std::size_t d = 0; d < dims; ++d) {
    Dimension& dim = dims_[d];
    const std::uint32_t base = bases[d];
    dim.base = base;

    // Digits needed for any 64-bit index; positions above them have zero weight in 64-bit fixed point.
    std::size_t digits = 0;
    for (std::uint64_t n = std::numeric_limits<std::uint64_t>::max(); n != 0; n /= base) ++digits;
    std::size_t group_digits = 1;
    std::uint64_t group_base = base;
    while (group_base * base <= kMaxGroupEntries) {
      group_base *= base;
      ++group_digits;
    }
    dim.group_base = group_base;
    const std::size_t groups = (digits + group_digits - 1) / group_digits;

    // Randomness: the shift first, then one permutation per digit position (1-based; perms[0] unused).
    Rng rng(MixSeed(seed, d));
    const std::uint64_t shift = rng.NextU64();
    std::vector<std::vector<std::uint32_t>> perms(digits + 1, std::vector<std::uint32_t>(base));
    for (std::size_t position = 1; position <= digits; ++position) {
      std::iota(perms[position].begin(), perms[position].end(), 0u);
      if (options.scramble) rng.Shuffle(std::span<std::uint32_t>(perms[position]));
    }

    dim.table.assign(groups * group_base, 0);
    Uint128 power = 1;  // base^position of the current position
    for (std::size_t g = 0; g < groups; ++g) {
      std::uint64_t* group = &dim.table[g * group_base];
      std::uint64_t digit_stride = 1;  // base^t
      for (std::size_t t = 0; t < group_digits; ++t, digit_stride *= base) {
        const std::size_t position = g * group_digits + t + 1;
        power *= base;
        if (position > digits) continue;
        for (std::uint64_t r = 0; r < group_base; ++r) {
          group[r] += Contribution(perms[position][(r / digit_stride) % base], power);
        }
      }
    }

    dim.tail.assign(groups + 1, 0);
    dim.tail[groups] = options.shift ? shift : 0;
    for (std::size_t g = groups; g-- > 0;) dim.tail[g] = dim.tail[g + 1] + dim.table[g * group_base];
  }
}

std::uint32_t ScrambledHalton::Base(std::size_t dim) const {
  assert(dim < dims_.size());
  return dims_[dim].base;
}

std::uint64_t ScrambledHalton::FixedPoint(std::uint64_t index, const Dimension& dimension) const {
  const std::uint64_t group_base = dimension.group_base;
  const std::uint64_t* table = dimension.table.data();
  std::uint64_t sum = 0;
  std::size_t g = 0;
  // Groups above the index's length are all zero digits: their scrambled contribution (and the shift) is tail[g].
  for (std::uint64_t n = index; n != 0; ++g, table += group_base) {
    const std::uint64_t quotient = n / group_base;
    sum += table[n - quotient * group_base];
    n = quotient;
  }
  return sum + dimension.tail[g];  // wraps modulo 2^64: the shift is modulo 1
}

void ScrambledHalton::Point(std::uint64_t index, std::span<double> out) const {
  assert(out.size() >= dims_.size());
  for (std::size_t d = 0; d < dims_.size(); ++d) {
    out[d] = halton_detail::FixedPointToUnit(FixedPoint(index, dims_[d]));
  }
}

double ScrambledHalton::Coordinate(std::uint64_t index, std::size_t dim) const {
  assert(dim < dims_.size());
  return halton_detail::FixedPointToUnit(FixedPoint(index, dims_[dim]));
}

}  // namespace dltune
