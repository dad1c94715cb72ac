#include "dltune/analyze/next_step.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyze_test_util.h"

namespace dltune {
namespace {

using testing::AddTrial;
using ::testing::HasSubstr;
using testing::MakeData;

StudyData TwoOptimizers() {
  StudyData data = MakeData(R"(name: s
workload: synthetic
max_train_steps: 100
trials: 2
space:
  optimizer: {values: [sgd, adam], role: scientific}
  learning_rate: {min: 0.001, max: 0.1, scale: log}
)");
  data.study.spec_path = "s.yaml";
  return data;
}

TEST(NextStep, FromTheStudysStateAndFindings) {
  StudyData data = TwoOptimizers();
  EXPECT_EQ(RecommendNextStep(data, {}).command, "dltune run s.yaml");  // nothing ran yet
  AddTrial(data, 0, TrialState::kCompleted, {{"optimizer", Value(std::string("sgd"))}}, 0.3, 10, 0, "optimizer=sgd");
  AddTrial(data, 1, TrialState::kPending, {{"optimizer", Value(std::string("adam"))}}, {}, {}, 1, "optimizer=adam");
  EXPECT_EQ(RecommendNextStep(data, {}).id, "finish");
  data.trials[1].state = TrialState::kFailed;
  EXPECT_EQ(RecommendNextStep(data, {}).command, "dltune run s.yaml --retry-failed");
  data.trials[1].state = TrialState::kCompleted;
  data.trials[1].best_value = 0.25;

  const Diagnostic single{.id = "single_runs", .severity = Severity::kInfo, .title = "adam leads"};
  EXPECT_EQ(RecommendNextStep(data, {single}).command, "dltune plan retrain --from s --replicas 5");
  const Diagnostic boundary{.id = "boundary", .severity = Severity::kWarning, .title = "at the edge"};
  const NextStep expand = RecommendNextStep(data, {boundary, single});  // the space first
  EXPECT_EQ(expand.id, "expand_space");
  EXPECT_THAT(expand.command, HasSubstr("dltune show s --spec"));
  EXPECT_EQ(RecommendNextStep(data, {{.id = "compute_bound", .severity = Severity::kInfo}}).command,
            "dltune plan round2 --from s --top 3 --steps 2x");

  data.children = {"s-retrain"};
  EXPECT_EQ(RecommendNextStep(data, {single}).command, "dltune next s-retrain");
  data.notes.push_back({.kind = NoteKind::kDecision, .adopt = "trial 1", .text = "better"});
  data.children.clear();
  EXPECT_EQ(RecommendNextStep(data, {}).id, "launch");
  // `decide` said launch: whatever the findings that led to the decision, so does next.
  const Diagnostic noise{.id = "within_noise", .severity = Severity::kInfo, .title = "within the noise"};
  EXPECT_EQ(RecommendNextStep(data, {noise, single}).id, "launch");
  data.launches.push_back({.id = 1, .evaluation = {.trial = 1}, .reason = "best"});
  EXPECT_EQ(RecommendNextStep(data, {single}).id, "done");
}

}  // namespace
}  // namespace dltune
