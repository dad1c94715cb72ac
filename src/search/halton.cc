#include "search/halton.h"

#include <cassert>
#include <limits>
#include <numeric>
#include <string>

#include "core/rng.h"
#include "dltune/core/error.h"

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
    dim.group_inverse = std::numeric_limits<std::uint64_t>::max() / group_base + 1;
    const std::size_t groups = (digits + group_digits - 1) / group_digits;

    // Randomness: the shift first, then one permutation per digit position.
    Rng rng(MixSeed(seed, d));
    const std::uint64_t shift = rng.NextU64();
    // weight[(position - 1) * base + digit]: fixed-point value of `digit` (after permutation) at 1-based `position`.
    std::vector<std::uint64_t> weight(digits * base);
    std::vector<std::uint32_t> perm(base);
    Uint128 power = 1;  // base^position
    for (std::size_t position = 1; position <= digits; ++position) {
      std::iota(perm.begin(), perm.end(), 0u);
      if (options.scramble) rng.Shuffle(perm);
      power *= base;
      for (std::uint32_t digit = 0; digit < base; ++digit) {
        weight[(position - 1) * base + digit] = Contribution(perm[digit], power);
      }
    }

    // Group g's table: entry r = sum of the weights of r's digits at positions g*group_digits + 1, ... . Built one
    // digit at a time: with `size` = base^t entries done, entry high*size + low = entry low + weight of digit high.
    dim.table.assign(groups * group_base, 0);
    for (std::size_t g = 0; g < groups; ++g) {
      std::uint64_t* group = &dim.table[g * group_base];
      std::uint64_t size = 1;
      for (std::size_t t = 0; t < group_digits; ++t, size *= base) {
        const std::size_t position = g * group_digits + t + 1;
        // Positions beyond what a 64-bit index can reach have weight 0.
        const std::uint64_t* w = position <= digits ? &weight[(position - 1) * base] : nullptr;
        for (std::uint64_t high = base; high-- > 0;) {  // high = 0 last: it updates the finished entries in place
          const std::uint64_t add = w != nullptr ? w[high] : 0;
          for (std::uint64_t low = 0; low < size; ++low) group[high * size + low] = group[low] + add;
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
  std::uint64_t n = index;
  for (; n > std::numeric_limits<std::uint32_t>::max(); ++g, table += group_base) {
    const std::uint64_t quotient = n / group_base;
    sum += table[n - quotient * group_base];
    n = quotient;
  }
  // Below 2^32, divide by multiplying (Lemire, Kaser, Kurz 2019, "Faster remainder by direct computation": exact
  // for 32-bit dividends and divisors >= 2 with the 64-bit inverse ceil(2^64 / group_base)).
  const std::uint64_t inverse = dimension.group_inverse;
  for (; n != 0; ++g, table += group_base) {
    const std::uint64_t low_bits = inverse * n;
    const auto remainder = static_cast<std::uint64_t>((static_cast<Uint128>(low_bits) * group_base) >> 64);
    sum += table[remainder];
    n = static_cast<std::uint64_t>((static_cast<Uint128>(inverse) * n) >> 64);
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
