#include "dltune/core/value.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace dltune {

std::string FormatValue(const Value& value) {
  struct Formatter {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(std::int64_t i) const { return fmt::format("{}", i); }
    std::string operator()(double d) const { return fmt::format("{}", d); }  // shortest round-trip
    std::string operator()(const std::string& s) const { return s; }
  };
  return std::visit(Formatter{}, value);
}

nlohmann::json ValueToJson(const Value& value) {
  return std::visit([](const auto& v) { return nlohmann::json(v); }, value);
}

std::optional<Value> ValueFromJson(const nlohmann::json& json) {
  if (json.is_boolean()) return Value(json.get<bool>());
  if (json.is_number_integer()) return Value(json.get<std::int64_t>());
  if (json.is_number()) return Value(json.get<double>());
  if (json.is_string()) return Value(json.get<std::string>());
  return std::nullopt;
}

std::optional<double> NumericValue(const Value& value) {
  if (const auto* i = std::get_if<std::int64_t>(&value)) return static_cast<double>(*i);
  if (const auto* d = std::get_if<double>(&value)) return *d;
  return std::nullopt;
}

bool SameValue(const Value& a, const Value& b) {
  const auto na = NumericValue(a);
  const auto nb = NumericValue(b);
  if (na && nb) return *na == *nb;
  return a == b;
}

}  // namespace dltune
