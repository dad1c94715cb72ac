#include "run/failure_breaker.h"

#include <gtest/gtest.h>

namespace dltune {
namespace {

TEST(FailureBreakerTest, TripsOnceAtTheNthEndingInARowWithOneCause) {
  FailureBreaker breaker(3);
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "a"));
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "a"));
  EXPECT_TRUE(breaker.Count(TrialState::kFailed, "a"));
  EXPECT_TRUE(breaker.tripped());
  EXPECT_EQ(breaker.consecutive(), 3);
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "a"));  // once is enough
  EXPECT_EQ(breaker.consecutive(), 4);
}

TEST(FailureBreakerTest, AnotherCauseOrAnotherEndingStartsTheCountAgain) {
  FailureBreaker breaker(2);
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "a"));
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "b"));
  EXPECT_EQ(breaker.consecutive(), 1);
  EXPECT_FALSE(breaker.Count(TrialState::kCompleted, ""));
  EXPECT_EQ(breaker.consecutive(), 0);
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "b"));
  EXPECT_FALSE(breaker.Count(TrialState::kInfeasible, ""));
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "b"));
  EXPECT_FALSE(breaker.tripped());
}

TEST(FailureBreakerTest, TrialsStoppedOnRequestDoNotBreakARun) {
  FailureBreaker breaker(2);
  EXPECT_FALSE(breaker.Count(TrialState::kFailed, "a"));
  EXPECT_FALSE(breaker.Count(TrialState::kStopped, ""));
  EXPECT_TRUE(breaker.Count(TrialState::kFailed, "a"));
}

TEST(FailureBreakerTest, MachineFaultsCountLikeFailures) {
  FailureBreaker breaker(2);
  EXPECT_FALSE(breaker.Count(TrialState::kStopped, "disk full"));
  EXPECT_TRUE(breaker.Count(TrialState::kStopped, "disk full"));
}

TEST(FailureBreakerTest, ZeroNeverTrips) {
  FailureBreaker breaker(0);
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(breaker.Count(TrialState::kFailed, "a"));
  EXPECT_EQ(breaker.consecutive(), 10);
}

TEST(FailureCauseTest, NumbersDoNotMakeAnotherCauseButTheLastLineOfStderrDoes) {
  EXPECT_NE(FailureCause("exit status 4", "error: data_1.bin"), FailureCause("exit status 4", "error: model.pt"));
  EXPECT_EQ(FailureCause("exit status 4", "error: data_1.bin"), FailureCause("exit status 4", "error: data_2.bin"));
  EXPECT_EQ(FailureCause("exit status 4", "warning 1\nerror"), FailureCause("exit status 5", "warning 2\nerror"));
  EXPECT_NE(FailureCause("exit status 4", "error\nwarning"), FailureCause("exit status 4", "warning\nerror"));
}

TEST(InfrastructureFailureTest, ADiskErrorAtTheEndOfStderrIsTheMachines) {
  EXPECT_EQ(InfrastructureFailure("", "OSError: [Errno 28] No space left on device"),
            "the disk failed: No space left on device");
  EXPECT_EQ(InfrastructureFailure("", "cannot write: Read-only file system"), "the disk failed: Read-only file system");
  EXPECT_EQ(InfrastructureFailure("", "ValueError: bad shape"), "");
}

}  // namespace
}  // namespace dltune
