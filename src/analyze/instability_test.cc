#include "dltune/analyze/instability.h"

#include <cmath>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "analyze_test_util.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/next_step.h"

namespace dltune {
namespace {

using testing::AddTrial;
using testing::MakeData;

// 500 steps of loss(t) with multiplicative noise of `noise` (log-normal) and gradient norms near 1.
std::vector<LossStep> MakeRun(const std::function<double(int)>& loss, double noise = 0.1, unsigned seed = 1) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> gauss(0, 1);
  std::vector<LossStep> steps;
  for (int t = 1; t <= 500; ++t) {
    steps.push_back({t, loss(t) * std::exp(noise * gauss(rng)), std::exp(0.1 * gauss(rng))});
  }
  return steps;
}

double Decline(int t) { return 0.35 + 2.0 * std::exp(-t / 60.0); }

TEST(Stability, ASteadyDeclineIsStableEvenWithNoisyBatches) {
  for (const double noise : {0.0, 0.1, 0.2}) {
    for (unsigned seed = 1; seed <= 5; ++seed) {
      const StabilityVerdict verdict = ClassifyStability(MakeRun(Decline, noise, seed), 500, false);
      EXPECT_EQ(verdict.kind, Stability::kStable) << noise << " " << seed << ": " << verdict.evidence;
    }
  }
}

TEST(Stability, AnEarlyRiseThatStaysUpIsEarlyInstability) {
  // Up to 6 in steps 10-30, then stuck near 2.9 (above the start's 2.35 and far from its best).
  const auto loss = [](int t) { return t < 10 ? 2.35 : t < 30 ? 6.0 : 2.9 - 0.0002 * t; };
  const StabilityVerdict verdict = ClassifyStability(MakeRun(loss, 0.05), 500, false);
  EXPECT_EQ(verdict.kind, Stability::kEarly) << verdict.evidence;
  ASSERT_TRUE(verdict.rise_step);
  EXPECT_LE(*verdict.rise_step, 50);
  EXPECT_FALSE(verdict.recovered_step);
}

TEST(Stability, ASuddenRiseAfterASteadyDeclineIsMidTrainingInstabilityWithItsGradientSpike) {
  const auto loss = [](int t) { return t < 300 ? Decline(t) : 1.5; };
  std::vector<LossStep> steps = MakeRun(loss, 0.05);
  steps[298].grad_norm = 40.0;  // step 299: the spike that starts it
  const StabilityVerdict verdict = ClassifyStability(steps, 500, false);
  EXPECT_EQ(verdict.kind, Stability::kMidTraining) << verdict.evidence;
  ASSERT_TRUE(verdict.rise_step);
  EXPECT_GE(*verdict.rise_step, 300);
  EXPECT_LE(*verdict.rise_step, 320);  // the trailing median needs half its window to turn
  EXPECT_NEAR(*verdict.rise, 1.5 / 0.39 - 1, 0.4);
  EXPECT_EQ(verdict.spike_step, std::optional<std::int64_t>(299));
  EXPECT_GT(verdict.spike, 30);
}

TEST(Stability, ARiseThatComesBackIsRecovered) {
  const auto loss = [](int t) { return t >= 300 && t < 330 ? 1.5 : Decline(t); };
  const StabilityVerdict verdict = ClassifyStability(MakeRun(loss, 0.05), 500, false);
  EXPECT_EQ(verdict.kind, Stability::kRecovered) << verdict.evidence;
  ASSERT_TRUE(verdict.recovered_step);
  EXPECT_GT(*verdict.recovered_step, 330);
}

TEST(Stability, NanStoppedOrEndingAboveTheStartIsDiverged) {
  std::vector<LossStep> nan = MakeRun(Decline);
  nan.resize(200);
  nan.back().loss = std::nan("");
  StabilityVerdict verdict = ClassifyStability(nan, 500, true);
  EXPECT_EQ(verdict.kind, Stability::kDiverged);
  EXPECT_EQ(verdict.rise_step, std::optional<std::int64_t>(200));

  std::vector<LossStep> stopped = MakeRun(Decline);
  stopped.resize(120);
  EXPECT_EQ(ClassifyStability(stopped, 500, true).kind, Stability::kDiverged);

  const auto climbing = [](int t) { return 2.3 + 0.02 * t; };
  EXPECT_EQ(ClassifyStability(MakeRun(climbing, 0.05), 500, false).kind, Stability::kDiverged);
}

// A probe of lr 0.1 at 2x, 5x and 10x: stable, mid-training instability, diverged.
StudyData Probe() {
  StudyData data = MakeData(
      "name: p\nworkload: synthetic\nmax_train_steps: 500\nsampler: grid\n"
      "space:\n  learning_rate: {values: [0.2, 0.5, 1.0]}\n"
      "procedure: {kind: instability, parent: base, options: {learning_rate: 0.1}}\n");
  const double rates[] = {0.2, 0.5, 1.0};
  for (std::uint64_t i = 0; i < 3; ++i) {
    AddTrial(data, i, i == 2 ? TrialState::kInfeasible : TrialState::kCompleted, {{"learning_rate", rates[i]}}, 0.2);
    const auto loss = [i](int t) { return i == 0 || t < 300 ? Decline(t) : 1.5; };
    for (const LossStep& s : MakeRun(loss, 0.05, static_cast<unsigned>(i) + 1)) {
      if (i == 2 && s.step > 100) break;
      data.train[i].push_back({.step = s.step, .loss = s.loss, .grad_norm = s.grad_norm});
    }
  }
  data.trials[2].reason = "diverged: training loss is nan at step 101";
  return data;
}

TEST(Stability, TheProbeFindsTheSmallestUnstableLearningRate) {
  const InstabilityProbe probe = AnalyzeInstabilityProbe(Probe());
  ASSERT_EQ(probe.rows.size(), 3u);
  EXPECT_TRUE(probe.finished);
  EXPECT_DOUBLE_EQ(probe.rows[1].multiplier, 5.0);
  EXPECT_EQ(probe.rows[0].verdict->kind, Stability::kStable);
  EXPECT_EQ(probe.rows[1].verdict->kind, Stability::kMidTraining);
  EXPECT_EQ(probe.rows[2].verdict->kind, Stability::kDiverged);
  EXPECT_EQ(probe.unstable_learning_rate, std::optional<double>(0.5));
}

// Warmups of 10, 100 and 200 steps (each trial warmup × 3 steps), stable from `first_stable` on, or only the middle.
StudyData Warmups(const std::vector<bool>& stable, std::int64_t baseline_steps = 2000) {
  StudyData data = MakeData(
      "name: w\nworkload: synthetic\nmax_train_steps: 600\nsampler: grid\n"
      "space:\n  learning_rate: 5.0\n  warmup_steps: {values: [10, 100, 200]}\n"
      "procedure: {kind: warmup, parent: p, options: {baseline: base, learning_rate: 5.0, unstable_learning_rate: "
      "0.5, baseline_steps: " +
      std::to_string(baseline_steps) + ", post_warmup_factor: 2}}\n");
  const std::int64_t warmups[] = {10, 100, 200};
  for (std::uint64_t i = 0; i < 3; ++i) {
    AddTrial(data, i, stable[i] ? TrialState::kCompleted : TrialState::kInfeasible,
             {{"learning_rate", 5.0}, {"warmup_steps", warmups[i]}}, 0.2);
    if (!stable[i]) data.trials.back().reason = "diverged: training loss is nan at step 5";
    const std::int64_t steps = 3 * warmups[i];
    for (std::int64_t t = 1; t <= (stable[i] ? steps : 5); ++t) {
      data.train[i].push_back({.step = t, .loss = stable[i] ? Decline(static_cast<int>(t)) : 2.3});
    }
  }
  return data;
}

TEST(Stability, TheWarmupStudyFindsTheShortestStableWarmupWithItsBudget) {
  WarmupStudy study = AnalyzeWarmup(Warmups({false, true, true}));
  ASSERT_EQ(study.rows.size(), 3u);
  EXPECT_EQ(study.rows[0].steps, 30);
  EXPECT_EQ(study.rows[2].steps, 600);
  EXPECT_EQ(study.rows[0].verdict->kind, Stability::kDiverged);
  EXPECT_EQ(study.shortest_stable, std::optional<std::int64_t>(100));
  EXPECT_EQ(study.baseline_steps, 2000);
  // A longer warmup that did not train stably: only those after it count.
  study = AnalyzeWarmup(Warmups({true, false, true}));
  EXPECT_EQ(study.shortest_stable, std::optional<std::int64_t>(200));
  EXPECT_FALSE(AnalyzeWarmup(Warmups({true, true, false})).shortest_stable);
}

// The playbook caps warmup at a tenth of max_train_steps: longer warmups are suggested up to it, never past it, and
// once it was tried `next` moves on instead of asking for longer warmups again (the 224/560 -> 1120/2800 loop).
TEST(Stability, LongerWarmupsStayWithinATenthOfTheBudget) {
  const auto warmup_none = [](const StudyData& data) {
    for (const Diagnostic& d : Diagnose(data)) {
      if (d.id == "warmup_none") return d;
    }
    ADD_FAILURE() << "no warmup_none finding";
    return Diagnostic{};
  };
  const StudyData roomy = Warmups({false, false, false}, 20000);  // a tenth: 2000
  const Diagnostic longer = warmup_none(roomy);
  EXPECT_NE(longer.suggestion.find("--warmup-steps 400,1000"), std::string::npos) << longer.suggestion;
  EXPECT_EQ(RecommendNextStep(roomy, {longer}).id, "longer_warmup");
  const StudyData capped = Warmups({false, false, false}, 3000);  // a tenth: 300 -> only 300 is left to try
  EXPECT_NE(warmup_none(capped).suggestion.find("--warmup-steps 300 "), std::string::npos);
  const StudyData at_cap = Warmups({false, false, false}, 2000);  // a tenth: 200, tried already
  const Diagnostic none = warmup_none(at_cap);
  EXPECT_EQ(none.suggestion.find("dltune plan warmup"), std::string::npos) << none.suggestion;
  const NextStep next = RecommendNextStep(at_cap, {none});
  EXPECT_EQ(next.id, "below_instability");
  EXPECT_NE(next.command.find("dltune plan clipping --from base"), std::string::npos) << next.command;
}

}  // namespace
}  // namespace dltune
