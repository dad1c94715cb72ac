// The playbook's checklist as diagnostics: each a finding about a study, with the playbook section it comes from and
// a concrete suggestion. Pure functions over StudyData (analysis.h).
#pragma once

#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune {

enum class Severity { kInfo, kWarning, kProblem };
std::string SeverityName(Severity severity);  // "info", "warning", "problem"

struct Diagnostic {
  std::string id;           // stable: "boundary", "infeasible_share", "instability", "overfitting",
                            // "late_variance", "compute_bound", "steps_too_high", "training_loss_rising",
                            // "input_bound", "aggressive_clipping"
  Severity severity = Severity::kWarning;
  std::string title;        // one line: what was found
  std::string detail;       // the evidence: trials, values, fractions
  std::string suggestion;   // what to do
  std::string section;      // the playbook section, e.g. "Identifying bad search space boundaries"
  std::string substudy;     // the sub-study it concerns ("" for the whole study)
  std::string param_id;     // the param it concerns, if any
};

// Every diagnostic that applies, most serious first (then in the order of the list above). The checks:
// - boundary: the best trials of a sub-study (its top 3, or top 10%) lie in the outer 10% of a range param's
//   (log) range: "expand the space this way".
// - infeasible_share: more than 20% (warning; 50%: problem) of finished trials are infeasible.
// - instability: infeasible trials concentrate above a learning-rate threshold and the best trial sits within 20%
//   (in log space) of it: "instability — see warmup and clipping".
// - overfitting: among the best trials, the valid objective got worse by more than 5% of its range after its best
//   step (problematic overfitting).
// - late_variance: step-to-step variation of the objective in the last 25% of training above 5% of its level.
// - compute_bound: the best steps of the best trials are in the last 25% of training: "train longer".
// - steps_too_high: every completed trial's best step is in the first 10%: "max_train_steps is too high".
// - training_loss_rising: a trial's training loss ends clearly above its minimum (smoothed): likely a pipeline bug.
// - input_bound: data wait above 10% of step time.
// - aggressive_clipping: more than 50% of steps clipped: "lower the learning rate instead".
std::vector<Diagnostic> Diagnose(const StudyData& data);

}  // namespace dltune
