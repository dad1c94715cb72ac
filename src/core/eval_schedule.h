// When a trial evaluates: the spec's `training.eval_schedule` (the playbook's "Identifying unstable workloads":
// "common evaluation schedules can miss these issues by not evaluating frequently enough"). Its text is one of
//   every      every eval_every_steps steps (the default, also written "")
//   dense:N    every step up to step N, then every eval_every_steps steps
//   log:K      K points spaced evenly on a log scale from step 1 to max_train_steps: step round(M^(i/(K-1)))
//              for i = 0..K-1 (duplicates once), so dense early and sparse late
// and always the last step. Steps count from 1 (the step after the first update).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dltune {

struct EvalSchedule {
  enum class Kind { kEvery, kDenseStart, kLogSpaced };
  Kind kind = Kind::kEvery;
  std::int64_t count = 0;  // N of dense:N, K of log:K

  // Throws Error with the accepted forms for anything else ("log:1", "dense:0", "every:3", "sometimes").
  static EvalSchedule Parse(std::string_view text);
  std::string Text() const;  // "every", "dense:100", "log:50"

  // Whether the trainer evaluates after step `step` (1..max_train_steps), `every` being eval_every_steps.
  bool Evaluates(std::int64_t step, std::int64_t every, std::int64_t max_train_steps) const;
  // Evaluations bunch at the start: curve charts draw steps on a log axis.
  bool DenseEarly() const { return kind != Kind::kEvery; }
};

}  // namespace dltune
