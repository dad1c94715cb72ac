#include <gtest/gtest.h>

#include "analyze_test_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

using testing::AddEvals;
using testing::AddTrial;
using testing::MakeData;

constexpr const char* kSpec = R"(name: axes
workload: w
max_train_steps: 1000
space:
  optimizer: {values: [sgd, adam], role: scientific}
  learning_rate: {min: 1.0e-4, max: 1.0e-1, scale: log}
  dropout: {min: 0.0, max: 0.5}
  width: {values: [64, 128, 256]}
  beta1: {min: 0.8, max: 0.99, when: {optimizer: adam}}
  batch_size: 128
)";

StudyData AxisStudy() {
  StudyData data = MakeData(kSpec);
  const auto sgd = [](double lr, double dropout, std::int64_t width) {
    return Assignment{{"optimizer", std::string("sgd")},
                      {"learning_rate", lr},
                      {"dropout", dropout},
                      {"width", width},
                      {"batch_size", std::int64_t{128}}};
  };
  const auto adam = [](double lr, double dropout, std::int64_t width, double beta1) {
    return Assignment{{"optimizer", std::string("adam")},
                      {"learning_rate", lr},
                      {"dropout", dropout},
                      {"width", width},
                      {"beta1", beta1},
                      {"batch_size", std::int64_t{128}}};
  };
  AddTrial(data, 0, TrialState::kCompleted, sgd(0.01, 0.1, 128), 0.2, 300, 0, "optimizer=sgd");
  // Infeasible with a best value reached before diverging: drawn at its value, with no objective.
  AddTrial(data, 1, TrialState::kInfeasible, adam(0.001, 0.3, 64, 0.9), 0.5, 100, 1, "optimizer=adam");
  // Completed without a best value in its record: the best of its evaluations of valid/error_rate.
  AddTrial(data, 2, TrialState::kCompleted, sgd(0.05, 0.2, 256), std::nullopt, std::nullopt, 0, "optimizer=sgd");
  AddEvals(data, 2, "valid", "error_rate", {{100, 0.4}, {200, 0.25}, {300, 0.3}});
  AddEvals(data, 2, "valid", "loss", {{100, 0.01}});  // another metric: never the objective
  AddTrial(data, 3, TrialState::kFailed, adam(0.02, 0.4, 64, 0.85), std::nullopt, std::nullopt, 1, "optimizer=adam");
  AddTrial(data, 4, TrialState::kRunning, sgd(0.0002, 0.45, 64), 0.33, 200, 0, "optimizer=sgd");
  AddTrial(data, 5, TrialState::kPending, adam(0.003, 0.05, 128, 0.95), std::nullopt, std::nullopt, 1,
           "optimizer=adam");
  AddTrial(data, 6, TrialState::kCompleted, adam(0.004, 0.25, 256, 0.82), 0.15, 900, 1, "optimizer=adam");
  return data;
}

std::vector<std::uint64_t> TrialsOf(const AxisPlot& plot) {
  std::vector<std::uint64_t> trials;
  for (const auto& point : plot.points) trials.push_back(point.trial);
  return trials;
}

TEST(AxisPlotsTest, OnePlotPerVaryingParamInSpecOrder) {
  const auto plots = HyperparameterAxisPlots(AxisStudy());
  ASSERT_EQ(plots.size(), 5u);  // batch_size is fixed: nothing to plot
  EXPECT_EQ(plots[0].param_id, "optimizer");
  EXPECT_EQ(plots[1].param_id, "learning_rate");
  EXPECT_EQ(plots[2].param_id, "dropout");
  EXPECT_EQ(plots[3].param_id, "width");
  EXPECT_EQ(plots[4].param_id, "beta1");
  EXPECT_EQ(plots[0].role, Role::kScientific);
  EXPECT_EQ(plots[1].role, Role::kNuisance);
}

TEST(AxisPlotsTest, RangesHaveBoundsAndLogFlags) {
  const auto plots = HyperparameterAxisPlots(AxisStudy());
  const AxisPlot& lr = plots[1];
  EXPECT_TRUE(lr.log_scale);
  EXPECT_FALSE(lr.categorical);
  EXPECT_TRUE(lr.categories.empty());
  EXPECT_EQ(lr.lower, 1e-4);
  EXPECT_EQ(lr.upper, 0.1);
  const AxisPlot& dropout = plots[2];
  EXPECT_FALSE(dropout.log_scale);
  EXPECT_EQ(dropout.lower, 0.0);
  EXPECT_EQ(dropout.upper, 0.5);
}

TEST(AxisPlotsTest, PointsAreTrialsWithAnObjectiveOrInfeasible) {
  const auto plots = HyperparameterAxisPlots(AxisStudy());
  const AxisPlot& lr = plots[1];
  // Trial 3 (failed), 5 (pending) have no best value: left out. Trial 4 is running with a best so far: kept.
  EXPECT_EQ(TrialsOf(lr), (std::vector<std::uint64_t>{0, 1, 2, 4, 6}));
  EXPECT_DOUBLE_EQ(lr.points[0].position, 0.01);
  EXPECT_EQ(lr.points[0].objective, 0.2);
  EXPECT_EQ(lr.points[0].substudy, "optimizer=sgd");
  EXPECT_FALSE(lr.points[0].infeasible);
  // The infeasible trial: at its value, marked, no objective even though it recorded a best value.
  EXPECT_TRUE(lr.points[1].infeasible);
  EXPECT_DOUBLE_EQ(lr.points[1].position, 0.001);
  EXPECT_FALSE(lr.points[1].objective.has_value());
  // No best_value in the record: the best evaluation of valid/error_rate.
  EXPECT_EQ(lr.points[2].objective, 0.25);
  EXPECT_EQ(lr.points[3].objective, 0.33);
  EXPECT_EQ(lr.points[3].state, TrialState::kRunning);
  EXPECT_EQ(lr.points[1].state, TrialState::kInfeasible);
  EXPECT_DOUBLE_EQ(lr.points[3].position, 0.0002);
  EXPECT_TRUE(std::holds_alternative<double>(lr.points[4].value));
  EXPECT_EQ(std::get<double>(lr.points[4].value), 0.004);
}

TEST(AxisPlotsTest, ChoicesArePlacedAtTheirIndexAmongTheSpecsValues) {
  const auto plots = HyperparameterAxisPlots(AxisStudy());
  const AxisPlot& optimizer = plots[0];
  EXPECT_TRUE(optimizer.categorical);
  EXPECT_FALSE(optimizer.log_scale);
  EXPECT_FALSE(optimizer.lower.has_value());
  EXPECT_EQ(optimizer.categories, (std::vector<std::string>{"sgd", "adam"}));
  ASSERT_EQ(optimizer.points.size(), 5u);
  EXPECT_EQ(optimizer.points[0].position, 0);  // trial 0: sgd
  EXPECT_EQ(optimizer.points[1].position, 1);  // trial 1: adam
  const AxisPlot& width = plots[3];
  EXPECT_TRUE(width.categorical);
  EXPECT_EQ(width.categories, (std::vector<std::string>{"64", "128", "256"}));
  std::vector<double> positions;
  for (const auto& point : width.points) positions.push_back(point.position);
  EXPECT_EQ(positions, (std::vector<double>{1, 0, 2, 0, 2}));  // 128, 64, 256, 64, 256
}

TEST(AxisPlotsTest, ConditionalParamsHaveOnlyTheTrialsWhereTheyExist) {
  const auto plots = HyperparameterAxisPlots(AxisStudy());
  const AxisPlot& beta1 = plots[4];
  EXPECT_EQ(TrialsOf(beta1), (std::vector<std::uint64_t>{1, 6}));
  EXPECT_EQ(beta1.lower, 0.8);
  EXPECT_EQ(beta1.upper, 0.99);
}

TEST(AxisPlotsTest, MaximizingPicksTheHighestEvaluation) {
  std::string spec = kSpec;
  spec.insert(spec.find("space:"), "objective: {metric: valid/accuracy, direction: maximize}\n");
  StudyData data = MakeData(spec);
  AddTrial(data, 0, TrialState::kCompleted, {{"optimizer", std::string("sgd")}, {"learning_rate", 0.01}});
  AddEvals(data, 0, "valid", "accuracy", {{100, 0.7}, {200, 0.9}, {300, 0.8}});
  AddEvals(data, 0, "valid", "error_rate", {{100, 0.05}});
  EXPECT_EQ(BestObjectiveOf(data, data.trials[0]), 0.9);
  EXPECT_EQ(BestStepOf(data, data.trials[0]), 200);
  const auto plots = HyperparameterAxisPlots(data);
  ASSERT_EQ(plots[1].points.size(), 1u);
  EXPECT_EQ(plots[1].points[0].objective, 0.9);
}

TEST(AxisPlotsTest, ObjectiveWithoutSplitMeansValid) {
  std::string spec = kSpec;
  spec.insert(spec.find("space:"), "objective: loss\n");
  const Objective objective = MakeData(spec).spec.objective;
  EXPECT_EQ(objective.split, "valid");
  EXPECT_EQ(objective.metric, "loss");
  EXPECT_EQ(objective.Name(), "valid/loss");
}

TEST(AxisPlotsTest, TopTrialsRanksCompletedTrialsPerSubStudy) {
  StudyData data = AxisStudy();
  AddTrial(data, 7, TrialState::kCompleted, {}, 0.2, 100, 0, "optimizer=sgd");  // ties trial 0: later number
  EXPECT_EQ(TopTrials(data, 2), (std::vector<std::uint64_t>{0, 7, 6}));
  EXPECT_EQ(TopTrials(data, 5), (std::vector<std::uint64_t>{0, 7, 2, 6}));  // running trial 4 is not ranked
  EXPECT_TRUE(TopTrials(data, 0).empty());
}

}  // namespace
}  // namespace dltune
