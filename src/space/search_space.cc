#include "dltune/space/search_space.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/strings.h"

namespace dltune {
namespace {

SpecError ParamError(const Param& param, const std::string& message) {
  return SpecError(param.where, "space." + param.id, message);
}

bool ValueListsOverlap(const std::vector<Value>& a, const std::vector<Value>& b) {
  for (const auto& x : a) {
    for (const auto& y : b) {
      if (SameValue(x, y)) return true;
    }
  }
  return false;
}

// Two params can be active in one trial unless some param they both condition on takes disjoint values.
bool MutuallyExclusive(const Param& a, const Param& b) {
  for (const auto& ca : a.when) {
    for (const auto& cb : b.when) {
      if (ca.param_id == cb.param_id && !ValueListsOverlap(ca.values, cb.values)) return true;
    }
  }
  return false;
}

}  // namespace

SearchSpace::SearchSpace(std::vector<Param> params) : params_(std::move(params)) { Validate(); }

const Param* SearchSpace::Find(const std::string& id) const {
  for (const auto& param : params_) {
    if (param.id == id) return &param;
  }
  return nullptr;
}

std::vector<std::string> SearchSpace::Ids() const {
  std::vector<std::string> ids;
  for (const auto& param : params_) ids.push_back(param.id);
  return ids;
}

std::vector<const Param*> SearchSpace::WithRole(Role role) const {
  std::vector<const Param*> selected;
  for (const auto& param : params_) {
    if (param.role == role) selected.push_back(&param);
  }
  return selected;
}

bool SearchSpace::ConditionsHold(const Param& param, const Assignment& assignment) {
  for (const auto& condition : param.when) {
    const auto it = assignment.find(condition.param_id);
    if (it == assignment.end()) return false;
    const bool matches = std::any_of(condition.values.begin(), condition.values.end(),
                                     [&](const Value& v) { return SameValue(v, it->second); });
    if (!matches) return false;
  }
  return true;
}

void SearchSpace::Validate() {
  std::set<std::string> ids;
  for (const auto& param : params_) {
    if (!ids.insert(param.id).second) throw ParamError(param, "is defined twice");
  }
  for (const auto& param : params_) {
    for (const auto& condition : param.when) {
      const Param* target = Find(condition.param_id);
      const std::string key = fmt::format("when.{}", condition.param_id);
      if (target == nullptr) {
        throw ParamError(param,
                         fmt::format("{} names no param of the space{}", key, DidYouMean(condition.param_id, Ids())));
      }
      if (target == &param) throw ParamError(param, key + " cannot depend on the param itself");
      if (!target->IsChoice()) {
        throw ParamError(param,
                         fmt::format("{}: a condition needs a param with a list of values, but '{}' is a {} range", key,
                                     target->id, KindName(target->kind)));
      }
      for (const auto& value : condition.values) {
        if (!target->Contains(value)) {
          throw ParamError(param, fmt::format("{}: '{}' is not a value of {} {}", key, FormatValue(value), target->id,
                                              target->DomainText()));
        }
      }
    }
    if (param.role == Role::kScientific && param.IsConditional()) {
      throw ParamError(param, "is scientific and conditional; scientific params must exist in every trial");
    }
  }

  // Order params so each follows the params its conditions name; what cannot be ordered is a cycle.
  std::vector<bool> placed(params_.size(), false);
  dependency_order_.clear();
  while (dependency_order_.size() < params_.size()) {
    bool progress = false;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      if (placed[i]) continue;
      const bool ready = std::all_of(params_[i].when.begin(), params_[i].when.end(), [&](const Condition& c) {
        const Param* target = Find(c.param_id);
        return placed[static_cast<std::size_t>(target - params_.data())];
      });
      if (ready) {
        placed[i] = true;
        dependency_order_.push_back(i);
        progress = true;
      }
    }
    if (!progress) {
      const auto it = std::find(placed.begin(), placed.end(), false);
      throw ParamError(params_[static_cast<std::size_t>(it - placed.begin())],
                       "has conditions that form a cycle (a param cannot depend on itself through others)");
    }
  }

  // The playbook: same-named conditional params are distinct params, but a trial can hold only one of them.
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (params_[i].name == params_[j].name && !MutuallyExclusive(params_[i], params_[j])) {
        throw ParamError(params_[i],
                         fmt::format("shares the name '{}' with {} (line {}) and both can exist in the same "
                                     "trial; give them conditions on one param with different values",
                                     params_[i].name, params_[j].id, params_[j].where.line));
      }
    }
  }
}

}  // namespace dltune
