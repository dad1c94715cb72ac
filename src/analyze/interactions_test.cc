#include <gtest/gtest.h>

#include "analyze_test_util.h"

namespace dltune {
namespace {

using testing::AddTrial;
using testing::MakeData;

TEST(Interactions, EveryPairOfRangesWithTheTrialsThatHoldBoth) {
  StudyData data = MakeData(R"(name: i
workload: synthetic
max_train_steps: 100
space:
  optimizer: {values: [sgd, adam]}
  lr: {min: 0.001, max: 1, scale: log}
  wd: {min: 0, max: 0.1}
  beta: {min: 0.5, max: 0.99, when: {optimizer: adam}}
)");
  AddTrial(data, 0, TrialState::kCompleted,
           {{"optimizer", Value(std::string("sgd"))}, {"lr", Value(0.1)}, {"wd", Value(0.01)}}, 0.3);
  AddTrial(data, 1, TrialState::kCompleted,
           {{"optimizer", Value(std::string("adam"))}, {"lr", Value(0.01)}, {"wd", Value(0.05)}, {"beta", Value(0.9)}},
           0.2);
  AddTrial(data, 2, TrialState::kInfeasible,
           {{"optimizer", Value(std::string("sgd"))}, {"lr", Value(0.9)}, {"wd", Value(0.0)}});
  const auto plots = InteractionPlots(data);
  ASSERT_EQ(plots.size(), 3u);  // (lr, wd), (lr, beta), (wd, beta); the categorical optimizer is left out
  EXPECT_EQ(plots[0].x_axis.param_id, "lr");
  EXPECT_EQ(plots[0].y_axis.param_id, "wd");
  EXPECT_TRUE(plots[0].x_axis.log_scale);
  ASSERT_EQ(plots[0].points.size(), 3u);
  EXPECT_EQ(plots[0].points[1].x, 0.01);
  EXPECT_EQ(plots[0].points[1].y, 0.05);
  EXPECT_EQ(plots[0].points[1].objective, std::optional<double>(0.2));
  EXPECT_TRUE(plots[0].points[2].infeasible);
  ASSERT_EQ(plots[1].points.size(), 1u);  // beta exists in the adam trial only
  EXPECT_EQ(plots[1].points[0].trial, 1u);
  EXPECT_EQ(InteractionPlots(data, 1).size(), 1u);
}

}  // namespace
}  // namespace dltune
