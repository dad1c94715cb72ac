#include "dltune/analyze/diagnostics.h"

#include <algorithm>
#include <array>
#include <string_view>

#include <fmt/format.h>

#include "analyze/search_budget.h"
#include "diagnostic_checks.h"

namespace dltune {

namespace diagnostic_checks {

Context::Context(const StudyData& study_data, const HyperparameterImportance* given_importance)
    : data(study_data),
      importance(given_importance),
      objective(study_data.spec.objective),
      ranked(analysis_util::RankedBySubStudy(study_data)),
      single_substudy(analysis_util::SubStudyCount(study_data) <= 1) {}

std::vector<analysis_util::RankedTrial> Context::Top(const std::vector<analysis_util::RankedTrial>& group,
                                                     std::size_t count) const {
  return {group.begin(), group.begin() + static_cast<std::ptrdiff_t>(std::min(count, group.size()))};
}

}  // namespace diagnostic_checks

namespace {

std::vector<Diagnostic> DiagnoseWith(const StudyData& data, const HyperparameterImportance* importance) {
  using namespace diagnostic_checks;
  // The documented order (diagnostics.h); a check's position is its rank among diagnostics of equal severity.
  constexpr std::array<std::string_view, 30> kOrder = {"within_noise",
                                                       "winner_changed",
                                                       "fit_steps_none",
                                                       "warmup_none",
                                                       "clipping_none",
                                                       "throughput_untrustworthy",
                                                       "instability_probe",
                                                       "fit_steps_edge",
                                                       "boundary",
                                                       "adam_budget",
                                                       "infeasible_share",
                                                       "instability",
                                                       "overfitting",
                                                       "late_variance",
                                                       "periodic_validation",
                                                       "compute_bound",
                                                       "steps_too_high",
                                                       "training_loss_rising",
                                                       "input_bound",
                                                       "throughput_input_bound",
                                                       "aggressive_clipping",
                                                       "fit_steps",
                                                       "throughput",
                                                       "instability_probe_stable",
                                                       "warmup",
                                                       "clipping",
                                                       "beyond_noise",
                                                       "winner_held",
                                                       "unimportant",
                                                       "single_runs"};
  const Context context(data, importance);
  std::vector<Diagnostic> found;
  // A probe's or warmup study's runs are abbreviated and meant to be unstable, and a throughput or fit-steps study
  // measures one configuration: the checks of a tuning study's space, budget and instability do not apply to them.
  if (!IsStabilityProcedure(data) && !IsMeasurementProcedure(data)) {
    CheckBoundary(context, found);
    CheckInfeasibleShare(context, found);
    CheckInstability(context, found);
    CheckLateVariance(context, found);
    CheckComputeBound(context, found);
    CheckStepsTooHigh(context, found);
    CheckTrainingLossRising(context, found);
    CheckUnimportant(context, found);
  }
  if (!IsMeasurementProcedure(data)) CheckOverfitting(context, found);
  CheckInputBound(context, found);
  if (!data.spec.procedure.Measures()) CheckAggressiveClipping(context, found);  // a clipping study clips on purpose
  CheckPeriodicity(context, found);
  if (!IsMeasurementProcedure(data)) {  // a throughput sweep's repeats measure speed, not the objective's noise
    CheckTrialVariance(context, found);
    CheckSingleRuns(context, found);
  }
  CheckAgainstParent(context, found);
  CheckStepBudget(context, found);
  CheckThroughput(context, found);
  CheckInstabilityProbe(context, found);
  CheckWarmupStudy(context, found);
  CheckClippingStudy(context, found);
  for (Diagnostic& d : CheckAdamBudget(data.spec)) found.push_back(std::move(d));
  const auto rank = [&kOrder](const Diagnostic& d) {
    return std::find(kOrder.begin(), kOrder.end(), d.id) - kOrder.begin();
  };
  for (Diagnostic& d : found) {
    for (const StudyNote& note : data.notes) {
      if (note.resolves == d.id) d.handled = fmt::format("note {}: {}", note.id, note.text);
    }
  }
  std::stable_sort(found.begin(), found.end(), [&rank](const Diagnostic& a, const Diagnostic& b) {
    if (a.handled.empty() != b.handled.empty()) return a.handled.empty();
    if (a.severity != b.severity) return a.severity > b.severity;
    return rank(a) < rank(b);
  });
  return found;
}

}  // namespace

std::vector<Diagnostic> Diagnose(const StudyData& data) { return DiagnoseWith(data, nullptr); }

std::vector<Diagnostic> Diagnose(const StudyData& data, const HyperparameterImportance& importance) {
  return DiagnoseWith(data, &importance);
}

}  // namespace dltune
