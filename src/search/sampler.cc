#include "dltune/search/sampler.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "core/rng.h"
#include "core/strings.h"
#include "samplers.h"
#include "search/parse_sampler.h"

namespace dltune {

const std::vector<std::string>& SamplerOptions::Names() {
  static const std::vector<std::string> kNames = {"halton", "halton_algoperf", "random", "grid", "list", "gp"};
  return kNames;
}

SamplerOptions ParseSamplerOptions(const YamlNode& node) {
  SamplerOptions options;
  options.where = node.Location();
  const YamlNode* name_node = &node;
  std::optional<YamlNode> name_entry;
  if (node.IsMap()) {
    node.ExpectMap({"name", "points", "shift", "configs", "initial_trials", "warm_start"});
    name_entry = node.Find("name");
    if (!name_entry) throw node.Fail("needs name: one of " + JoinAlternatives(SamplerOptions::Names(), false));
    name_node = &*name_entry;
  }
  options.name = name_node->AsString();
  const auto& names = SamplerOptions::Names();
  if (std::find(names.begin(), names.end(), options.name) == names.end()) {
    throw name_node->Fail(fmt::format("'{}' is not a sampler{}; samplers: {}", options.name,
                                      DidYouMean(options.name, names), JoinAlternatives(names, false)));
  }
  if (!node.IsMap()) {
    if (options.name == "list") throw node.Fail("list needs its configs: write sampler: {name: list, configs: [...]}");
    return options;
  }
  if (const auto points = node.Find("points")) {
    if (options.name != "grid") throw points->Fail("applies only to the grid sampler");
    const std::int64_t value = points->AsInt();
    if (value < 2 || value > 1000) throw points->Fail("must be between 2 and 1000");
    options.grid_points = static_cast<int>(value);
  }
  if (const auto shift = node.Find("shift")) {
    if (options.name != "halton") throw shift->Fail("applies only to the halton sampler");
    options.halton_shift = shift->AsBool();
  }
  if (const auto initial = node.Find("initial_trials")) {
    if (options.name != "gp") throw initial->Fail("applies only to the gp sampler");
    const std::int64_t value = initial->AsInt();
    if (value < 0) throw initial->Fail("must be 0 or more");
    options.initial_trials = value;
  }
  if (const auto warm_start = node.Find("warm_start")) {
    if (options.name != "gp") throw warm_start->Fail("applies only to the gp sampler");
    options.warm_start = warm_start->AsString();
    if (options.warm_start.empty()) throw warm_start->Fail("must name an earlier study");
  }
  const auto configs = node.Find("configs");
  if (configs && options.name != "list") throw configs->Fail("applies only to the list sampler");
  if (options.name == "list") {
    if (!configs) throw node.Fail("list needs configs: a list of trials, each mapping param ids to values");
    for (const auto& element : configs->Elements()) {
      ListedConfig config{{}, element.Location(), element.path()};
      for (const auto& [id, value] : element.Entries()) config.values[id] = value.AsValue();
      options.configs.push_back(std::move(config));
    }
    if (options.configs.empty()) throw configs->Fail("must list at least one config");
  }
  return options;
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
