// One hyperparameter of a search space: its kind, role, domain and the condition under which it exists.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dltune/core/error.h"
#include "dltune/core/value.h"

namespace dltune {

// The playbook's three roles: compared (scientific), optimized away (nuisance), held constant (fixed).
enum class Role { kScientific, kNuisance, kFixed };

// How a parameter's values are described.
enum class ParamKind {
  kFloat,        // a real range [min, max]
  kInt,          // an integer range [min, max]
  kDiscrete,     // a list of numbers
  kCategorical,  // a list of strings or booleans
  kFixed,        // a single value
};

// How a range maps onto the unit interval.
enum class Scale { kLinear, kLog };

std::string RoleName(Role role);
std::string KindName(ParamKind kind);
std::string ScaleName(Scale scale);

// Values of a trial's params, by param id.
using Assignment = std::map<std::string, Value>;

// `when: {optimizer: adam}`: the param exists only in trials whose `param_id` takes one of `values`.
struct Condition {
  std::string param_id;
  std::vector<Value> values;
};

// A hyperparameter. Plain value type; SearchSpace validates a set of them together.
struct Param {
  std::string id;    // unique key in the spec's `space:` map
  std::string name;  // the name the workload sees; conditional params may share it
  ParamKind kind = ParamKind::kFloat;
  Role role = Role::kNuisance;
  Scale scale = Scale::kLinear;
  double min = 0.0;             // kFloat, kInt
  double max = 1.0;             // kFloat, kInt
  std::vector<Value> values;    // kDiscrete, kCategorical: the choices; kFixed: the one value
  std::vector<Condition> when;  // all must hold for the param to exist
  std::string description;
  SourceLocation where;  // where the spec defines it

  // True for ranges and lists; false for a single fixed value.
  bool Varies() const { return kind != ParamKind::kFixed; }
  // True when it is a finite set of choices (discrete, categorical, fixed).
  bool IsChoice() const {
    return kind == ParamKind::kDiscrete || kind == ParamKind::kCategorical || kind == ParamKind::kFixed;
  }
  bool IsConditional() const { return !when.empty(); }

  // Maps u in [0, 1) to a value. Ranges: linear min + u (max - min), log min exp(u log(max/min)); integers get
  // an equal share each (log: a share proportional to their log-width); choices get an equal share each.
  Value FromUnit(double u) const;
  // The inverse: the unit-interval position of a value (the middle of a choice's share).
  double ToUnit(const Value& value) const;
  // Whether `value` is in the domain (inside the range, or one of the choices).
  bool Contains(const Value& value) const;
  // Every value of a choice param, or `points` evenly spaced values of a range (distinct integers for kInt).
  std::vector<Value> GridValues(int points) const;
  // "[0.001, 1] log", "{nesterov, adam}", "= 128": the domain as a person reads it.
  std::string DomainText() const;
  // "optimizer=adam" or "optimizer in {adam, nadam}", joined by ", "; "" for an unconditional param.
  std::string ConditionText() const;
};

}  // namespace dltune
