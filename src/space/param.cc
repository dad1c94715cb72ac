#include "dltune/space/param.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include <fmt/format.h>

namespace dltune {

std::string RoleName(Role role) {
  switch (role) {
    case Role::kScientific: return "scientific";
    case Role::kNuisance: return "nuisance";
    case Role::kFixed: return "fixed";
  }
  return "?";
}

std::string KindName(ParamKind kind) {
  switch (kind) {
    case ParamKind::kFloat: return "float";
    case ParamKind::kInt: return "int";
    case ParamKind::kDiscrete: return "discrete";
    case ParamKind::kCategorical: return "categorical";
    case ParamKind::kFixed: return "fixed";
  }
  return "?";
}

std::string ScaleName(Scale scale) { return scale == Scale::kLog ? "log" : "linear"; }

namespace {

// Index of the share of [0, 1) that u falls in, for `count` equal shares.
std::size_t ShareIndex(double u, std::size_t count) {
  const double scaled = std::floor(u * static_cast<double>(count));
  if (!(scaled > 0.0)) return 0;
  return std::min(static_cast<std::size_t>(scaled), count - 1);
}

}  // namespace

Value Param::FromUnit(double u) const {
  switch (kind) {
    case ParamKind::kFloat: {
      // The same expressions as algoperf's halton.py, so halton_algoperf studies reproduce bit for bit.
      const double x = scale == Scale::kLog ? min * std::exp(u * std::log(max / min)) : u * (max - min) + min;
      return std::clamp(x, min, max);
    }
    case ParamKind::kInt: {
      const double x = scale == Scale::kLog ? std::exp(std::log(min) + u * (std::log(max + 1.0) - std::log(min)))
                                            : min + u * (max - min + 1.0);
      return static_cast<std::int64_t>(std::clamp(std::floor(x), min, max));
    }
    case ParamKind::kDiscrete:
    case ParamKind::kCategorical:
    case ParamKind::kFixed: assert(!values.empty()); return values[ShareIndex(u, values.size())];
  }
  return values.front();
}

double Param::ToUnit(const Value& value) const {
  switch (kind) {
    case ParamKind::kFloat: {
      const double x = NumericValue(value).value_or(min);
      return scale == Scale::kLog ? std::log(x / min) / std::log(max / min) : (x - min) / (max - min);
    }
    case ParamKind::kInt: {
      const double x = NumericValue(value).value_or(min);
      return scale == Scale::kLog ? (std::log(x + 0.5) - std::log(min)) / (std::log(max + 1.0) - std::log(min))
                                  : (x - min + 0.5) / (max - min + 1.0);
    }
    default: {
      for (std::size_t i = 0; i < values.size(); ++i) {
        if (SameValue(values[i], value)) return (static_cast<double>(i) + 0.5) / static_cast<double>(values.size());
      }
      return 0.5;
    }
  }
}

bool Param::Contains(const Value& value) const {
  if (kind == ParamKind::kFloat || kind == ParamKind::kInt) {
    const auto x = NumericValue(value);
    if (!x || *x < min || *x > max) return false;
    return kind == ParamKind::kFloat || std::floor(*x) == *x;
  }
  return std::any_of(values.begin(), values.end(), [&](const Value& v) { return SameValue(v, value); });
}

std::vector<Value> Param::GridValues(int points) const {
  if (IsChoice()) return values;
  std::vector<Value> grid;
  const int count = std::max(points, 1);
  for (int k = 0; k < count; ++k) {
    const double t = count == 1 ? 0.5 : static_cast<double>(k) / static_cast<double>(count - 1);
    double x = scale == Scale::kLog ? std::exp(std::log(min) + t * std::log(max / min)) : min + t * (max - min);
    if (k == count - 1 && count > 1) x = max;
    if (kind == ParamKind::kInt) {
      const Value rounded = static_cast<std::int64_t>(std::clamp(std::round(x), min, max));
      if (grid.empty() || !SameValue(grid.back(), rounded)) grid.push_back(rounded);
    } else {
      grid.emplace_back(x);
    }
  }
  return grid;
}

std::string Param::DomainText() const {
  switch (kind) {
    case ParamKind::kFloat:
    case ParamKind::kInt:
      return fmt::format("[{}, {}]{}",
                         FormatValue(kind == ParamKind::kInt ? Value(static_cast<std::int64_t>(min)) : Value(min)),
                         FormatValue(kind == ParamKind::kInt ? Value(static_cast<std::int64_t>(max)) : Value(max)),
                         scale == Scale::kLog ? " log" : "");
    case ParamKind::kFixed: return "= " + FormatValue(values.front());
    default: {
      std::string text = "{";
      for (std::size_t i = 0; i < values.size(); ++i) text += (i ? ", " : "") + FormatValue(values[i]);
      return text + "}";
    }
  }
}

std::string Param::ConditionText() const {
  std::string text;
  for (const auto& condition : when) {
    if (!text.empty()) text += ", ";
    if (condition.values.size() == 1) {
      text += condition.param_id + "=" + FormatValue(condition.values.front());
    } else {
      text += condition.param_id + " in {";
      for (std::size_t i = 0; i < condition.values.size(); ++i)
        text += (i ? ", " : "") + FormatValue(condition.values[i]);
      text += "}";
    }
  }
  return text;
}

}  // namespace dltune
