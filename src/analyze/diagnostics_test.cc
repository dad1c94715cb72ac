#include "dltune/analyze/diagnostics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "analyze_test_util.h"

namespace dltune {
namespace {

using testing::AddEvals;
using testing::AddLosses;
using testing::AddTrial;
using ::testing::HasSubstr;
using testing::MakeData;

// learning_rate spans 4 decades: its top 10% is >= 10^-0.4 = 0.398, its bottom 10% <= 10^-3.6 = 0.000251.
constexpr const char* kSpec = R"(name: diag
workload: w
max_train_steps: 1000
space:
  learning_rate: {min: 1.0e-4, max: 1.0, scale: log}
  dropout: {min: 0.0, max: 0.5}
)";

Assignment Params(double lr, double dropout = 0.25) { return {{"learning_rate", lr}, {"dropout", dropout}}; }

std::vector<Diagnostic> WithId(const StudyData& data, const std::string& id) {
  std::vector<Diagnostic> found;
  for (auto& d : Diagnose(data)) {
    if (d.id == id) found.push_back(std::move(d));
  }
  return found;
}

void ExpectComplete(const Diagnostic& d) {
  EXPECT_FALSE(d.title.empty());
  EXPECT_FALSE(d.detail.empty());
  EXPECT_FALSE(d.suggestion.empty());
  EXPECT_FALSE(d.section.empty());
}

// ---- boundary ----

StudyData BoundaryStudy(double third_best_lr) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, Params(0.5, 0.1), 0.10, 900);
  AddTrial(data, 1, TrialState::kCompleted, Params(0.01, 0.2), 0.30, 900);
  AddTrial(data, 2, TrialState::kCompleted, Params(0.9, 0.3), 0.11, 900);
  AddTrial(data, 3, TrialState::kCompleted, Params(0.001, 0.15), 0.40, 900);
  AddTrial(data, 4, TrialState::kCompleted, Params(third_best_lr, 0.35), 0.12, 900);
  AddTrial(data, 5, TrialState::kCompleted, Params(0.1, 0.45), 0.35, 900);
  return data;
}

TEST(DiagnosticsTest, BoundaryFiresWhenTheThreeBestAreAtTheEdge) {
  const auto found = WithId(BoundaryStudy(0.45), "boundary");
  ASSERT_EQ(found.size(), 1u);
  const Diagnostic& d = found[0];
  ExpectComplete(d);
  EXPECT_EQ(d.severity, Severity::kWarning);
  EXPECT_EQ(d.param_id, "learning_rate");
  EXPECT_EQ(d.substudy, "");  // one sub-study
  EXPECT_EQ(d.section, "Identifying bad search space boundaries");
  EXPECT_EQ(d.trials, (std::vector<std::uint64_t>{0, 2, 4}));
  EXPECT_THAT(d.detail, HasSubstr("trials 0, 2 and 4"));
  EXPECT_THAT(d.detail, HasSubstr("0.5, 0.9 and 0.45"));
  EXPECT_THAT(d.detail, HasSubstr("top 10%"));
  EXPECT_THAT(d.suggestion, HasSubstr("Raise learning_rate's max above 1 (e.g. to 10)"));
}

TEST(DiagnosticsTest, BoundaryQuietWhenOneOfTheBestIsInside) {
  EXPECT_TRUE(WithId(BoundaryStudy(0.3), "boundary").empty());  // 0.3 is at 0.87 of the log range
}

TEST(DiagnosticsTest, BoundaryNeedsFiveTrials) {
  StudyData data = BoundaryStudy(0.45);
  data.trials.erase(data.trials.begin() + 5);  // two of the worse trials: 4 are left
  data.trials.erase(data.trials.begin() + 3);
  EXPECT_TRUE(WithId(data, "boundary").empty());
}

TEST(DiagnosticsTest, BoundaryAtZeroSuggestsItsNaturalLimit) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, Params(0.01, 0.01), 0.10, 900);
  AddTrial(data, 1, TrialState::kCompleted, Params(0.02, 0.04), 0.11, 900);
  AddTrial(data, 2, TrialState::kCompleted, Params(0.03, 0.02), 0.12, 900);
  AddTrial(data, 3, TrialState::kCompleted, Params(0.04, 0.3), 0.20, 900);
  AddTrial(data, 4, TrialState::kCompleted, Params(0.05, 0.4), 0.30, 900);
  const auto found = WithId(data, "boundary");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].param_id, "dropout");
  EXPECT_THAT(found[0].detail, HasSubstr("bottom 10%"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("natural limit"));
}

TEST(DiagnosticsTest, BoundaryIsPerSubStudy) {
  StudyData data = MakeData(std::string(kSpec) + "  optimizer: {values: [sgd, adam], role: scientific}\n");
  // sgd's best are at the top of learning_rate; adam's are spread.
  const std::vector<std::pair<double, double>> sgd = {{0.5, 0.1}, {0.9, 0.11}, {0.45, 0.12}, {0.01, 0.3}, {0.001, 0.4}};
  const std::vector<std::pair<double, double>> adam = {
      {0.5, 0.1}, {0.01, 0.11}, {0.45, 0.12}, {0.02, 0.3}, {0.001, 0.4}};
  std::uint64_t n = 0;
  for (const auto& [lr, value] : sgd) {
    Assignment params = Params(lr);
    params["optimizer"] = std::string("sgd");
    AddTrial(data, n++, TrialState::kCompleted, params, value, 900, 0, "optimizer=sgd");
  }
  for (const auto& [lr, value] : adam) {
    Assignment params = Params(lr);
    params["optimizer"] = std::string("adam");
    AddTrial(data, n++, TrialState::kCompleted, params, value, 900, 1, "optimizer=adam");
  }
  const auto found = WithId(data, "boundary");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].substudy, "optimizer=sgd");
  EXPECT_THAT(found[0].title, HasSubstr("of optimizer=sgd"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("the best 3 trials of optimizer=sgd are in its top 10%"));
}

// ---- infeasible_share ----

StudyData InfeasibleStudy(int infeasible, int completed) {
  StudyData data = MakeData(kSpec);
  std::uint64_t n = 0;
  for (int i = 0; i < infeasible; ++i) {
    TrialRecord& trial = AddTrial(data, n++, TrialState::kInfeasible, Params(0.5 + 0.05 * i));
    trial.reason = i == 0 ? "loss is NaN" : "training loss diverged";
  }
  for (int i = 0; i < completed; ++i) AddTrial(data, n++, TrialState::kCompleted, Params(0.001 * (i + 1)), 0.2, 500);
  AddTrial(data, n++, TrialState::kRunning, Params(0.9));  // not finished: not counted
  return data;
}

TEST(DiagnosticsTest, InfeasibleShareWarnsAbove20Percent) {
  const auto found = WithId(InfeasibleStudy(3, 7), "infeasible_share");
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_EQ(found[0].severity, Severity::kWarning);
  EXPECT_EQ(found[0].trials, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_THAT(found[0].detail, HasSubstr("3 of the 10 finished trials are infeasible (30%)"));
  EXPECT_THAT(found[0].detail, HasSubstr("'training loss diverged' x2"));
  EXPECT_THAT(found[0].detail, HasSubstr("higher learning_rate"));
  EXPECT_EQ(found[0].param_id, "learning_rate");
  EXPECT_THAT(found[0].suggestion, HasSubstr("bug in the training code"));
}

TEST(DiagnosticsTest, InfeasibleShareIsAProblemAbove50Percent) {
  const auto found = WithId(InfeasibleStudy(6, 4), "infeasible_share");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity, Severity::kProblem);
}

TEST(DiagnosticsTest, InfeasibleShareQuietAt20Percent) {
  EXPECT_TRUE(WithId(InfeasibleStudy(2, 8), "infeasible_share").empty());
  EXPECT_TRUE(WithId(InfeasibleStudy(2, 2), "infeasible_share").empty());  // fewer than 5 finished
}

// ---- instability ----

StudyData InstabilityStudy(double best_lr) {
  StudyData data = MakeData(kSpec);
  std::uint64_t n = 0;
  for (const double lr : {0.0001, 0.001, 0.01, 0.05}) {
    AddTrial(data, n++, TrialState::kCompleted, Params(lr), lr == best_lr ? 0.1 : 0.3, 900);
  }
  for (const double lr : {0.08, 0.2, 0.5, 0.9}) AddTrial(data, n++, TrialState::kInfeasible, Params(lr));
  return data;
}

TEST(DiagnosticsTest, InstabilityWhenTheBestLearningRateIsAtTheEdgeOfFeasible) {
  const auto found = WithId(InstabilityStudy(0.05), "instability");
  ASSERT_EQ(found.size(), 1u);
  const Diagnostic& d = found[0];
  ExpectComplete(d);
  EXPECT_EQ(d.severity, Severity::kProblem);
  EXPECT_EQ(d.param_id, "learning_rate");
  EXPECT_EQ(d.section, "When to apply learning rate warmup");
  // Threshold 0.08: 4 of 4 trials at or above it are infeasible; the best (0.05) is log10(1.6) / 4 = 5% below.
  EXPECT_THAT(d.detail, HasSubstr("4 of the 4 finished trials with learning_rate >= 0.08 are infeasible"));
  EXPECT_THAT(d.detail, HasSubstr("the best trial, 3"));
  EXPECT_THAT(d.detail, HasSubstr("5% of the log range"));
  EXPECT_THAT(d.suggestion, HasSubstr("warmup"));
  EXPECT_THAT(d.suggestion, HasSubstr("clipping"));
  EXPECT_EQ(d.trials, (std::vector<std::uint64_t>{4, 5, 6, 7, 3}));
}

TEST(DiagnosticsTest, InstabilityQuietWhenTheBestIsFarFromTheThreshold) {
  EXPECT_TRUE(WithId(InstabilityStudy(0.001), "instability").empty());  // log10(80) / 4 = 48% below
}

TEST(DiagnosticsTest, InstabilityQuietWhenInfeasibleTrialsAreScattered) {
  StudyData data = InstabilityStudy(0.05);
  data.trials[5].state = TrialState::kCompleted;  // 0.2 and 0.9 feasible: 2 of 4 above 0.08, 2 of 3 above 0.5
  data.trials[5].best_value = 0.3;
  data.trials[7].state = TrialState::kCompleted;
  data.trials[7].best_value = 0.3;
  EXPECT_TRUE(WithId(data, "instability").empty());
}

TEST(DiagnosticsTest, InstabilityOnlyForLearningRates) {
  StudyData data = MakeData(
      "name: diag\nworkload: w\nmax_train_steps: 1000\nspace:\n  weight_decay: {min: 1.0e-4, max: 1.0, scale: log}\n");
  std::uint64_t n = 0;
  for (const double v : {0.0001, 0.001, 0.01, 0.05}) {
    AddTrial(data, n++, TrialState::kCompleted, {{"weight_decay", v}}, v == 0.05 ? 0.1 : 0.3, 900);
  }
  for (const double v : {0.08, 0.2, 0.5, 0.9}) AddTrial(data, n++, TrialState::kInfeasible, {{"weight_decay", v}});
  EXPECT_TRUE(WithId(data, "instability").empty());
}

// ---- overfitting ----

StudyData CurveStudy(const std::vector<std::pair<std::int64_t, double>>& evals) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, Params(0.01), std::nullopt, std::nullopt);
  AddEvals(data, 0, "valid", "error_rate", evals);
  AddTrial(data, 1, TrialState::kCompleted, Params(0.02), 0.5, 500);  // no curve: nothing to check
  return data;
}

TEST(DiagnosticsTest, OverfittingWhenTheObjectiveRisesAfterItsBest) {
  const auto found = WithId(CurveStudy({{100, 0.9}, {200, 0.5}, {300, 0.2}, {400, 0.3}, {500, 0.35}}), "overfitting");
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_EQ(found[0].severity, Severity::kWarning);
  EXPECT_EQ(found[0].trials, (std::vector<std::uint64_t>{0}));
  // Best 0.2 at step 300, last 0.35: worse by 0.15, 21% of the curve's range 0.7.
  EXPECT_THAT(found[0].detail, HasSubstr("valid/error_rate 0.2 at step 300, 0.35 at the last evaluation (step 500)"));
  EXPECT_THAT(found[0].detail, HasSubstr("21%"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("regularization"));
}

TEST(DiagnosticsTest, OverfittingQuietForASmallWobble) {
  // Worse by 0.02, 2.9% of the range 0.7.
  EXPECT_TRUE(
      WithId(CurveStudy({{100, 0.9}, {200, 0.5}, {300, 0.2}, {400, 0.21}, {500, 0.22}}), "overfitting").empty());
}

TEST(DiagnosticsTest, OverfittingChecksOnlyTheBestTrials) {
  StudyData data = CurveStudy({{100, 0.9}, {200, 0.5}, {300, 0.2}, {400, 0.3}, {500, 0.35}});
  data.trials[0].best_value = 0.9;  // now the worst of 5 trials
  for (std::uint64_t n = 2; n < 5; ++n) AddTrial(data, n, TrialState::kCompleted, Params(0.01), 0.1, 500);
  EXPECT_TRUE(WithId(data, "overfitting").empty());
}

// ---- late_variance ----

TEST(DiagnosticsTest, LateVarianceWhenTheLastQuarterZigZags) {
  // Last quarter (steps > 750): 0.10, 0.12, 0.10. Differences +0.02, -0.02: their standard deviation 0.0283,
  // / sqrt(2) = 0.02, on a level of 0.1067: 19%.
  const auto found =
      WithId(CurveStudy({{250, 0.5}, {500, 0.2}, {800, 0.10}, {900, 0.12}, {1000, 0.10}}), "late_variance");
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_THAT(found[0].detail, HasSubstr("trial 0: step-to-step noise 0.02 on a level of 0.107 (19%)"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("Polyak averaging"));
}

TEST(DiagnosticsTest, LateVarianceQuietForASteadyTrend) {
  EXPECT_TRUE(
      WithId(CurveStudy({{250, 0.5}, {500, 0.2}, {800, 0.12}, {900, 0.11}, {1000, 0.10}}), "late_variance").empty());
  // Too few evaluations in the last quarter.
  EXPECT_TRUE(WithId(CurveStudy({{250, 0.5}, {500, 0.2}, {900, 0.12}, {1000, 0.10}}), "late_variance").empty());
}

// ---- compute_bound and steps_too_high ----

StudyData StepsStudy(const std::vector<std::int64_t>& best_steps) {
  StudyData data = MakeData(kSpec);
  std::uint64_t n = 0;
  for (const std::int64_t step : best_steps) {
    AddTrial(data, n, TrialState::kCompleted, Params(0.01), 0.1 + 0.01 * static_cast<double>(n), step);
    ++n;
  }
  return data;
}

TEST(DiagnosticsTest, ComputeBoundWhenTheBestStepsAreLate) {
  const auto found = WithId(StepsStudy({800, 900, 1000, 100}), "compute_bound");  // trial 3 is not among the best 3
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_EQ(found[0].severity, Severity::kInfo);
  EXPECT_EQ(found[0].trials, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_THAT(found[0].detail, HasSubstr("trial 0 at step 800"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("e.g. to 2000"));
}

TEST(DiagnosticsTest, ComputeBoundQuietWhenOneBestStepIsEarlier) {
  EXPECT_TRUE(WithId(StepsStudy({800, 750, 1000}), "compute_bound").empty());  // 750 is not past 75%
  EXPECT_TRUE(WithId(StepsStudy({800, 1000}), "compute_bound").empty());       // fewer than 3 trials
}

TEST(DiagnosticsTest, StepsTooHighWhenEveryBestStepIsInTheFirstTenth) {
  const auto found = WithId(StepsStudy({50, 100, 80}), "steps_too_high");
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_THAT(found[0].detail, HasSubstr("the latest is trial 1 at step 100"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("e.g. to 200"));
  EXPECT_TRUE(WithId(StepsStudy({800, 900, 1000}), "steps_too_high").empty());
}

TEST(DiagnosticsTest, StepsTooHighQuietWhenOneTrialPeaksLater) {
  EXPECT_TRUE(WithId(StepsStudy({50, 100, 80, 150}), "steps_too_high").empty());
}

// ---- training_loss_rising ----

const std::vector<double> kRising = {2.0, 1.8, 1.6, 1.4, 1.2, 1.0, 0.8, 0.6, 0.4, 0.2,
                                     0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2};
const std::vector<double> kHealthy = {2.0,  1.5,  1.2,  1.0,  0.9,  0.85, 0.8,  0.78, 0.76, 0.75,
                                      0.74, 0.76, 0.73, 0.74, 0.72, 0.73, 0.71, 0.72, 0.70, 0.71};

StudyData LossStudy(const std::vector<std::vector<double>>& curves) {
  StudyData data = MakeData(kSpec);
  for (std::uint64_t n = 0; n < curves.size(); ++n) {
    AddTrial(data, n, TrialState::kCompleted, Params(0.01), 0.2, 10);
    AddLosses(data, n, curves[n]);
  }
  return data;
}

TEST(DiagnosticsTest, TrainingLossRisingIsAProblemInMostTrials) {
  const auto found = WithId(LossStudy({kRising, kHealthy}), "training_loss_rising");
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_EQ(found[0].severity, Severity::kProblem);  // 1 of 2
  EXPECT_EQ(found[0].trials, (std::vector<std::uint64_t>{0}));
  // Window 2: the average falls to (0.2 + 0.3) / 2 = 0.25 at step 11 and ends at (1.1 + 1.2) / 2 = 1.15.
  EXPECT_THAT(found[0].detail, HasSubstr("trial 0 fell to 0.25 at step 11 and ends at 1.15 (step 20)"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("bug in the training pipeline"));
}

TEST(DiagnosticsTest, TrainingLossRisingInFewTrialsIsAWarning) {
  const auto found = WithId(LossStudy({kHealthy, kRising, kHealthy}), "training_loss_rising");
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].severity, Severity::kWarning);
  EXPECT_EQ(found[0].trials, (std::vector<std::uint64_t>{1}));
}

TEST(DiagnosticsTest, TrainingLossRisingQuietForHealthyCurves) {
  EXPECT_TRUE(WithId(LossStudy({kHealthy, kHealthy}), "training_loss_rising").empty());
  // Too short to judge.
  EXPECT_TRUE(
      WithId(LossStudy({std::vector<double>(kRising.begin() + 5, kRising.begin() + 14)}), "training_loss_rising")
          .empty());
}

// ---- input_bound ----

StudyData TimedStudy(double data_wait) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, Params(0.01), 0.2, 10);
  for (std::int64_t step = 1; step <= 10; ++step) {
    data.train[0].push_back({.step = step, .loss = 1.0, .step_time = 0.01, .data_wait = data_wait});
  }
  return data;
}

TEST(DiagnosticsTest, InputBoundWhenDataWaitIsAboveTenPercent) {
  const auto found = WithId(TimedStudy(0.002), "input_bound");
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_EQ(found[0].section, "Optimizing the input pipeline");
  EXPECT_THAT(found[0].detail, HasSubstr("20% of step time"));
  EXPECT_THAT(found[0].detail, HasSubstr("trial 0: 20%"));
}

TEST(DiagnosticsTest, InputBoundQuietBelowTenPercent) {
  EXPECT_TRUE(WithId(TimedStudy(0.0005), "input_bound").empty());
  EXPECT_TRUE(WithId(TimedStudy(0.00095), "input_bound").empty());   // 9.5%
  EXPECT_EQ(WithId(TimedStudy(0.00105), "input_bound").size(), 1u);  // 10.5%
}

// ---- aggressive_clipping ----

StudyData ClippedStudy(int clipped_steps) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, Params(0.01), 0.2, 10);
  for (int step = 1; step <= 10; ++step) {
    data.train[0].push_back(
        {.step = step, .grad_norm = step <= clipped_steps ? 5.0 : 0.5, .clipped = step <= clipped_steps});
  }
  return data;
}

TEST(DiagnosticsTest, AggressiveClippingWhenMostUpdatesAreClipped) {
  const auto found = WithId(ClippedStudy(6), "aggressive_clipping");
  ASSERT_EQ(found.size(), 1u);
  ExpectComplete(found[0]);
  EXPECT_EQ(found[0].section, "Gradient clipping");
  EXPECT_THAT(found[0].detail, HasSubstr("trial 0 clipped 6 of 10 steps (60%)"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("lower the learning rate"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("90th percentile of recorded norms is 5"));
}

TEST(DiagnosticsTest, AggressiveClippingQuietAtHalf) {
  EXPECT_TRUE(WithId(ClippedStudy(5), "aggressive_clipping").empty());
}

// A clipping study (dltune plan clipping) clips on purpose, and its configurations are one parent trial's at several
// thresholds: neither aggressive clipping nor a changed winner applies to it.
TEST(DiagnosticsTest, AClippingStudyIsNotToldItClipsOrThatItsWinnerChanged) {
  StudyData data = ClippedStudy(6);
  data.spec.procedure.kind = "clipping";
  data.spec.procedure.parent = "b";
  data.spec.procedure.from_trials = {{.trial = 0}, {.trial = 0}};
  data.spec.procedure.options = {{"learning_rate", 0.01}, {"percentile_90", 5.0}, {"baseline", "b"}};
  EXPECT_TRUE(WithId(data, "aggressive_clipping").empty());
  EXPECT_TRUE(WithId(data, "winner_changed").empty());
  EXPECT_FALSE(data.spec.procedure.ComparesWithParent());
  data.spec.procedure.kind = "apply-clipping";  // a study that tunes with clipping is told
  EXPECT_EQ(WithId(data, "aggressive_clipping").size(), 1u);
}

// ---- the list as a whole ----

TEST(DiagnosticsTest, NothingToSayAboutAHealthyStudy) {
  StudyData data = MakeData(kSpec);
  std::uint64_t n = 0;
  for (const double lr : {0.0003, 0.001, 0.003, 0.01, 0.03, 0.1}) {
    AddTrial(data, n, TrialState::kCompleted, Params(lr, 0.05 + 0.07 * static_cast<double>(n)),
             std::abs(std::log10(lr) + 2) / 10 + 0.1, 500 + 50 * static_cast<std::int64_t>(n));
    AddLosses(data, n, kHealthy);
    ++n;
  }
  EXPECT_TRUE(Diagnose(data).empty());
  EXPECT_TRUE(Diagnose(MakeData(kSpec)).empty());
}

TEST(DiagnosticsTest, MostSeriousFirstThenInTheDocumentedOrder) {
  StudyData data = InstabilityStudy(0.05);  // instability (problem) and infeasible_share (50%: warning)
  for (auto& trial : data.trials) {
    if (trial.state == TrialState::kCompleted) trial.best_step = 950;  // compute_bound (info)
  }
  for (std::int64_t step = 1; step <= 10; ++step) {  // input_bound (warning)
    data.train[0].push_back({.step = step, .step_time = 0.01, .data_wait = 0.005});
  }
  std::vector<std::string> ids;
  for (const auto& d : Diagnose(data)) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"instability", "infeasible_share", "input_bound", "compute_bound"}));
}

TEST(DiagnosticsTest, Names) {
  EXPECT_EQ(SeverityName(Severity::kInfo), "info");
  EXPECT_EQ(SeverityName(Severity::kWarning), "warning");
  EXPECT_EQ(SeverityName(Severity::kProblem), "problem");
  EXPECT_EQ(PlaybookAnchor("Deciding how long to train when training is not compute-bound"),
            "deciding-how-long-to-train-when-training-is-not-compute-bound");
  EXPECT_EQ(PlaybookAnchor("How many trials are needed to get good results with quasi-random search?"),
            "how-many-trials-are-needed-to-get-good-results-with-quasi-random-search");
}

// The playbook's headings, as tests/fixtures/playbook-headings.txt records them; when the playbook itself is beside the
// source tree, the record must be its headings.
TEST(DiagnosticsTest, SectionsAreThePlaybooksHeadings) {
  std::ifstream recorded(DLTUNE_SOURCE_DIR "/tests/fixtures/playbook-headings.txt");
  ASSERT_TRUE(recorded) << "tests/fixtures/playbook-headings.txt is missing";
  std::stringstream recorded_text;
  recorded_text << recorded.rdbuf();
  const std::string headings = recorded_text.str();
  if (std::ifstream file(DLTUNE_SOURCE_DIR "/../shared/playbook/tuning-playbook.en.md"); file) {
    std::stringstream text;
    text << file.rdbuf();
    std::string extracted;
    std::istringstream lines(text.str());
    for (std::string line; std::getline(lines, line);) {
      if (line.starts_with("#")) {
        std::erase(line, '*');
        extracted += line.substr(line.find(' ') + 1) + "\n";
      }
    }
    EXPECT_EQ(extracted, headings) << "the playbook's headings changed: update tests/fixtures/playbook-headings.txt";
  }
  for (const char* section : {"Identifying bad search space boundaries", "Extracting insight from experimental results",
                              "When to apply learning rate warmup", "Examining the training curves",
                              "Deciding how long to train when training is not compute-bound",
                              "Optimizing the input pipeline", "Gradient clipping"}) {
    EXPECT_THAT(headings, HasSubstr(std::string(section) + "\n"));
  }
  // And every diagnostic uses one of them.
  for (const StudyData& data : {BoundaryStudy(0.45), InfeasibleStudy(6, 4), InstabilityStudy(0.05),
                                CurveStudy({{100, 0.9}, {200, 0.5}, {800, 0.2}, {900, 0.3}, {1000, 0.25}}),
                                StepsStudy({50, 100, 80}), LossStudy({kRising}), TimedStudy(0.005), ClippedStudy(9)}) {
    for (const auto& d : Diagnose(data)) EXPECT_THAT(headings, HasSubstr(d.section + "\n")) << d.id;
  }
}

}  // namespace
}  // namespace dltune
