#include "store/tracking.h"

#include <gtest/gtest.h>

#include "core/sha256.h"
#include "dltune/version.h"

namespace dltune {
namespace {

TrialRecord Trial(std::uint64_t number, std::size_t substudy, TrialState state, std::optional<double> best) {
  TrialRecord trial;
  trial.number = number;
  trial.substudy = substudy;
  trial.substudy_label = substudy ? "o=b" : "o=a";
  trial.state = state;
  trial.best_value = best;
  if (best) trial.best_step = static_cast<std::int64_t>(number * 100);
  return trial;
}

StudyRecord Study(const std::string& direction) {
  StudyRecord study;
  study.name = "s";
  study.spec_text =
      "name: s\nworkload: w\nmax_train_steps: 10\ntrials: 3\nobjective: {metric: valid/accuracy, direction: " +
      direction + "}\nspace: {o: {values: [a, b], role: scientific}}\n";
  study.command_line = "dltune run s.yaml";
  return study;
}

TEST(Tracking, SummaryCountsStatesAndFindsTheBestPerSubStudy) {
  const std::vector<TrialRecord> trials = {
      Trial(0, 0, TrialState::kCompleted, 0.7),       Trial(1, 1, TrialState::kCompleted, 0.9),
      Trial(2, 0, TrialState::kCompleted, 0.8),       Trial(3, 1, TrialState::kInfeasible, std::nullopt),
      Trial(4, 0, TrialState::kRunning, 0.99),  // not finished: not a candidate
      Trial(5, 1, TrialState::kPending, std::nullopt)};
  const StudySummary summary = SummarizeStudy(Study("maximize"), trials);
  EXPECT_EQ(summary.objective.Name(), "valid/accuracy");
  EXPECT_EQ(summary.Count(TrialState::kCompleted), 3);
  EXPECT_EQ(summary.StateText(), "3 completed, 1 running, 1 pending, 1 infeasible");
  ASSERT_TRUE(summary.best);
  EXPECT_EQ(summary.best->number, 1u);
  EXPECT_EQ(summary.best->step, 100);
  ASSERT_EQ(summary.best_per_substudy.size(), 2u);
  EXPECT_EQ(summary.best_per_substudy[0].number, 2u);
  EXPECT_EQ(summary.best_per_substudy[1].number, 1u);
  EXPECT_EQ(summary.reproduce, "dltune run s.yaml");

  const StudySummary minimizing = SummarizeStudy(Study("minimize"), trials);
  EXPECT_EQ(minimizing.best->number, 0u);
  // A study makes its trials as it goes: those not made yet count as pending.
  EXPECT_EQ(SummarizeStudy(Study("minimize"), {}).StateText(), "6 pending");
  StudyRecord unreadable = Study("minimize");
  unreadable.spec_text = "name: [";
  EXPECT_EQ(SummarizeStudy(unreadable, {}).StateText(), "no trials");
}

TEST(Tracking, NewStudyRecordsWhatReproducesIt) {
  const StudySpec spec = LoadStudySpec(DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
  const NewStudy study = DescribeNewStudy(spec, "dltune run examples/quickstart.yaml");
  EXPECT_EQ(study.name, "quickstart");
  EXPECT_EQ(study.spec_text, spec.text);
  EXPECT_EQ(study.spec_hash, Sha256Hex(spec.text));
  EXPECT_EQ(study.spec_path, DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
  EXPECT_EQ(study.dltune_version, kVersion);
  EXPECT_EQ(study.command_line, "dltune run examples/quickstart.yaml");
}

TEST(BestCheckpoint, PrefersAKeptCheckpointAtTheBestStep) {
  const std::vector<CheckpointRecord> checkpoints = {
      {.step = 100, .path = "a", .pool = CheckpointPool::kBest, .deleted = true},
      {.step = 200, .path = "b", .pool = CheckpointPool::kBest},
      {.step = 300, .path = "c", .pool = CheckpointPool::kLatest},
      {.step = 300, .path = "d", .pool = CheckpointPool::kBest},
      {.step = 400, .path = "e", .pool = CheckpointPool::kLatest},
  };
  EXPECT_EQ(BestCheckpoint(checkpoints, 300)->path, "d");
  EXPECT_EQ(BestCheckpoint(checkpoints, 400)->path, "e");
  EXPECT_EQ(BestCheckpoint(checkpoints, 100)->path, "d");  // deleted: the newest kept best-pool one
  EXPECT_FALSE(BestCheckpoint({checkpoints[0], checkpoints[2]}, 100));
}

}  // namespace
}  // namespace dltune
