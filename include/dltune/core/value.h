// Typed hyperparameter values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include <nlohmann/json_fwd.hpp>

namespace dltune {

// One hyperparameter value: a boolean, an integer, a real number or a string. Immutable value type.
using Value = std::variant<bool, std::int64_t, double, std::string>;

// Text a person reads and a YAML/JSON parser reads back to the same value: shortest round-trip form for reals
// ("0.001", "1e-08"), "true"/"false", strings as they are.
std::string FormatValue(const Value& value);

// The value as a JSON scalar (bool, integer, number or string).
nlohmann::json ValueToJson(const Value& value);

// A JSON scalar as a value; nullopt for null, arrays and objects.
std::optional<Value> ValueFromJson(const nlohmann::json& json);

// The value as a real number when it is an integer or a real; nullopt otherwise.
std::optional<double> NumericValue(const Value& value);

// Equality that treats an integer and a real as equal when they denote the same number (2 == 2.0).
bool SameValue(const Value& a, const Value& b);

}  // namespace dltune
