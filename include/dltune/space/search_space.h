// A validated set of hyperparameters (a spec's `space:` section, parsed by LoadStudySpec).
#pragma once

#include <string>
#include <vector>

#include "dltune/space/param.h"

namespace dltune {

// Params in spec order, checked as a whole: unique ids, conditions that name existing choice params with values
// they can take, no circular conditions, and params sharing a name never active in the same trial.
// Immutable after construction; safe to share between threads.
class SearchSpace {
 public:
  SearchSpace() = default;
  // Throws SpecError (located at the offending param) when the params do not form a valid space.
  explicit SearchSpace(std::vector<Param> params);

  const std::vector<Param>& params() const { return params_; }
  // The param with this id, or nullptr.
  const Param* Find(const std::string& id) const;
  // Ids of every param, in spec order (for "did you mean").
  std::vector<std::string> Ids() const;
  std::vector<const Param*> WithRole(Role role) const;

  // Whether every condition of `param` holds under `assignment` (params it depends on must be assigned).
  static bool ConditionsHold(const Param& param, const Assignment& assignment);
  // Indices into params() in an order where each param comes after every param its conditions name (spec order
  // otherwise).
  const std::vector<std::size_t>& DependencyOrder() const { return dependency_order_; }

 private:
  void Validate();

  std::vector<Param> params_;
  std::vector<std::size_t> dependency_order_;
};

}  // namespace dltune
