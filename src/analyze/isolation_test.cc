#include <gtest/gtest.h>

#include <cmath>

#include "analyze_test_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

using testing::AddTrial;
using testing::MakeData;

Assignment Optimizer(const std::string& name, double lr) { return {{"optimizer", name}, {"learning_rate", lr}}; }

StudyData SeparateStudy(const std::string& direction) {
  StudyData data = MakeData(
      "name: iso\nworkload: w\nmax_train_steps: 100\nobjective: {metric: valid/error_rate, "
      "direction: " +
      direction +
      "}\nspace:\n  optimizer: {values: [sgd, momentum, adam], role: scientific}\n"
      "  learning_rate: {min: 1.0e-4, max: 1.0, scale: log}\n");
  AddTrial(data, 0, TrialState::kCompleted, Optimizer("sgd", 0.1), 0.30, 50, 0, "optimizer=sgd");
  AddTrial(data, 1, TrialState::kCompleted, Optimizer("adam", 0.1), 0.25, 50, 2, "optimizer=adam");
  AddTrial(data, 2, TrialState::kCompleted, Optimizer("sgd", 0.01), 0.20, 50, 0, "optimizer=sgd");
  AddTrial(data, 3, TrialState::kInfeasible, Optimizer("adam", 0.5), std::nullopt, {}, 2, "optimizer=adam");
  AddTrial(data, 4, TrialState::kCompleted, Optimizer("sgd", 0.001), 0.40, 50, 0, "optimizer=sgd");
  AddTrial(data, 5, TrialState::kRunning, Optimizer("adam", 0.05), 0.01, 20, 2, "optimizer=adam");  // never chosen
  return data;
}

TEST(IsolationTest, SeparateModePicksTheBestTrialPerValue) {
  const auto plots = IsolationPlots(SeparateStudy("minimize"));
  ASSERT_EQ(plots.size(), 1u);
  const IsolationPlot& plot = plots[0];
  EXPECT_EQ(plot.param_id, "optimizer");
  EXPECT_TRUE(plot.categorical);
  ASSERT_EQ(plot.points.size(), 3u);
  EXPECT_EQ(plot.points[0].label, "sgd");
  EXPECT_EQ(plot.points[0].position, 0);
  EXPECT_EQ(plot.points[0].best, 0.20);
  EXPECT_EQ(plot.points[0].best_trial, 2u);
  EXPECT_EQ(plot.points[0].trials, 3);
  EXPECT_EQ(plot.points[0].completed, 3);
  // No trial holds momentum: a point without a best.
  EXPECT_EQ(plot.points[1].label, "momentum");
  EXPECT_EQ(plot.points[1].trials, 0);
  EXPECT_FALSE(plot.points[1].best.has_value());
  // adam: the running trial's 0.01 is not a whole run; the infeasible trial counts but has no objective.
  EXPECT_EQ(plot.points[2].label, "adam");
  EXPECT_EQ(plot.points[2].position, 2);
  EXPECT_EQ(plot.points[2].best, 0.25);
  EXPECT_EQ(plot.points[2].best_trial, 1u);
  EXPECT_EQ(plot.points[2].trials, 3);
  EXPECT_EQ(plot.points[2].completed, 1);
}

TEST(IsolationTest, MaximizingPicksTheHighest) {
  const auto plots = IsolationPlots(SeparateStudy("maximize"));
  EXPECT_EQ(plots[0].points[0].best, 0.40);
  EXPECT_EQ(plots[0].points[0].best_trial, 4u);
}

TEST(IsolationTest, NoScientificParamNoPlot) {
  StudyData data =
      MakeData("name: iso\nworkload: w\nmax_train_steps: 100\nspace:\n  lr: {min: 1.0e-4, max: 1.0, scale: log}\n");
  AddTrial(data, 0, TrialState::kCompleted, {{"lr", 0.1}}, 0.3);
  EXPECT_TRUE(IsolationPlots(data).empty());
}

TEST(IsolationTest, JointModeBucketsContinuousScientificParams) {
  StudyData data = MakeData(R"(name: joint
workload: w
max_train_steps: 100
scientific_mode: joint
trials: 8
space:
  width_multiplier: {min: 0.5, max: 8.0, scale: log, role: scientific}
  depth: {values: [1, 2], role: scientific}
  dropout: {min: 0.0, max: 1.0, role: scientific}
  learning_rate: {min: 1.0e-4, max: 1.0, scale: log}
)");
  const auto trial = [](double width, std::int64_t depth, double dropout) {
    return Assignment{{"width_multiplier", width}, {"depth", depth}, {"dropout", dropout}, {"learning_rate", 0.01}};
  };
  AddTrial(data, 0, TrialState::kCompleted, trial(0.6, 1, 0.1), 0.3);
  AddTrial(data, 1, TrialState::kCompleted, trial(0.9, 2, 0.7), 0.2);
  AddTrial(data, 2, TrialState::kInfeasible, trial(1.5, 1, 0.2), std::nullopt);
  AddTrial(data, 3, TrialState::kCompleted, trial(3.0, 2, 0.9), 0.25);
  AddTrial(data, 4, TrialState::kCompleted, trial(8.0, 2, 0.5), 0.1);  // the max: the last bucket, closed
  const auto plots = IsolationPlots(data, 4);
  ASSERT_EQ(plots.size(), 3u);

  const IsolationPlot& width = plots[0];
  EXPECT_FALSE(width.categorical);
  EXPECT_TRUE(width.log_scale);
  ASSERT_EQ(width.points.size(), 4u);
  // Log range [0.5, 8] is 4 doublings: buckets [0.5, 1), [1, 2), [2, 4), [4, 8], at their geometric middles.
  const std::vector<std::string> labels = {"[0.5, 1)", "[1, 2)", "[2, 4)", "[4, 8]"};
  const std::vector<double> middles = {std::sqrt(0.5), std::sqrt(2.0), std::sqrt(8.0), std::sqrt(32.0)};
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(width.points[i].label, labels[i]);
    EXPECT_NEAR(width.points[i].position, middles[i], 1e-12);
  }
  EXPECT_NEAR(*width.points[1].lower, 1.0, 1e-12);
  EXPECT_NEAR(*width.points[1].upper, 2.0, 1e-12);
  EXPECT_EQ(width.points[0].trials, 2);
  EXPECT_EQ(width.points[0].best, 0.2);
  EXPECT_EQ(width.points[0].best_trial, 1u);
  EXPECT_EQ(width.points[1].trials, 1);
  EXPECT_EQ(width.points[1].completed, 0);
  EXPECT_FALSE(width.points[1].best.has_value());
  EXPECT_EQ(width.points[2].best_trial, 3u);
  EXPECT_EQ(width.points[3].best_trial, 4u);

  // A list in joint mode: one point per value.
  const IsolationPlot& depth = plots[1];
  EXPECT_TRUE(depth.categorical);
  ASSERT_EQ(depth.points.size(), 2u);
  EXPECT_EQ(depth.points[0].label, "1");
  EXPECT_EQ(depth.points[0].best_trial, 0u);
  EXPECT_EQ(depth.points[1].label, "2");
  EXPECT_EQ(depth.points[1].best_trial, 4u);

  // A linear range: arithmetic middles.
  const IsolationPlot& dropout = plots[2];
  EXPECT_FALSE(dropout.log_scale);
  const auto two = IsolationPlots(data, 2);
  ASSERT_EQ(two[2].points.size(), 2u);
  EXPECT_EQ(two[2].points[0].label, "[0, 0.5)");
  EXPECT_EQ(two[2].points[1].label, "[0.5, 1]");
  EXPECT_DOUBLE_EQ(two[2].points[0].position, 0.25);
  EXPECT_DOUBLE_EQ(two[2].points[1].position, 0.75);
  EXPECT_EQ(two[2].points[0].best_trial, 0u);  // 0.1 and 0.2 (infeasible)
  EXPECT_EQ(two[2].points[1].best_trial, 4u);  // 0.7, 0.9, 0.5
}

}  // namespace
}  // namespace dltune
