#include "core/checkpoint_retention.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace dltune {
namespace {

std::vector<std::size_t> KeptIndices(const std::vector<RetentionCandidate>& checkpoints,
                                     const CheckpointRetention& retention) {
  const RetainedCheckpoints kept = RetainCheckpoints(checkpoints, retention);
  std::vector<std::size_t> indices;
  for (std::size_t i = 0; i < checkpoints.size(); ++i) {
    if (kept.Kept(i)) indices.push_back(i);
  }
  return indices;
}

TEST(CheckpointRetentionTest, KeepsTheNewestAndTheBest) {
  const std::vector<RetentionCandidate> checkpoints = {{10, 0.5}, {20, 0.2}, {30, 0.4}, {40, 0.6}, {50, 0.7}};
  EXPECT_EQ(KeptIndices(checkpoints, {.keep_latest = 2, .keep_best = 1}), (std::vector<std::size_t>{1, 3, 4}));
  EXPECT_EQ(KeptIndices(checkpoints, {.keep_latest = 1, .keep_best = 2, .direction = Direction::kMaximize}),
            (std::vector<std::size_t>{3, 4}));
  const RetainedCheckpoints pools = RetainCheckpoints(checkpoints, {.keep_latest = 1, .keep_best = 1});
  EXPECT_EQ(pools.latest, (std::vector<bool>{false, false, false, false, true}));
  EXPECT_EQ(pools.best, (std::vector<bool>{false, true, false, false, false}));
}

TEST(CheckpointRetentionTest, ListOrderDoesNotMatterExceptAmongEqualSteps) {
  const std::vector<RetentionCandidate> checkpoints = {{40, 0.6}, {10, 0.5}, {30, std::nullopt}, {20, 0.2}};
  EXPECT_EQ(KeptIndices(checkpoints, {.keep_latest = 2, .keep_best = 1}), (std::vector<std::size_t>{0, 2, 3}));
  // Of one step, the later one in the list is the newer.
  EXPECT_EQ(KeptIndices({{5, 1.0}, {5, 2.0}}, {.keep_latest = 1, .keep_best = 0}), (std::vector<std::size_t>{1}));
}

TEST(CheckpointRetentionTest, TiesGoToTheEarlierStepAndCheckpointsWithoutAFiniteObjectiveAreNeverBest) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<RetentionCandidate> checkpoints = {
      {30, 0.1}, {10, 0.1}, {20, std::nullopt}, {25, nan}, {26, -std::numeric_limits<double>::infinity()}};
  EXPECT_EQ(RankByObjective(checkpoints, Direction::kMinimize), (std::vector<std::size_t>{1, 0}));
  EXPECT_EQ(RankByObjective(checkpoints, Direction::kMaximize), (std::vector<std::size_t>{1, 0}));
  EXPECT_TRUE(RankByObjective({{1, std::nullopt}}, Direction::kMinimize).empty());
}

TEST(CheckpointRetentionTest, EmptyPoolsKeepNothing) {
  EXPECT_TRUE(KeptIndices({{1, 1.0}, {2, 2.0}}, {.keep_latest = 0, .keep_best = 0}).empty());
  EXPECT_TRUE(RetainCheckpoints({}, {}).latest.empty());
}

}  // namespace
}  // namespace dltune
