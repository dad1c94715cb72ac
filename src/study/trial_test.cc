#include "dltune/study/trial.h"

#include <gtest/gtest.h>

namespace dltune {
namespace {

constexpr TrialState kAll[] = {TrialState::kPending,    TrialState::kRunning, TrialState::kCompleted,
                               TrialState::kInfeasible, TrialState::kFailed,  TrialState::kStopped};

TEST(TrialState, NamesRoundTrip) {
  for (const TrialState state : kAll) EXPECT_EQ(ParseTrialState(TrialStateName(state)), state);
  EXPECT_EQ(ParseTrialState("done"), std::nullopt);
}

TEST(TrialState, FinishedTrialsNeverChange) {
  for (const TrialState from : kAll) {
    if (!IsFinished(from)) continue;
    for (const TrialState to : kAll) {
      // The one way out: a failed trial retried on request.
      const bool retry = from == TrialState::kFailed && to == TrialState::kPending;
      EXPECT_EQ(CanTransition(from, to), retry) << TrialStateName(from) << " -> " << TrialStateName(to);
    }
  }
  EXPECT_TRUE(CanTransition(TrialState::kPending, TrialState::kRunning));
  EXPECT_FALSE(CanTransition(TrialState::kPending, TrialState::kCompleted));  // never finished unclaimed
  EXPECT_TRUE(CanTransition(TrialState::kRunning, TrialState::kPending));     // reclaimed
  EXPECT_TRUE(CanTransition(TrialState::kStopped, TrialState::kPending));     // resumed
  EXPECT_FALSE(CanTransition(TrialState::kStopped, TrialState::kRunning));
}

}  // namespace
}  // namespace dltune
