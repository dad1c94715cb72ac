#include "core/eval_schedule.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

std::vector<std::int64_t> EvaluatedSteps(const EvalSchedule& schedule, std::int64_t every, std::int64_t max_steps) {
  std::vector<std::int64_t> steps;
  for (std::int64_t step = 1; step <= max_steps; ++step) {
    if (schedule.Evaluates(step, every, max_steps)) steps.push_back(step);
  }
  return steps;
}

TEST(EvalScheduleTest, EveryIsTheIntervalAndTheLastStep) {
  EXPECT_THAT(EvaluatedSteps(EvalSchedule::Parse("every"), 4, 10), ::testing::ElementsAre(4, 8, 10));
  EXPECT_EQ(EvalSchedule::Parse("").Text(), "every");
  EXPECT_FALSE(EvalSchedule::Parse("").DenseEarly());
}

TEST(EvalScheduleTest, DenseEvaluatesEveryStepUpToNThenTheInterval) {
  const EvalSchedule dense = EvalSchedule::Parse("dense:3");
  EXPECT_THAT(EvaluatedSteps(dense, 5, 17), ::testing::ElementsAre(1, 2, 3, 5, 10, 15, 17));
  EXPECT_EQ(dense.Text(), "dense:3");
  EXPECT_TRUE(dense.DenseEarly());
}

TEST(EvalScheduleTest, LogPointsAreRoundedPowersOfMaxStepsOnce) {
  // K = 5 over M = 10000: 10000^(i/4) = 1, 10, 100, 1000, 10000.
  EXPECT_THAT(EvaluatedSteps(EvalSchedule::Parse("log:5"), 1000, 10000),
              ::testing::ElementsAre(1, 10, 100, 1000, 10000));
  // Against the formula over many shapes: exactly the set {round(M^(i/(K-1)))}.
  for (const std::int64_t max_steps : {1, 2, 7, 500, 1999, 30000}) {
    for (const std::int64_t k : {2, 3, 13, 50, 400}) {
      std::vector<std::int64_t> expected;
      for (std::int64_t i = 0; i < k; ++i) {
        const auto step = std::llround(
            std::exp(static_cast<double>(i) / static_cast<double>(k - 1) * std::log(static_cast<double>(max_steps))));
        if (expected.empty() || expected.back() != step) expected.push_back(step);
      }
      EXPECT_EQ(EvaluatedSteps(EvalSchedule::Parse("log:" + std::to_string(k)), 100, max_steps), expected)
          << "M=" << max_steps << " K=" << k;
    }
  }
}

TEST(EvalScheduleTest, BadTextIsRefusedWithTheForms) {
  for (const char* bad : {"log:1", "dense:0", "log:", "dense", "sometimes", "every:3", "log:5x", "log:-3"}) {
    try {
      EvalSchedule::Parse(bad);
      ADD_FAILURE() << bad;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), ::testing::HasSubstr("dense:N")) << bad;
    }
  }
}

}  // namespace
}  // namespace dltune
