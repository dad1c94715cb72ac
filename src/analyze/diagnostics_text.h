// The checklist's findings and the playbook's next step as text for a terminal (`dltune doctor`, `dltune next`).
#pragma once

#include <string>
#include <vector>

#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/next_step.h"

namespace dltune {

// The findings of `study`, most serious first as given: a count by severity, then each with its evidence,
// suggestion, playbook section and id, wrapped at 100 columns. Safe to print.
std::string DiagnosticsText(const std::string& study, const std::vector<Diagnostic>& diagnostics);

// A next step: its study and title, why, the command that takes it and the playbook section. Safe to print.
std::string NextStepText(const NextStep& step);

}  // namespace dltune
