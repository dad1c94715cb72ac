#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "analyze_test_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

using testing::AddEvals;
using testing::AddLosses;
using testing::AddTrial;
using testing::MakeData;

constexpr const char* kSpec =
    "name: curves\nworkload: w\nmax_train_steps: 1000\nspace:\n  learning_rate: {min: 1.0e-4, max: 1.0, scale: "
    "log}\n";

std::vector<std::int64_t> Steps(const TrainingCurve& curve) {
  std::vector<std::int64_t> steps;
  for (const auto& point : curve.points) steps.push_back(point.step);
  return steps;
}

const TrainingCurve* Find(const std::vector<TrainingCurve>& curves, std::uint64_t trial, const std::string& series,
                          CurveSource source) {
  for (const auto& curve : curves) {
    if (curve.trial == trial && curve.series == series && curve.source == source) return &curve;
  }
  return nullptr;
}

TEST(CurvesTest, ThinningKeepsFirstLastAndBestStepEvenlySpacedOtherwise) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {{"learning_rate", 0.01}}, 0.1, 537);
  std::vector<double> losses(1000);
  for (std::size_t i = 0; i < losses.size(); ++i) losses[i] = 1.0 / static_cast<double>(i + 1);
  AddLosses(data, 0, losses);  // steps 1..1000
  const auto curves = TrainingCurves(data, 3, 10);
  const TrainingCurve* loss = Find(curves, 0, "train/loss", CurveSource::kTrainingSteps);
  ASSERT_NE(loss, nullptr);
  // Even grid of 10 indices: round(k * 999 / 9) = 0, 111, ..., 999; index 536 (step 537) replaces the nearest, 555.
  EXPECT_EQ(Steps(*loss), (std::vector<std::int64_t>{1, 112, 223, 334, 445, 537, 667, 778, 889, 1000}));
  EXPECT_DOUBLE_EQ(loss->points[5].value, 1.0 / 537);
  EXPECT_EQ(loss->best_step, 537);
  EXPECT_TRUE(loss->highlighted);

  // Not thinned when it fits.
  const auto all = TrainingCurves(data, 3, 1000);
  EXPECT_EQ(Find(all, 0, "train/loss", CurveSource::kTrainingSteps)->points.size(), 1000u);
  // At least first, last and best are kept whatever max_points says.
  EXPECT_EQ(Steps(*Find(TrainingCurves(data, 3, 0), 0, "train/loss", CurveSource::kTrainingSteps)),
            (std::vector<std::int64_t>{1, 537, 1000}));
}

TEST(CurvesTest, BestStepNotRecordedKeepsTheNearestEarlierStep) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {{"learning_rate", 0.01}}, 0.1, 537);
  for (std::int64_t step = 10; step <= 1000; step += 10) {
    data.train[0].push_back({.step = step, .loss = 1.0});
  }
  const auto curves = TrainingCurves(data, 3, 5);
  const auto steps = Steps(*Find(curves, 0, "train/loss", CurveSource::kTrainingSteps));
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps.front(), 10);
  EXPECT_EQ(steps.back(), 1000);
  EXPECT_NE(std::find(steps.begin(), steps.end(), 530), steps.end());
}

TEST(CurvesTest, EverySeriesOfEveryTrialWithHighlightsPerSubStudy) {
  StudyData data = MakeData(kSpec);
  for (std::uint64_t n = 0; n < 4; ++n) {
    AddTrial(data, n, TrialState::kCompleted, {{"learning_rate", 0.01}}, 0.1 * static_cast<double>(4 - n), 100, 0, "a");
  }
  AddTrial(data, 4, TrialState::kCompleted, {{"learning_rate", 0.01}}, 0.9, 100, 1, "b");
  AddTrial(data, 5, TrialState::kInfeasible, {{"learning_rate", 0.9}}, std::nullopt, {}, 1, "b");
  AddTrial(data, 6, TrialState::kPending, {{"learning_rate", 0.9}}, std::nullopt, {}, 1, "b");
  for (std::uint64_t n = 0; n < 6; ++n) {
    AddLosses(data, n, {2.0, 1.0, std::numeric_limits<double>::quiet_NaN(), 0.5});
    AddEvals(data, n, "train", "loss", {{2, 0.9}, {4, 0.4}});
    AddEvals(data, n, "valid", "error_rate", {{2, 0.5}, {4, 0.3}});
  }
  const auto curves = TrainingCurves(data, 2);
  ASSERT_EQ(curves.size(), 18u);  // 6 trials with data x 3 series; the pending trial has none
  // Per trial: the training-step loss first, then evaluations by name.
  EXPECT_EQ(curves[0].series, "train/loss");
  EXPECT_EQ(curves[0].source, CurveSource::kTrainingSteps);
  EXPECT_EQ(Steps(curves[0]), (std::vector<std::int64_t>{1, 2, 4}));  // the NaN is left out
  EXPECT_EQ(curves[1].series, "train/loss");
  EXPECT_EQ(curves[1].source, CurveSource::kEvaluation);
  EXPECT_EQ(curves[2].series, "valid/error_rate");
  EXPECT_EQ(curves[2].points.size(), 2u);
  EXPECT_EQ(curves[2].points[1].value, 0.3);
  // Highlighted: the 2 best of sub-study a (trials 3, 2) and the only completed one of b (trial 4).
  for (const auto& curve : curves) {
    const bool expected = curve.trial == 2 || curve.trial == 3 || curve.trial == 4;
    EXPECT_EQ(curve.highlighted, expected) << "trial " << curve.trial;
  }
  const TrainingCurve* infeasible = Find(curves, 5, "valid/error_rate", CurveSource::kEvaluation);
  ASSERT_NE(infeasible, nullptr);
  EXPECT_EQ(infeasible->state, TrialState::kInfeasible);
  EXPECT_EQ(infeasible->substudy, "b");
  // Its best step comes from its evaluations (lowest valid/error_rate at step 4).
  EXPECT_EQ(infeasible->best_step, 4);
}

TEST(CurvesTest, BestStepsOfCompletedTrials) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {}, 0.2, 250);
  AddTrial(data, 1, TrialState::kInfeasible, {}, 0.5, 100);
  AddTrial(data, 2, TrialState::kCompleted, {}, std::nullopt, std::nullopt);
  AddEvals(data, 2, "valid", "error_rate", {{500, 0.3}, {1000, 0.3}});        // ties: the earliest step
  AddTrial(data, 3, TrialState::kCompleted, {}, std::nullopt, std::nullopt);  // no evaluations: no best step
  const auto steps = BestSteps(data);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].trial, 0u);
  EXPECT_EQ(steps[0].best_step, 250);
  EXPECT_DOUBLE_EQ(steps[0].fraction, 0.25);
  EXPECT_EQ(steps[0].objective, 0.2);
  EXPECT_EQ(steps[1].trial, 2u);
  EXPECT_EQ(steps[1].best_step, 500);
  EXPECT_DOUBLE_EQ(steps[1].fraction, 0.5);
  EXPECT_EQ(steps[1].objective, 0.3);
}

TEST(CurvesTest, CurveTrialsAreEveryTrialUpToTheLimit) {
  StudyData data = MakeData(kSpec);
  for (std::uint64_t n = 0; n < 4; ++n) {
    AddTrial(data, n, TrialState::kCompleted, {{"learning_rate", 0.01}}, 0.5 - 0.1 * static_cast<double>(n), 10);
    AddLosses(data, n, {1.0, 0.5});
  }
  EXPECT_EQ(CurveTrials(data, 4), (std::vector<std::uint64_t>{0, 1, 2, 3}));
}

TEST(CurvesTest, CurveTrialsBeyondTheLimitAreRunningTrialsThenEachSubStudysBestInRounds) {
  StudyData data = MakeData(kSpec);
  // Sub-study a: trials 0..5, best value falls with the number; sub-study b: trials 6..9, best value rises.
  for (std::uint64_t n = 0; n < 10; ++n) {
    const bool a = n < 6;
    const double best = a ? 1.0 - 0.1 * static_cast<double>(n) : 0.1 * static_cast<double>(n);
    AddTrial(data, n, TrialState::kCompleted, {{"learning_rate", 0.01}}, best, 10, a ? 0 : 1, a ? "a" : "b");
    AddLosses(data, n, {1.0});
  }
  AddTrial(data, 10, TrialState::kRunning, {{"learning_rate", 0.01}}, 9.0, 10, 0, "a");
  AddLosses(data, 10, {1.0});
  // The running trial, then a's best (5) and b's best (6), then a's second (4) and b's second (7).
  EXPECT_EQ(CurveTrials(data, 5), (std::vector<std::uint64_t>{4, 5, 6, 7, 10}));

  const StudyData subset = SubsetOfTrials(data, CurveTrials(data, 5));
  ASSERT_EQ(subset.trials.size(), 5u);
  EXPECT_EQ(subset.trials[0].number, 4u);
  EXPECT_EQ(subset.train.size(), 5u);
  EXPECT_TRUE(subset.train.contains(10));
  EXPECT_FALSE(subset.train.contains(0));
  // The highlighted (best) curves are the same as in the whole study.
  for (const auto& curve : TrainingCurves(subset, 1))
    EXPECT_EQ(curve.highlighted, curve.trial == 5 || curve.trial == 6);
}

}  // namespace
}  // namespace dltune
