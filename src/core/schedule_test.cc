#include "core/schedule.h"

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

ScheduleOptions Make(const std::string& kind, double base, std::int64_t max_steps, std::int64_t warmup = 0,
                     std::int64_t decay = 0, double final_fraction = 0.0) {
  ScheduleOptions options;
  options.kind = kind;
  options.base_learning_rate = base;
  options.max_train_steps = max_steps;
  options.warmup_steps = warmup;
  options.decay_steps = decay;
  options.final_fraction = final_fraction;
  return options;
}

TEST(ScheduleTest, ConstantIsTheBaseEverywhere) {
  const auto options = Make("constant", 0.1, 100);
  for (const std::int64_t step : {0, 1, 50, 99, 100, 1000}) EXPECT_EQ(LearningRate(options, step), 0.1) << step;
}

TEST(ScheduleTest, WarmupRampsFromExactlyZero) {
  const auto options = Make("constant", 0.1, 100, 10);
  EXPECT_EQ(LearningRate(options, 0), 0.0);
  EXPECT_DOUBLE_EQ(LearningRate(options, 1), 0.01);
  EXPECT_DOUBLE_EQ(LearningRate(options, 5), 0.05);
  EXPECT_DOUBLE_EQ(LearningRate(options, 9), 0.09);
  EXPECT_EQ(LearningRate(options, 10), 0.1);
  EXPECT_EQ(LearningRate(options, 99), 0.1);
}

TEST(ScheduleTest, LinearDecaysToTheFinalFractionAtMaxTrainSteps) {
  const auto to_zero = Make("linear", 1.0, 100);
  EXPECT_EQ(LearningRate(to_zero, 0), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(to_zero, 50), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(to_zero, 99), 0.01);
  EXPECT_EQ(LearningRate(to_zero, 100), 0.0);
  EXPECT_EQ(LearningRate(to_zero, 500), 0.0);

  const auto warm = Make("linear", 1.0, 110, 10, 0, 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 5), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 10), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 60), 0.55);
  EXPECT_EQ(LearningRate(warm, 110), 0.1);
}

TEST(ScheduleTest, ExplicitDecayStepsTakeTheLastStepsAfterAConstantHold) {
  const auto options = Make("linear", 1.0, 100, 10, 40);
  for (const std::int64_t step : {10, 30, 59, 60}) EXPECT_DOUBLE_EQ(LearningRate(options, step), 1.0) << step;
  EXPECT_DOUBLE_EQ(LearningRate(options, 80), 0.5);
  EXPECT_EQ(LearningRate(options, 100), 0.0);
}

TEST(ScheduleTest, CosineFollowsHalfACosine) {
  const auto options = Make("cosine", 2.0, 100);
  EXPECT_DOUBLE_EQ(LearningRate(options, 0), 2.0);
  EXPECT_DOUBLE_EQ(LearningRate(options, 25), 1.0 + std::sqrt(0.5));
  EXPECT_DOUBLE_EQ(LearningRate(options, 50), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(options, 75), 1.0 - std::sqrt(0.5));
  EXPECT_EQ(LearningRate(options, 100), 0.0);

  const auto warm = Make("cosine", 2.0, 110, 10, 0, 0.2);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 5), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 10), 2.0);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 60), 0.4 + 0.8);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 110), 0.4);
}

TEST(ScheduleTest, InverseSqrtDecaysAsOneOverSqrtStepAfterWarmup) {
  const auto warm = Make("inverse_sqrt", 1.0, 1000, 4);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 2), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 4), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 16), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(warm, 64), 0.25);

  const auto cold = Make("inverse_sqrt", 1.0, 1000);
  EXPECT_DOUBLE_EQ(LearningRate(cold, 0), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(cold, 1), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(cold, 4), 0.5);
  EXPECT_DOUBLE_EQ(LearningRate(cold, 100), 0.1);
  EXPECT_DOUBLE_EQ(LearningRate(cold, 5000), LearningRate(cold, 1000));
}

// Every kind rises (weakly) through warmup to the base, then never rises again.
TEST(ScheduleTest, RisesDuringWarmupAndNeverAfter) {
  for (const std::string& kind : ScheduleKinds()) {
    SCOPED_TRACE(kind);
    const auto options = Make(kind, 0.3, 200, 20, 0, 0.05);
    double previous = LearningRate(options, 0);
    for (std::int64_t step = 1; step <= 220; ++step) {
      const double lr = LearningRate(options, step);
      if (step <= 20) {
        EXPECT_GT(lr, previous) << step;
      } else {
        EXPECT_LE(lr, previous) << step;
      }
      EXPECT_LE(lr, 0.3 * (1 + 1e-15)) << step;
      previous = lr;
    }
    EXPECT_DOUBLE_EQ(LearningRate(options, 20), 0.3);
  }
}

TEST(ScheduleTest, RejectsNegativeSteps) {
  try {
    LearningRate(Make("constant", 0.1, 10), -1);
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("step must be >= 0, not -1"));
  }
}

// Round 2 linear: same warmup, same decay length, the constant part is longer: the decay is shifted later.
TEST(ScheduleTest, Round2LinearKeepsTheDecayLengthAndStartsItLater) {
  const auto round1 = Make("linear", 1.0, 100, 10, 0, 0.1);
  const auto round2 = ExtendForRound2(round1, 250);
  EXPECT_EQ(round2.max_train_steps, 250);
  EXPECT_EQ(round2.decay_steps, 90);
  EXPECT_EQ(round2.warmup_steps, 10);
  EXPECT_EQ(round2.base_learning_rate, 1.0);
  EXPECT_EQ(round2.final_fraction, 0.1);
  for (std::int64_t step = 0; step < 10; ++step) EXPECT_EQ(LearningRate(round2, step), LearningRate(round1, step));
  for (const std::int64_t step : {10, 100, 159, 160}) EXPECT_DOUBLE_EQ(LearningRate(round2, step), 1.0) << step;
  for (std::int64_t step = 10; step <= 100; ++step) {
    EXPECT_DOUBLE_EQ(LearningRate(round2, step + 150), LearningRate(round1, step)) << step;
  }

  // An explicit decay length is kept as it is.
  EXPECT_EQ(ExtendForRound2(Make("linear", 1.0, 100, 10, 30), 300).decay_steps, 30);
}

// Round 2 cosine: same base, the cosine stretched to the new max_train_steps.
TEST(ScheduleTest, Round2CosineStretchesToTheNewMaxSteps) {
  const auto round1 = Make("cosine", 1.0, 110, 10, 0, 0.2);
  const auto round2 = ExtendForRound2(round1, 210);
  EXPECT_EQ(round2.max_train_steps, 210);
  EXPECT_EQ(round2.decay_steps, 0);
  EXPECT_EQ(round2.base_learning_rate, 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(round2, 10), 1.0);
  EXPECT_DOUBLE_EQ(LearningRate(round2, 110), 0.6);  // halfway: (0.2 + 1) / 2
  EXPECT_DOUBLE_EQ(LearningRate(round2, 210), 0.2);
  for (std::int64_t step = 10; step <= 110; ++step) {
    EXPECT_DOUBLE_EQ(LearningRate(round2, 10 + 2 * (step - 10)), LearningRate(round1, step)) << step;
  }

  // With an explicit decay after a constant hold, the hold keeps its length and the decay takes the extra steps.
  const auto held = ExtendForRound2(Make("cosine", 1.0, 100, 10, 50), 200);
  EXPECT_EQ(held.decay_steps, 150);
  EXPECT_DOUBLE_EQ(LearningRate(held, 50), 1.0);
  EXPECT_LT(LearningRate(held, 51), 1.0);
}

TEST(ScheduleTest, Round2ConstantOnlyExtendsAndInverseSqrtIsRefused) {
  const auto round2 = ExtendForRound2(Make("constant", 0.5, 100, 5), 400);
  EXPECT_EQ(round2.max_train_steps, 400);
  EXPECT_EQ(round2.warmup_steps, 5);
  EXPECT_EQ(LearningRate(round2, 399), 0.5);

  try {
    ExtendForRound2(Make("inverse_sqrt", 0.5, 100), 400);
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("inverse_sqrt has no round-2 extension"));
  }
  try {
    ExtendForRound2(Make("linear", 0.5, 100), 50);
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("round 2 max_train_steps 50 is below round 1's 100"));
  }
}

// Expects Validate() of a changed valid schedule to throw an Error whose message contains `needle`.
void ExpectInvalid(const std::function<void(ScheduleOptions&)>& change, const std::string& needle) {
  ScheduleOptions options = Make("linear", 0.1, 100, 10);
  EXPECT_NO_THROW(options.Validate());
  change(options);
  try {
    options.Validate();
    ADD_FAILURE() << "no Error for " << needle;
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(needle));
  }
}

TEST(ScheduleTest, ValidateNamesTheBadValue) {
  ExpectInvalid([](auto& o) { o.kind = "step"; },
                "schedule: unknown kind 'step'; kinds: constant, linear, cosine, inverse_sqrt");
  ExpectInvalid([](auto& o) { o.base_learning_rate = 0.0; }, "base_learning_rate must be finite and > 0, not 0");
  ExpectInvalid([](auto& o) { o.base_learning_rate = std::nan(""); }, "base_learning_rate must be finite and > 0");
  ExpectInvalid([](auto& o) { o.max_train_steps = 0; }, "max_train_steps must be > 0, not 0");
  ExpectInvalid([](auto& o) { o.warmup_steps = 100; }, "warmup_steps must be in [0, max_train_steps = 100), not 100");
  ExpectInvalid([](auto& o) { o.warmup_steps = -1; }, "warmup_steps must be in [0, max_train_steps = 100), not -1");
  ExpectInvalid([](auto& o) { o.decay_steps = 91; },
                "decay_steps must be in [0, max_train_steps - warmup_steps = 90], not 91");
  ExpectInvalid([](auto& o) { o.decay_steps = -5; }, "decay_steps must be in [0, max_train_steps - warmup_steps = 90]");
  ExpectInvalid([](auto& o) { o.final_fraction = 1.5; }, "final_fraction must be in [0, 1], not 1.5");
  EXPECT_THROW(LearningRate(Make("linear", -1.0, 100), 0), Error);
}

}  // namespace
}  // namespace dltune
