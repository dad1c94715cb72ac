// list: the trials are written out in the spec.
#include <algorithm>

#include <fmt/format.h>

#include "core/strings.h"
#include "samplers.h"

namespace dltune::internal {
namespace {

// Checks one listed config against the space and returns it completed with the fixed params.
Assignment ValidatedConfig(const SearchSpace& space, const ListedConfig& config) {
  auto fail = [&](const std::string& key, const std::string& message) {
    return SpecError(config.where, key.empty() ? config.path : config.path + "." + key, message);
  };
  for (const auto& [id, value] : config.values) {
    const Param* param = space.Find(id);
    if (param == nullptr) throw fail(id, "names no param of the space" + DidYouMean(id, space.Ids()));
    if (!param->Varies() && !SameValue(value, param->values.front())) {
      throw fail(id, fmt::format("is fixed at {}; a config cannot change it", FormatValue(param->values.front())));
    }
    if (!param->Contains(value)) {
      throw fail(id, fmt::format("= {} is outside its domain {}", FormatValue(value), param->DomainText()));
    }
  }
  Assignment complete;
  for (const std::size_t i : space.DependencyOrder()) {
    const Param& param = space.params()[i];
    const auto given = config.values.find(param.id);
    const bool exists = SearchSpace::ConditionsHold(param, complete);
    if (!exists) {
      if (given != config.values.end()) {
        throw fail(param.id,
                   fmt::format("does not exist in this config: it exists only when {}", param.ConditionText()));
      }
      continue;
    }
    if (given != config.values.end()) {
      complete[param.id] = given->second;
    } else if (!param.Varies()) {
      complete[param.id] = param.values.front();
    } else {
      throw fail(param.id, "is missing: every config must give every param that varies");
    }
  }
  return complete;
}

class ListSampler final : public Sampler {
 public:
  ListSampler(const SamplerOptions& options, const SamplingTarget& target) {
    for (const auto& config : options.configs) {
      Assignment complete = ValidatedConfig(*target.space, config);
      // In separate mode a config belongs to the sub-study whose scientific values it gives.
      const bool belongs = std::all_of(target.scientific.begin(), target.scientific.end(), [&](const auto& entry) {
        const auto it = complete.find(entry.first);
        return it != complete.end() && SameValue(it->second, entry.second);
      });
      if (belongs) configs_.push_back(std::move(complete));
    }
  }

  std::uint64_t TrialCount() const override { return configs_.size(); }
  Assignment Suggest(std::uint64_t index) const override { return configs_.at(index); }

 private:
  std::vector<Assignment> configs_;
};

}  // namespace

std::unique_ptr<Sampler> MakeListSampler(const SamplerOptions& options, const SamplingTarget& target) {
  return std::make_unique<ListSampler>(options, target);
}

}  // namespace dltune::internal
