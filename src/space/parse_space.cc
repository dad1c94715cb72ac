#include "space/parse_space.h"

#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/strings.h"

namespace dltune {

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
