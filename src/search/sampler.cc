#include "dltune/search/sampler.h"

#include <algorithm>

#include <fmt/format.h>

namespace dltune {

const std::vector<std::string>& SamplerOptions::Names() {
  static const std::vector<std::string> kNames = {"halton", "halton_algoperf", "random", "grid", "list", "gp"};
  return kNames;
}

std::uint64_t ScientificCombinationCount(const SearchSpace& space) {
  std::uint64_t count = 1;
  for (const Param* param : space.WithRole(Role::kScientific)) {
    if (!param->IsChoice()) continue;
    const std::uint64_t values = param->values.size();
    if (values != 0 && count > UINT64_MAX / values) return UINT64_MAX;
    count *= values;
  }
  return count;
}

Assignment ScientificCombination(const SearchSpace& space, std::uint64_t index) {
  // Mixed radix, the last param the fastest digit.
  std::vector<const Param*> params;
  for (const Param* param : space.WithRole(Role::kScientific)) {
    if (param->IsChoice()) params.push_back(param);
  }
  Assignment combination;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const std::uint64_t values = (*it)->values.size();
    combination[(*it)->id] = (*it)->values[index % values];
    index /= values;
  }
  return combination;
}

std::vector<Assignment> ScientificCombinations(const SearchSpace& space) {
  const std::uint64_t count = ScientificCombinationCount(space);
  if (count > kMaxScientificCombinations) {
    throw Error(fmt::format("the scientific params have {} combinations of values; at most {} can be enumerated",
                            count == UINT64_MAX ? std::string("more than 2^64") : std::to_string(count),
                            kMaxScientificCombinations));
  }
  std::vector<Assignment> combinations;
  combinations.reserve(count);
  for (std::uint64_t i = 0; i < count; ++i) combinations.push_back(ScientificCombination(space, i));
  return combinations;
}

std::vector<std::size_t> SampledDimensions(const SearchSpace& space, bool joint) {
  std::vector<std::size_t> dims;
  const auto& params = space.params();
  for (const bool conditional : {false, true}) {
    for (std::size_t i = 0; i < params.size(); ++i) {
      const Param& param = params[i];
      if (!param.Varies() || param.IsConditional() != conditional) continue;
      // Scientific choices are given by the sub-study (separate) or spread evenly by index (joint).
      if (param.role == Role::kScientific && (!joint || param.IsChoice())) continue;
      dims.push_back(i);
    }
  }
  return dims;
}

}  // namespace dltune
