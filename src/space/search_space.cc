#include "dltune/space/search_space.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "core/strings.h"
#include "space/parse_space.h"

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

namespace {

const std::vector<std::string> kParamKeys = {"min",   "max",  "scale", "type", "values",
                                             "value", "role", "when",  "name", "description"};

Role ParseRole(const YamlNode& node) {
  const std::string text = node.AsString();
  if (text == "scientific") return Role::kScientific;
  if (text == "nuisance") return Role::kNuisance;
  if (text == "fixed") return Role::kFixed;
  throw node.Fail(fmt::format("must be scientific, nuisance or fixed, not '{}'{}", text,
                              DidYouMean(text, {"scientific", "nuisance", "fixed"})));
}

void ParseRange(const YamlNode& entry, Param& param) {
  const auto min_node = entry.Find("min");
  const auto max_node = entry.Find("max");
  if (!min_node || !max_node)
    throw entry.Fail(min_node ? "needs max: together with min:" : "needs min: together with max:");
  param.min = min_node->AsDouble();
  param.max = max_node->AsDouble();
  param.kind = ParamKind::kFloat;
  if (const auto type = entry.Find("type")) {
    const std::string text = type->AsString();
    if (text == "int") {
      param.kind = ParamKind::kInt;
      param.min = static_cast<double>(min_node->AsInt());
      param.max = static_cast<double>(max_node->AsInt());
    } else if (text != "float") {
      throw type->Fail(fmt::format("must be float or int, not '{}'{}", text, DidYouMean(text, {"float", "int"})));
    }
  }
  if (const auto scale = entry.Find("scale")) {
    const std::string text = scale->AsString();
    if (text == "log") {
      param.scale = Scale::kLog;
    } else if (text != "linear") {
      throw scale->Fail(fmt::format("must be linear or log, not '{}'{}", text, DidYouMean(text, {"linear", "log"})));
    }
  }
  if (!std::isfinite(param.min)) throw min_node->Fail("must be a finite number");
  if (!std::isfinite(param.max)) throw max_node->Fail("must be a finite number");
  if (param.scale == Scale::kLog && param.min <= 0.0) throw min_node->Fail("must be > 0 for scale: log");
  if (param.scale == Scale::kLog && param.kind == ParamKind::kInt && param.min < 1.0) {
    throw min_node->Fail("must be >= 1 for an int with scale: log");
  }
  if (!(param.min < param.max)) {
    throw max_node->Fail(fmt::format("must be greater than min ({}); for a single value write value: {}",
                                     FormatValue(param.min), FormatValue(param.min)));
  }
  // A linear range wider than the largest double cannot be sampled (min + u * (max - min) overflows).
  if (param.scale == Scale::kLinear && !std::isfinite(param.max - param.min)) {
    throw max_node->Fail(
        fmt::format("is too far from min ({}): the range is wider than a double holds (about "
                    "1.8e308); narrow it, or use scale: log for a range over many magnitudes",
                    FormatValue(param.min)));
  }
}

void ParseValues(const YamlNode& values_node, Param& param) {
  const auto elements = values_node.Elements();
  if (elements.empty()) throw values_node.Fail("must list at least one value");
  bool numbers = false;
  bool others = false;
  // Values seen so far, as SameValue compares them (numbers by value, whatever their type): a set, so that a list of
  // 100,000 values takes no longer to check than to read.
  std::set<double> seen_numbers;
  std::set<Value> seen_others;
  param.values.reserve(elements.size());
  for (const auto& element : elements) {
    const Value value = element.AsValue();
    const auto number = NumericValue(value);
    if (number && !std::isfinite(*number)) throw element.Fail("must be a finite number");
    (number ? numbers : others) = true;
    const bool repeated =
        number ? !seen_numbers.insert(*number == 0 ? 0.0 : *number).second : !seen_others.insert(value).second;
    if (repeated) throw element.Fail(fmt::format("repeats the value {}", FormatValue(value)));
    param.values.push_back(value);
  }
  if (numbers && others) {
    throw values_node.Fail("mixes numbers with text or booleans; quote the numbers to make them all categories");
  }
  param.kind = numbers ? ParamKind::kDiscrete : ParamKind::kCategorical;
}

std::vector<Condition> ParseWhen(const YamlNode& when) {
  std::vector<Condition> conditions;
  for (const auto& [id, node] : when.Entries()) {
    Condition condition{id, {}};
    if (node.IsSequence()) {
      for (const auto& element : node.Elements()) condition.values.push_back(element.AsValue());
      if (condition.values.empty()) throw node.Fail("must list at least one value");
    } else {
      condition.values.push_back(node.AsValue());
    }
    conditions.push_back(std::move(condition));
  }
  if (conditions.empty()) throw when.Fail("must name at least one param, e.g. when: {optimizer: adam}");
  return conditions;
}

Param ParseParam(const std::string& id, const YamlNode& entry, SourceLocation where) {
  static const std::regex kIdPattern(R"([A-Za-z_][A-Za-z0-9_\-]*)");
  Param param;
  param.id = id;
  param.name = id;
  param.where = std::move(where);
  if (!std::regex_match(id, kIdPattern)) {
    throw entry.Fail("is not a valid param id: use letters, digits, '_' and '-', starting with a letter or '_'");
  }
  if (!entry.IsMap()) {
    // Shorthand: `batch_size: 128` is a fixed param; `optimizer: [sgd, adam]` a list.
    if (entry.IsSequence()) {
      ParseValues(entry, param);
    } else {
      param.kind = ParamKind::kFixed;
      param.role = Role::kFixed;
      param.values.push_back(entry.AsValue());
    }
    return param;
  }
  entry.ExpectMap(kParamKeys);
  const bool has_range = entry.Find("min") || entry.Find("max");
  const auto values = entry.Find("values");
  const auto value = entry.Find("value");
  if (int{has_range} + int{values.has_value()} + int{value.has_value()} != 1) {
    throw entry.Fail("needs exactly one of: min and max (a range), values (a list) or value (a fixed value)");
  }
  if (has_range) {
    ParseRange(entry, param);
  } else {
    for (const char* key : {"scale", "type"}) {
      if (const auto node = entry.Find(key)) throw node->Fail("applies only to a range (min and max)");
    }
    if (values) {
      ParseValues(*values, param);
    } else {
      const Value fixed = value->AsValue();
      if (const auto number = NumericValue(fixed); number && !std::isfinite(*number)) {
        throw value->Fail("must be a finite number");
      }
      param.kind = ParamKind::kFixed;
      param.role = Role::kFixed;
      param.values.push_back(fixed);
    }
  }
  if (const auto role = entry.Find("role")) {
    param.role = ParseRole(*role);
    if (param.role == Role::kFixed && param.Varies()) {
      throw role->Fail("is fixed, but the param has a range or a list; a fixed param has one value: write value: X");
    }
    if (param.role != Role::kFixed && !param.Varies()) {
      throw role->Fail(
          fmt::format("is {}, but a single value cannot vary; give a range or a list of values", RoleName(param.role)));
    }
  }
  if (const auto name = entry.Find("name")) {
    param.name = name->AsString();
    if (!std::regex_match(param.name, kIdPattern)) throw name->Fail("must be a plain name (letters, digits, '_', '-')");
  }
  if (const auto description = entry.Find("description")) param.description = description->AsString();
  if (const auto when = entry.Find("when")) param.when = ParseWhen(*when);
  return param;
}

}  // namespace

SearchSpace ParseSearchSpace(const YamlNode& space) {
  if (!space.IsMap()) throw space.Fail("must map param ids to their definitions");
  std::vector<Param> params;
  for (const auto& [id, entry] : space.Entries()) params.push_back(ParseParam(id, entry, space.KeyLocation(id)));
  if (params.empty()) throw space.Fail("must define at least one param");
  return SearchSpace(std::move(params));
}

}  // namespace dltune
