#include "dltune/study/trial.h"

#include <gtest/gtest.h>

#include "dltune/core/error.h"

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

TEST(TrialState, TheTableListsEveryTransitionInOrder) {
  const auto& table = TrialTransitions();
  ASSERT_EQ(table.size(), 6u);
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(static_cast<std::size_t>(table[i].transition), i) << table[i].name;
    EXPECT_EQ(&TransitionRule(table[i].transition), &table[i]);
  }
  EXPECT_TRUE(TransitionRule(TrialTransition::kCreate).from.empty());
  EXPECT_EQ(TransitionRule(TrialTransition::kClaim).Target(), TrialState::kRunning);
  EXPECT_EQ(TransitionRule(TrialTransition::kRetry).Target(), TrialState::kPending);
  EXPECT_THROW(TransitionRule(TrialTransition::kReclaim).Target(), Error);
  EXPECT_TRUE(TransitionRule(TrialTransition::kReclaim).Allows(TrialState::kRunning, TrialState::kFailed));
  EXPECT_FALSE(TransitionRule(TrialTransition::kFinish).Reaches(TrialState::kPending));
  EXPECT_TRUE(TransitionRule(TrialTransition::kFinish).Allows(TrialState::kRunning, TrialState::kStopped));
}

}  // namespace
}  // namespace dltune
