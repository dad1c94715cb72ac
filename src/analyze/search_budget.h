// How much of an optimizer a study's budget of trials can tune: the playbook's FAQ "How should Adam's
// hyperparameters be tuned?" — "If < 10 trials in a study, only tune the (base) learning rate. If 10-25 trials, tune
// learning rate and beta1. If 25+ trials, tune the learning rate, beta1 and epsilon. If one can run substantially more
// than 25 trials, additionally tune beta2." Pure functions of a spec.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dltune/analyze/finding.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// The number of trials from which dltune reads "substantially more than 25": beta2 is worth tuning from here.
inline constexpr std::uint64_t kAdamBeta2Trials = 50;

// Which of Adam's hyperparameters a study of `trials` trials (per sub-study) tunes: learning rate always; beta1 from
// 10; epsilon above 25; beta2 from kAdamBeta2Trials.
struct AdamBudget {
  bool beta1 = false;
  bool epsilon = false;
  bool beta2 = false;
};
AdamBudget AdamBudgetFor(std::uint64_t trials);

// The optimizers `SuggestedSpace` knows.
const std::vector<std::string>& SuggestableOptimizers();

// A `space:` mapping (YAML text, commented) for `optimizer` (adam, nadam, nesterov, momentum, sgd) at a budget of
// `trials` per sub-study: the optimizer fixed, its hyperparameters searched as the budget supports (log ranges,
// momentum-like ones as one_minus_*), the others fixed at their defaults. Throws Error for an unknown optimizer or
// trials < 1.
std::string SuggestedSpace(const std::string& optimizer, std::uint64_t trials);

// Findings "adam_budget" (warning): a sub-study that trains Adam (or NAdam) and searches beta1 with fewer than 10
// trials, epsilon with 25 or fewer, or beta2 with fewer than kAdamBeta2Trials. A sub-study's budget is its
// configurations, divided by the optimizer's values when the optimizer itself is searched in it.
std::vector<Diagnostic> CheckAdamBudget(const StudySpec& spec);

}  // namespace dltune
