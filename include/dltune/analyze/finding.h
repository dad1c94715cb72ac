// A finding of the playbook's checklist (Diagnostic): what was found, the evidence, what to do and the playbook
// section it comes from. The record alone, for the code that makes, stores or shows findings; Diagnose
// (diagnostics.h) makes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dltune {

enum class Severity { kInfo, kWarning, kProblem };
std::string SeverityName(Severity severity);  // "info", "warning", "problem"

struct Diagnostic {
  std::string id;  // stable: "boundary", "infeasible_share", "instability", "overfitting",
                   // "late_variance", "compute_bound", "steps_too_high", "training_loss_rising",
                   // "input_bound", "aggressive_clipping", "within_noise", "beyond_noise", "single_runs",
                   // "winner_changed", "winner_held", "adam_budget", "fit_steps", "fit_steps_edge",
                   // "fit_steps_none", "periodic_validation", "throughput", "throughput_input_bound"
  Severity severity = Severity::kWarning;
  std::string title;       // one line: what was found
  std::string detail;      // the evidence: trials, values, fractions
  std::string suggestion;  // what to do
  std::string section;     // the playbook section's title, e.g. "Identifying bad search space boundaries"
  std::string substudy;    // the sub-study it concerns ("" for the whole study, or when it has one sub-study)
  std::string param_id;    // the param it concerns, if any
  std::vector<std::uint64_t> trials;  // the trials the evidence names, for linking to them
  // boundary: the bound `param_id`'s range expands to (its min or max beyond the current one), when it can expand
  // (not a linear range at 0, nor a fraction at 1); what dltune plan expand writes.
  std::optional<double> expand_to;
  // The note that marks it handled (dltune note STUDY --resolves ID TEXT), as "note 3: TEXT"; "" while it is open.
  // dltune next passes over a handled finding and dltune doctor lists it last, apart.
  std::string handled;
};

// The id of a playbook section's heading on GitHub, without '#' ("gradient-clipping"): lower case, spaces to '-',
// punctuation except '-' and '_' dropped. For linking `section` to the playbook: <playbook URL> + "#" + anchor.
std::string PlaybookAnchor(const std::string& section);

}  // namespace dltune
