// A bit-exact reproduction of mlcommons/algorithmic-efficiency's algoperf/halton.py (the implementation the Deep
// Learning Tuning Playbook links to), for users reproducing studies made with it.
//
// Every function returns the same doubles, bit for bit, as the Python code under numpy's legacy RandomState
// (verified against a reference file of test vectors (halton_algoperf.txt, not part of this repository): numpy 1.24.2,
// Python 3.11), quirks included: base 2 is never used and 0 and 1 count as "prime", the sequence starts at index 1 and
// skips 100 more, each dimension's digit permutation comes from RandomState(base), and the points are shuffled with the
// GLOBAL numpy RNG (here an explicit `shuffle_seed`, as after np.random.seed(shuffle_seed)). AlgoperfScaleLog uses
// std::exp and std::log, identical to Python's math module when both use the same libm (glibc here).
//
// Why this is not dltune's default sampler: its default bases are the primes just below 1000 (971, 977, 983, 991
// for 4 dims), whose first few hundred radical inverses are nearly a straight line, so at typical study sizes it is
// no better than uniform random search: centered L2 discrepancy 0.00406 for 256 points in 4 dims versus 0.0039
// for uniform random and 0.00018 for scrambled Halton (see ScrambledHalton in halton.h, the default).
//
// All functions are pure and thread-safe except NumpyRandomState, which, like any RNG object, is not.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <utility>
#include <vector>

namespace dltune {

// numpy's legacy RandomState (MT19937) for the three calls halton.py makes. std::mt19937(seed) is numpy's
// init_genrand(seed), which RandomState(seed) and np.random.seed(seed) use for a 32-bit integer seed. Not
// thread-safe.
class NumpyRandomState {
 public:
  explicit NumpyRandomState(std::uint32_t seed) : engine_(seed) {}

  // The next raw 32-bit MT19937 output.
  std::uint32_t NextUint32() { return static_cast<std::uint32_t>(engine_()); }
  // numpy's random_interval(max): uniform in [0, max] by masked rejection sampling.
  std::uint64_t RandomInterval(std::uint64_t max);
  // RandomState.random_sample(): a uniform double in [0, 1) with 53 random bits from two outputs.
  double RandomSample();

  // RandomState.shuffle(list): for i = n-1 down to 1, swap items[i] with items[RandomInterval(i)].
  template <typename T>
  void Shuffle(std::span<T> items) {
    for (std::size_t i = items.size(); i-- > 1;) {
      const std::size_t j = static_cast<std::size_t>(RandomInterval(i));
      std::swap(items[i], items[j]);
    }
  }

 private:
  std::mt19937 engine_;
};

// Options of AlgoperfGenerateSequence: the keyword arguments of generate_sequence, plus the global numpy seed.
struct AlgoperfOptions {
  // Leading points generated and dropped (generate_sequence's `skip`).
  std::size_t skip = 100;
  // Add a per-dimension random shift modulo 1 (`per_dim_shift`).
  bool per_dim_shift = true;
  // Shuffle the points with the global RNG (`shuffle_sequence`).
  bool shuffle_sequence = true;
  // One prime base per dimension (`primes`); AlgoperfDefaultPrimes(num_dims) when empty.
  std::optional<std::vector<int>> primes;
  // The seed of numpy's global RNG at the call, as set by np.random.seed(shuffle_seed).
  std::uint32_t shuffle_seed = 0;
};

// generate_primes(n): the odd primes below n by the Sieve of Sundaram (2 is never included; empty for n < 4).
std::vector<int> AlgoperfGeneratePrimes(int n);

// _is_prime(n): false for 2 and composites, TRUE for 0 and 1 (the quirk); false for negative n (where Python
// would raise).
bool AlgoperfIsPrime(std::int64_t n);

// The bases generate_sequence uses when `primes` is None: the num_dims largest primes of generate_primes(1000 k)
// except the largest, for the smallest k giving num_dims + 1 primes (4 dims → 971, 977, 983, 991). Throws
// dltune::Error if num_dims is 0.
std::vector<int> AlgoperfDefaultPrimes(std::size_t num_dims);

// The randomness of one dimension: digits = [0] + RandomState(base).shuffle([1, ..., base-1]) and the shift
// drawn next (random_sample()). Throws dltune::Error for a bad base, as AlgoperfGenerateDim.
struct AlgoperfScramble {
  std::vector<int> digits;
  double shift = 0.0;
};
AlgoperfScramble AlgoperfMakeScramble(int base);

// _generate_dim(num_samples, base, per_dim_shift, shuffled_seed_sequence): the scrambled van der Corput values of
// indices 1..num_samples. `digits`, when given, replaces the shuffled digit sequence (then the shift is
// RandomState(base)'s first random_sample(), as in Python). Throws dltune::Error if base is negative, fails
// _is_prime, or is 0 or 1 (where Python divides by zero or loops forever), or if digits has a size other than base
// or a digit outside [0, base).
std::vector<double> AlgoperfGenerateDim(std::size_t num_samples, int base, bool per_dim_shift,
                                        const std::optional<std::vector<int>>& digits = std::nullopt);

// generate_sequence(num_samples, num_dims, ...): num_samples points of num_dims coordinates in [0, 1). Throws
// dltune::Error if num_dims is 0, options.primes has a length other than num_dims, or holds a bad base.
std::vector<std::vector<double>> AlgoperfGenerateSequence(std::size_t num_samples, std::size_t num_dims,
                                                          const AlgoperfOptions& options = {});

// _generate_double_point with scaling 'log': min * exp(x * log(max / min)).
double AlgoperfScaleLog(double x, double min, double max);
// _generate_double_point with scaling 'linear': x * (max - min) + min.
double AlgoperfScaleLinear(double x, double min, double max);
// _generate_discrete_point: the index int(floor(x * count)) into the feasible points. Throws dltune::Error unless
// it is in [0, count), i.e. for count 0 or x outside [0, 1) (Python raises IndexError, or for x < 0 silently
// indexes from the end).
std::size_t AlgoperfScaleDiscrete(double x, std::size_t count);

namespace algoperf_detail {

// Python's true division numerator / denominator of two integers: the exactly rounded (to nearest, ties to even)
// double of the rational number; denominator must be in (0, 2^126]. Exposed for tests.
__extension__ typedef unsigned __int128 Uint128;
double TrueDivide(std::uint64_t numerator, Uint128 denominator);

}  // namespace algoperf_detail
}  // namespace dltune
