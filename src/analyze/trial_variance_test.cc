#include "dltune/analyze/trial_variance.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyze_test_util.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/next_step.h"

namespace dltune {
namespace {

using testing::AddTrial;
using ::testing::HasSubstr;
using testing::MakeData;

// Two configurations (sgd, adam) × `replicas`, values by configuration then replica; trial n = replica * 2 + config.
StudyData Replicated(const std::vector<std::vector<double>>& values, const std::string& extra = "") {
  StudyData data = MakeData(std::string(R"(name: r
workload: synthetic
max_train_steps: 100
replicas: )") + std::to_string(values.front().size()) +
                            R"(
sampler: {name: list, configs: [{optimizer: sgd}, {optimizer: adam}]}
space:
  optimizer: {values: [sgd, adam], role: scientific}
)" + extra);
  for (std::size_t r = 0; r < values.front().size(); ++r) {
    for (std::size_t c = 0; c < values.size(); ++c) {
      TrialRecord& trial = AddTrial(data, r * values.size() + c, TrialState::kCompleted,
                                    {{"optimizer", Value(std::string(c == 0 ? "sgd" : "adam"))}}, values[c][r], 10, c,
                                    c == 0 ? "optimizer=sgd" : "optimizer=adam");
      trial.configuration = c;
      trial.replica = r;
    }
  }
  return data;
}

TEST(TrialVariance, MeansIntervalsAndTheMedianReplica) {
  const StudyData data = Replicated({{0.30, 0.32, 0.31, 0.35}, {0.20, 0.22, 0.21, 0.26}});
  const TrialVariance variance = AnalyzeTrialVariance(data);
  ASSERT_EQ(variance.configurations.size(), 2u);
  const ConfigurationReplicas& sgd = variance.configurations[0];
  EXPECT_EQ(sgd.scientific, "optimizer=sgd");
  EXPECT_NEAR(sgd.stats.mean, 0.32, 1e-12);
  EXPECT_EQ(sgd.stats.n, 4);
  // 0.31 and 0.32 are the middle two; 0.32 is the mean: trial 2 (replica 1) is the median replica.
  EXPECT_EQ(sgd.median_trial, std::optional<std::uint64_t>(2));
  EXPECT_EQ(variance.best_configuration, std::optional<std::uint64_t>(1));
  ASSERT_EQ(variance.comparisons.size(), 1u);
  const ReplicaComparison& c = variance.comparisons[0];
  EXPECT_EQ(c.better, 1u);
  EXPECT_EQ(c.better_label, "optimizer=adam");
  // Paired by replica: 0.10 0.10 0.10 0.09: adam better by 0.0975 with a narrow interval.
  EXPECT_NEAR(c.advantage.mean, 0.0975, 1e-12);
  EXPECT_FALSE(c.within_noise);
}

TEST(TrialVariance, ADifferenceWithinTheNoiseIsSaid) {
  const StudyData data = Replicated({{0.30, 0.36, 0.27, 0.33}, {0.31, 0.29, 0.34, 0.30}});
  const TrialVariance variance = AnalyzeTrialVariance(data);
  ASSERT_EQ(variance.comparisons.size(), 1u);
  EXPECT_TRUE(variance.comparisons[0].within_noise);
  ASSERT_TRUE(variance.pooled_sd);
  bool found = false;
  for (const Diagnostic& d : Diagnose(data)) {
    if (d.id != "within_noise") continue;
    found = true;
    EXPECT_THAT(d.title, HasSubstr("within the run-to-run noise"));
    EXPECT_THAT(d.detail, HasSubstr("95% CI"));
  }
  EXPECT_TRUE(found);
}

// dltune doctor and dltune next give a retrain within the noise the same way on: more replicas of this study, by
// extending it, not a new study.
TEST(TrialVariance, DoctorAndNextExtendARetrainWithinTheNoiseAlike) {
  StudyData data = Replicated({{0.30, 0.36, 0.27, 0.33}, {0.31, 0.29, 0.34, 0.30}});
  data.spec.procedure.kind = "retrain";
  data.spec.procedure.parent = "base";
  data.study.spec_path = "r.yaml";
  const std::string more = MoreReplicasCommand(data);
  EXPECT_EQ(more,
            "dltune plan retrain --from base --top 1 --replicas 8 --name r -o r.yaml --force && dltune run r.yaml "
            "--extend");
  const std::vector<Diagnostic> diagnostics = Diagnose(data);
  const auto within =
      std::find_if(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& d) { return d.id == "within_noise"; });
  ASSERT_NE(within, diagnostics.end());
  EXPECT_THAT(within->suggestion, HasSubstr(more));
  EXPECT_EQ(RecommendNextStep(data, diagnostics).command, more);
}

TEST(TrialVariance, IsolationPlotsShowIntervalsWithReplicasOnly) {
  const StudyData data = Replicated({{0.30, 0.32, 0.31}, {0.20, 0.22, 0.21}});
  const auto plots = IsolationPlots(data);
  ASSERT_EQ(plots.size(), 1u);
  for (const IsolationPoint& point : plots[0].points) {
    EXPECT_EQ(point.replicas, 3);
    EXPECT_TRUE(point.low && point.high);
  }
  EXPECT_NEAR(*plots[0].points[1].best, 0.21, 1e-12);  // adam's mean, not its best single run (0.20)
}

TEST(TrialVariance, TheParentsRankingAgainstThisStudys) {
  StudyData data = Replicated({{0.30, 0.32}, {0.20, 0.22}},
                              "procedure: {kind: retrain, parent: p, from_trials: "
                              "[{trial: 5, seed: 1}, {trial: 9, seed: 2}]}\n");
  TrialRecord sgd_parent;
  sgd_parent.number = 5;
  sgd_parent.best_value = 0.18;  // sgd looked best in the parent: a lucky seed
  TrialRecord adam_parent;
  adam_parent.number = 9;
  adam_parent.best_value = 0.25;
  data.parent_trials = {sgd_parent, adam_parent};
  const RoundComparison rounds = CompareWithParent(data);
  ASSERT_EQ(rounds.rows.size(), 2u);
  EXPECT_EQ(rounds.parent_winner, std::optional<std::uint64_t>(0));
  EXPECT_EQ(rounds.winner, std::optional<std::uint64_t>(1));
  EXPECT_TRUE(rounds.winner_changed);
  EXPECT_NEAR(*rounds.rank_correlation, -1.0, 1e-12);
  const TrialVariance variance = AnalyzeTrialVariance(data);
  EXPECT_NEAR(*variance.comparisons[0].parent_gap, -0.07, 1e-12);  // the parent said the opposite
}

TEST(TrialVariance, SingleRunsSayTheirVarianceIsUnknown) {
  EXPECT_EQ(ReplicaValueText(SummarizeMean(std::vector<double>{0.25})), "0.25 (single run, variance unknown)");
  EXPECT_THAT(ReplicaValueText(SummarizeMean(std::vector<double>{0.25, 0.27, 0.26})),
              HasSubstr("(95% CI, 3 replicas)"));
}

// `dltune compare` draws a verdict only where the data support one: the same kind of study at the same budget; with
// replicas, by the best configurations' means and their intervals, not by a best of k runs.
TEST(CompareStudies, AVerdictOnlyWhereTheDataSupportOne) {
  const auto search = [](const std::string& name, std::int64_t steps, const std::vector<double>& values) {
    StudyData data = MakeData("name: " + name + "\nworkload: synthetic\nmax_train_steps: " + std::to_string(steps) +
                              "\ntrials: " + std::to_string(values.size()) +
                              "\nspace:\n  learning_rate: {min: 0.01, max: 1, scale: log}\n");
    for (std::size_t i = 0; i < values.size(); ++i) {
      AddTrial(data, i, TrialState::kCompleted, {{"learning_rate", Value(0.1)}}, values[i], 10);
    }
    return data;
  };
  const StudyData a = search("a", 100, {0.30, 0.31, 0.32, 0.33});
  const StudyData b = search("b", 100, {0.10, 0.11, 0.12, 0.13});
  const StudyComparison same = CompareStudies(a, b);
  EXPECT_EQ(same.no_verdict, "");
  EXPECT_EQ(same.better, "b");
  EXPECT_FALSE(same.overlap);
  EXPECT_FALSE(same.by_means);

  const StudyComparison longer = CompareStudies(a, search("b2", 200, {0.10, 0.11}));
  EXPECT_THAT(longer.no_verdict, HasSubstr("different budgets (a trains 100 steps, b2 200)"));
  EXPECT_EQ(longer.better, "");

  StudyData retrain = Replicated({{0.30, 0.31, 0.29}, {0.20, 0.21, 0.22}});
  retrain.spec.procedure.kind = "retrain";
  const StudyComparison kinds = CompareStudies(a, retrain);
  EXPECT_THAT(kinds.no_verdict, HasSubstr("a is a search and r is a study of configurations chosen beforehand"));

  // Two searches of their space are compared whatever planned them (the step budget applied, clipping applied).
  StudyData tuned = search("p-tuning", 100, {0.30, 0.31, 0.32, 0.33});
  tuned.spec.procedure.kind = "apply-steps";
  StudyData clipped = search("p-tuning-clipped", 100, {0.10, 0.11, 0.12, 0.13});
  clipped.spec.procedure.kind = "apply-clipping";
  const StudyComparison searches = CompareStudies(tuned, clipped);
  EXPECT_EQ(searches.no_verdict, "");
  EXPECT_EQ(searches.better, "p-tuning-clipped");
  // A measurement is no search: its trials probe one configuration.
  StudyData probe = search("p-instability", 100, {0.10, 0.11, 0.12, 0.13});
  probe.spec.procedure.kind = "instability";
  EXPECT_THAT(CompareStudies(tuned, probe).no_verdict, HasSubstr("p-instability is an instability measurement"));

  // Two retrains: by their best configurations' means. Within the noise when the intervals overlap.
  StudyData other = Replicated({{0.30, 0.31, 0.29}, {0.24, 0.18, 0.27}});
  other.study.name = "r2";
  other.spec.procedure.kind = "retrain";
  const StudyComparison means = CompareStudies(retrain, other);
  EXPECT_EQ(means.no_verdict, "");
  EXPECT_TRUE(means.by_means);
  EXPECT_TRUE(means.overlap);
}

}  // namespace
}  // namespace dltune
