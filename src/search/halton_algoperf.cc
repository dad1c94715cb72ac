#include "halton_algoperf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "dltune/core/error.h"

namespace dltune {

using algoperf_detail::Uint128;

std::uint64_t NumpyRandomState::RandomInterval(std::uint64_t max) {
  if (max == 0) return 0;
  // The smallest all-ones mask covering max.
  std::uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  std::uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (NextUint32() & mask)) > max) {
    }
  } else {
    // numpy's mt19937_next64 (high word first); reached only for lists of more than 2^32 items.
    auto next64 = [this] {
      const std::uint64_t high = NextUint32();
      return (high << 32) | NextUint32();
    };
    while ((value = (next64() & mask)) > max) {
    }
  }
  return value;
}

double NumpyRandomState::RandomSample() {
  const std::uint32_t a = NextUint32() >> 5;
  const std::uint32_t b = NextUint32() >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

namespace algoperf_detail {

double TrueDivide(std::uint64_t numerator, Uint128 denominator) {
  assert(denominator != 0 && denominator <= (static_cast<Uint128>(1) << 126));
  constexpr std::uint64_t kExact = std::uint64_t{1} << 53;
  if (numerator <= kExact && denominator <= kExact) {
    // Both operands are exact doubles and IEEE division rounds correctly.
    return static_cast<double>(numerator) / static_cast<double>(denominator);
  }
  if (numerator == 0) return 0.0;
  // Normalize to b <= a < 2b, with numerator / denominator = (a / b) * 2^-exponent.
  Uint128 a = numerator;
  Uint128 b = denominator;
  int exponent = 0;
  while (a >= 2 * b) {
    b <<= 1;
    --exponent;
  }
  while (a < b) {
    a <<= 1;
    ++exponent;
  }
  // 54 quotient bits (the leading 1, 52 more, one guard bit), then the sticky remainder.
  std::uint64_t mantissa = 1;
  a -= b;
  for (int bit = 0; bit < 53; ++bit) {
    a <<= 1;
    mantissa <<= 1;
    if (a >= b) {
      a -= b;
      mantissa |= 1;
    }
  }
  const bool guard = (mantissa & 1) != 0;
  const bool sticky = a != 0;
  mantissa >>= 1;
  if (guard && (sticky || (mantissa & 1) != 0)) ++mantissa;  // round half to even
  return std::ldexp(static_cast<double>(mantissa), -52 - exponent);
}

}  // namespace algoperf_detail

std::vector<int> AlgoperfGeneratePrimes(int n) {
  // Python's int((n - 2) / 2) truncates toward zero, as C++ integer division does.
  const int half_m1 = (n - 2) / 2;
  if (half_m1 < 1) return {};
  const auto half = static_cast<std::int64_t>(half_m1);
  std::vector<bool> sieve(static_cast<std::size_t>(half) + 1, false);
  for (std::int64_t outer = 1; outer <= half; ++outer) {
    for (std::int64_t inner = outer; outer + inner + 2 * outer * inner <= half; ++inner) {
      sieve[static_cast<std::size_t>(outer + inner + 2 * outer * inner)] = true;
    }
  }
  std::vector<int> primes;
  for (int i = 1; i <= half_m1; ++i) {
    if (!sieve[static_cast<std::size_t>(i)]) primes.push_back(2 * i + 1);
  }
  return primes;
}

bool AlgoperfIsPrime(std::int64_t n) {
  if (n < 0) return false;
  // Python evaluates int(n**0.5), i.e. C pow(float(n), 0.5) truncated.
  const auto limit = static_cast<std::int64_t>(std::pow(static_cast<double>(n), 0.5));
  for (std::int64_t i = 2; i <= limit; ++i) {
    if (n % i == 0) return false;
  }
  return n != 2;
}

std::vector<int> AlgoperfDefaultPrimes(std::size_t num_dims) {
  if (num_dims == 0) throw Error("halton_algoperf: num_dims must be > 0");
  constexpr std::size_t kMaxDims = 1'000'000;
  if (num_dims > kMaxDims) {
    throw Error(fmt::format("halton_algoperf: num_dims {} is above the supported {}", num_dims, kMaxDims));
  }
  // Python regenerates generate_primes(1000 k) for k = 1, 2, ... until it has num_dims + 1 primes. Sieve once up
  // to a large enough multiple of 1000, then find that smallest k: its list is the primes below 1000 k.
  const std::size_t needed = num_dims + 1;
  int limit = 1000;
  std::vector<int> primes = AlgoperfGeneratePrimes(limit);
  while (primes.size() < needed) {
    limit *= 2;
    primes = AlgoperfGeneratePrimes(limit);
  }
  int bound = 1000;
  auto count_below = [&](int b) {
    return static_cast<std::size_t>(std::lower_bound(primes.begin(), primes.end(), b) - primes.begin());
  };
  while (count_below(bound) < needed) bound += 1000;
  const std::size_t count = count_below(bound);
  // primes[-num_dims - 1:-1]
  return std::vector<int>(primes.begin() + static_cast<std::ptrdiff_t>(count - needed),
                          primes.begin() + static_cast<std::ptrdiff_t>(count - 1));
}

namespace {

void CheckBase(int base) {
  if (base < 0 || !AlgoperfIsPrime(base)) {
    throw Error(fmt::format("halton_algoperf: each van der Corput sequence requires a prime base, received {}", base));
  }
  if (base < 2) {
    throw Error(
        fmt::format("halton_algoperf: base {} passes algoperf's _is_prime but cannot be used (Python "
                    "divides by zero or loops forever)",
                    base));
  }
}

}  // namespace

AlgoperfScramble AlgoperfMakeScramble(int base) {
  CheckBase(base);
  NumpyRandomState rng(static_cast<std::uint32_t>(base));
  AlgoperfScramble scramble;
  scramble.digits.resize(static_cast<std::size_t>(base));
  std::iota(scramble.digits.begin(), scramble.digits.end(), 0);
  rng.Shuffle(std::span<int>(scramble.digits).subspan(1));
  scramble.shift = rng.RandomSample();
  return scramble;
}

std::vector<double> AlgoperfGenerateDim(std::size_t num_samples, int base, bool per_dim_shift,
                                        const std::optional<std::vector<int>>& digits) {
  CheckBase(base);
  AlgoperfScramble scramble;
  if (digits) {
    if (digits->size() != static_cast<std::size_t>(base)) {
      throw Error(fmt::format("halton_algoperf: the digit sequence for base {} has {} entries, expected {}", base,
                              digits->size(), base));
    }
    for (int digit : *digits) {
      if (digit < 0 || digit >= base) {
        throw Error(fmt::format("halton_algoperf: digit {} is outside [0, {}) for base {}", digit, base, base));
      }
    }
    scramble.digits = *digits;
    scramble.shift = NumpyRandomState(static_cast<std::uint32_t>(base)).RandomSample();
  } else {
    scramble = AlgoperfMakeScramble(base);
  }

  const auto b = static_cast<std::uint64_t>(base);
  std::vector<double> values;
  values.reserve(num_samples);
  for (std::uint64_t index = 1; index <= num_samples; ++index) {
    double num = 0.0;
    Uint128 denominator = b;
    for (std::uint64_t i = index; i != 0; i /= b) {
      num += algoperf_detail::TrueDivide(static_cast<std::uint64_t>(scramble.digits[i % b]), denominator);
      denominator *= b;
    }
    if (per_dim_shift) num = std::fmod(num + scramble.shift, 1.0);
    values.push_back(num);
  }
  return values;
}

std::vector<std::vector<double>> AlgoperfGenerateSequence(std::size_t num_samples, std::size_t num_dims,
                                                          const AlgoperfOptions& options) {
  if (num_dims == 0) throw Error("halton_algoperf: num_dims must be > 0");
  if (options.primes && options.primes->size() != num_dims) {
    throw Error(fmt::format("halton_algoperf: {} primes given for num_dims={}; pass exactly one per dimension",
                            options.primes->size(), num_dims));
  }
  const std::vector<int> primes = options.primes ? *options.primes : AlgoperfDefaultPrimes(num_dims);

  std::vector<std::vector<double>> points(num_samples, std::vector<double>(num_dims));
  for (std::size_t d = 0; d < num_dims; ++d) {
    const std::vector<double> values =
        AlgoperfGenerateDim(num_samples + options.skip, primes[d], options.per_dim_shift);
    for (std::size_t i = 0; i < num_samples; ++i) points[i][d] = values[options.skip + i];
  }
  if (options.shuffle_sequence) {
    NumpyRandomState global(options.shuffle_seed);
    global.Shuffle(std::span<std::vector<double>>(points));
  }
  return points;
}

double AlgoperfScaleLog(double x, double min, double max) {
  // One operation per statement, in Python's order, so no compiler contracts them into fused multiply-adds.
  const double log_ratio = std::log(max / min);
  const double exponent = x * log_ratio;
  const double factor = std::exp(exponent);
  return min * factor;
}

double AlgoperfScaleLinear(double x, double min, double max) {
  const double span = max - min;
  const double scaled = x * span;
  return scaled + min;
}

std::size_t AlgoperfScaleDiscrete(double x, std::size_t count) {
  const double scaled = x * static_cast<double>(count);
  const double index = std::floor(scaled);
  if (!(index >= 0.0 && index < static_cast<double>(count))) {
    throw Error(fmt::format("halton_algoperf: point {} maps to index {} of {} feasible points", x, index, count));
  }
  return static_cast<std::size_t>(index);
}

}  // namespace dltune
