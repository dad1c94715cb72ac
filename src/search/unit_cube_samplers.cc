// halton (default), halton_algoperf and random: each trial is a point of the unit cube over the sampled
// dimensions, mapped through the params' unit transforms.
#include <fmt/format.h>

#include "core/rng.h"
#include "halton_algoperf.h"
#include "samplers.h"
#include "search/halton.h"

namespace dltune::internal {
namespace {

class UnitCubeSampler : public Sampler {
 public:
  explicit UnitCubeSampler(const SamplingTarget& target)
      : target_(target),
        dims_(SampledDimensions(*target.space, target.joint)),
        combinations_(target.joint ? ScientificCombinations(*target.space) : std::vector<Assignment>{}) {}

  std::uint64_t TrialCount() const override { return target_.trials; }

  Assignment Suggest(std::uint64_t index) const override {
    Assignment given = target_.scientific;
    if (target_.joint) given = JointScientificValues(combinations_, target_.seed, index);
    std::vector<double> point(dims_.size());
    if (!point.empty()) Fill(index, point);
    return CompleteAssignment(*target_.space, std::move(given), dims_, [&](std::size_t d) { return point[d]; });
  }

 protected:
  // Writes the unit-cube point of trial `index`.
  virtual void Fill(std::uint64_t index, std::span<double> point) const = 0;
  std::size_t dimension_count() const { return dims_.size(); }
  const SamplingTarget& target() const { return target_; }

 private:
  SamplingTarget target_;
  std::vector<std::size_t> dims_;
  std::vector<Assignment> combinations_;
};

class HaltonSampler final : public UnitCubeSampler {
 public:
  HaltonSampler(const SamplingTarget& target, bool shift)
      : UnitCubeSampler(target),
        halton_(std::max<std::size_t>(dimension_count(), 1), target.seed,
                HaltonOptions{.scramble = true, .shift = shift}) {}

 private:
  void Fill(std::uint64_t index, std::span<double> point) const override { halton_.Point(index, point); }
  ScrambledHalton halton_;
};

class RandomSampler final : public UnitCubeSampler {
 public:
  using UnitCubeSampler::UnitCubeSampler;

 private:
  void Fill(std::uint64_t index, std::span<double> point) const override {
    for (std::size_t d = 0; d < point.size(); ++d) {
      Rng rng(MixSeed(MixSeed(target().seed, d + 1), index));
      point[d] = rng.Uniform();
    }
  }
};

// Reproduces algoperf's generate_search: the whole shuffled sequence is made up front, as there.
class AlgoperfSampler final : public UnitCubeSampler {
 public:
  explicit AlgoperfSampler(const SamplingTarget& target) : UnitCubeSampler(target) {
    if (dimension_count() == 0 || target.trials == 0) return;
    AlgoperfOptions options;
    options.shuffle_seed = static_cast<std::uint32_t>(target.seed);
    points_ = AlgoperfGenerateSequence(target.trials, dimension_count(), options);
  }

 private:
  void Fill(std::uint64_t index, std::span<double> point) const override {
    const auto& row = points_.at(index);
    std::copy(row.begin(), row.end(), point.begin());
  }
  std::vector<std::vector<double>> points_;
};

}  // namespace

std::unique_ptr<Sampler> MakeUnitCubeSampler(const SamplerOptions& options, const SamplingTarget& target) {
  if (options.name == "halton") {
    const auto dims = SampledDimensions(*target.space, target.joint);
    if (dims.size() > ScrambledHalton::kMaxDims) {
      const Param& first_extra = target.space->params()[dims[ScrambledHalton::kMaxDims]];
      throw SpecError(first_extra.where, "space." + first_extra.id,
                      fmt::format("is sampled param number {}; halton supports at most {} (use random)",
                                  ScrambledHalton::kMaxDims + 1, ScrambledHalton::kMaxDims));
    }
    return std::make_unique<HaltonSampler>(target, options.halton_shift);
  }
  if (options.name == "random") return std::make_unique<RandomSampler>(target);
  if (options.name == "halton_algoperf") {
    if (target.seed > UINT32_MAX) {
      throw SpecError(options.where, "seed", "must be below 2^32 for halton_algoperf (numpy's seed range)");
    }
    return std::make_unique<AlgoperfSampler>(target);
  }
  throw SpecError(options.where, "sampler", fmt::format("'{}' is not a sampler", options.name));
}

}  // namespace dltune::internal
