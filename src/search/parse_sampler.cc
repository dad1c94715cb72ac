#include "search/parse_sampler.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "core/strings.h"

namespace dltune {

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

}  // namespace dltune
