// The checks behind Diagnose (diagnostics.h), one function each, sharing what every check needs.
#pragma once

#include <string>
#include <vector>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"
#include "dltune/analyze/finding.h"
#include "dltune/analyze/importance.h"

namespace dltune::diagnostic_checks {

// Playbook section titles, as the playbook writes them (markup dropped).
inline constexpr const char* kBoundarySection = "Identifying bad search space boundaries";
inline constexpr const char* kInsightSection = "Extracting insight from experimental results";
inline constexpr const char* kWarmupSection = "When to apply learning rate warmup";
inline constexpr const char* kCurvesSection = "Examining the training curves";
inline constexpr const char* kStepsSection = "Deciding how long to train when training is not compute-bound";
inline constexpr const char* kInputSection = "Optimizing the input pipeline";
inline constexpr const char* kClippingSection = "Gradient clipping";
inline constexpr const char* kAdoptSection =
    "Determining whether to adopt a training pipeline change or hyperparameter configuration";
inline constexpr const char* kRoundsSection = "Deciding how long to train when training is compute-bound";
inline constexpr const char* kBatchSizeSection =
    "Determining the feasible batch sizes and estimating training throughput";
inline constexpr const char* kPeriodicSection = "Setting up periodic evaluations";
inline constexpr const char* kFitStepsSection =
    "Algorithm for picking an initial candidate for max_train_steps using a learning rate sweep";

// What the checks share.
struct Context {
  explicit Context(const StudyData& study_data, const HyperparameterImportance* given_importance = nullptr);

  const StudyData& data;
  const HyperparameterImportance* importance = nullptr;  // the caller's AnalyzeImportance(data); null: computed here
  Objective objective;
  std::vector<std::vector<analysis_util::RankedTrial>> ranked;  // RankedBySubStudy(data)
  bool single_substudy = true;

  // The Diagnostic::substudy of a sub-study: "" when the study has one.
  std::string SubStudyField(const std::string& label) const { return single_substudy ? "" : label; }
  // " of optimizer=adam", or "" when the study has one sub-study.
  std::string OfSubStudy(const std::string& label) const { return single_substudy ? "" : " of " + label; }
  // The best `count` trials of a ranked group.
  std::vector<analysis_util::RankedTrial> Top(const std::vector<analysis_util::RankedTrial>& group,
                                              std::size_t count = 3) const;
};

void CheckBoundary(const Context& context, std::vector<Diagnostic>& out);
void CheckInfeasibleShare(const Context& context, std::vector<Diagnostic>& out);
void CheckInstability(const Context& context, std::vector<Diagnostic>& out);
void CheckOverfitting(const Context& context, std::vector<Diagnostic>& out);
void CheckLateVariance(const Context& context, std::vector<Diagnostic>& out);
void CheckComputeBound(const Context& context, std::vector<Diagnostic>& out);
void CheckStepsTooHigh(const Context& context, std::vector<Diagnostic>& out);
void CheckTrainingLossRising(const Context& context, std::vector<Diagnostic>& out);
void CheckInputBound(const Context& context, std::vector<Diagnostic>& out);
void CheckAggressiveClipping(const Context& context, std::vector<Diagnostic>& out);
void CheckPeriodicity(const Context& context, std::vector<Diagnostic>& out);
// diagnostics_importance.cc
void CheckUnimportant(const Context& context, std::vector<Diagnostic>& out);
// diagnostics_across.cc
void CheckTrialVariance(const Context& context, std::vector<Diagnostic>& out);
void CheckSingleRuns(const Context& context, std::vector<Diagnostic>& out);
void CheckAgainstParent(const Context& context, std::vector<Diagnostic>& out);
void CheckStepBudget(const Context& context, std::vector<Diagnostic>& out);
void CheckThroughput(const Context& context, std::vector<Diagnostic>& out);
void CheckInstabilityProbe(const Context& context, std::vector<Diagnostic>& out);
void CheckWarmupStudy(const Context& context, std::vector<Diagnostic>& out);
void CheckClippingStudy(const Context& context, std::vector<Diagnostic>& out);
// A probe, warmup or clipping study: its runs are meant to be unstable, so the checks of instability in a tuning study
// do not apply (its own checks classify each run).
bool IsStabilityProcedure(const StudyData& data);
// A throughput or fit-steps study: a measurement of one configuration, not a search, so the checks of a tuning
// study's space, budget and curves (boundary, compute_bound, ...) do not apply.
bool IsMeasurementProcedure(const StudyData& data);

}  // namespace dltune::diagnostic_checks
