#include "samplers.h"

#include <algorithm>

#include "core/rng.h"
#include "dltune/core/error.h"

namespace dltune {

namespace internal {

Assignment CompleteAssignment(const SearchSpace& space, Assignment given, const std::vector<std::size_t>& dims,
                              const std::function<double(std::size_t)>& coordinate) {
  const auto& params = space.params();
  for (const std::size_t i : space.DependencyOrder()) {
    const Param& param = params[i];
    if (given.count(param.id) != 0) continue;
    if (!SearchSpace::ConditionsHold(param, given)) continue;
    if (!param.Varies()) {
      given[param.id] = param.values.front();
      continue;
    }
    const auto dim = std::find(dims.begin(), dims.end(), i);
    if (dim == dims.end()) continue;  // a scientific param the caller chose not to sample
    given[param.id] = param.FromUnit(coordinate(static_cast<std::size_t>(dim - dims.begin())));
  }
  return given;
}

Assignment JointScientificValues(const std::vector<Assignment>& combinations, std::uint64_t seed, std::uint64_t index) {
  // Each block of K consecutive trials holds every combination once, in an order drawn per block.
  const std::uint64_t count = combinations.size();
  std::vector<std::size_t> order(count);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  Rng rng(MixSeed(MixSeed(seed, 0x5C1E17F1CULL), index / count));
  rng.Shuffle(order);
  return combinations[order[index % count]];
}

}  // namespace internal

std::unique_ptr<Sampler> MakeSampler(const SamplerOptions& options, const SamplingTarget& target) {
  if (target.space == nullptr) throw Error("MakeSampler needs a search space");
  if (options.name == "grid") return internal::MakeGridSampler(options, target);
  if (options.name == "list") return internal::MakeListSampler(options, target);
  if (options.name == "gp") return internal::MakeGpSampler(options, target);
  return internal::MakeUnitCubeSampler(options, target);
}

}  // namespace dltune
