// Deterministic random numbers that are the same on every platform, compiler and library version.
//
// Studies must be reproducible "today or in six months", so nothing here uses std:: distributions (whose output
// the standard leaves to the implementation). Rng is xoshiro256** seeded through SplitMix64. Not thread-safe:
// give each thread its own Rng.
#pragma once

#include <cstdint>
#include <utility>

namespace dltune {

// Mixes a seed with a stream number into a new, well-spread seed (SplitMix64 finalizer). Use it to derive
// independent streams: MixSeed(study_seed, dimension).
std::uint64_t MixSeed(std::uint64_t seed, std::uint64_t stream);

class Rng {
 public:
  explicit Rng(std::uint64_t seed);

  // 64 uniformly random bits.
  std::uint64_t NextU64();
  // A uniform real in [0, 1) with 53 random bits.
  double Uniform();
  // A uniform integer in [0, n); n must be > 0. Unbiased (rejection sampling).
  std::uint64_t Below(std::uint64_t n);

  // Fisher-Yates shuffle in place of a random-access container (vector, array) or view (span).
  template <typename Container>
  void Shuffle(Container&& items) {
    for (std::size_t i = items.size(); i > 1; --i) {
      const std::size_t j = static_cast<std::size_t>(Below(i));
      std::swap(items[i - 1], items[j]);
    }
  }

 private:
  std::uint64_t state_[4];
};

}  // namespace dltune
