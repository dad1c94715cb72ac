#include "training_rules.h"

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "checkpoint_state.h"
#include "core/files.h"
#include "cuda_graph.h"

namespace dltune {
namespace {

// A loss as the shared cases write it: a number, or "nan", "-nan", "inf", "-inf".
double Loss(const nlohmann::json& value) {
  if (value.is_number()) return value.get<double>();
  const std::string text = value.get<std::string>();
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  if (text == "nan") return nan;
  if (text == "-nan") return -nan;
  if (text == "inf") return inf;
  if (text == "-inf") return -inf;
  throw std::invalid_argument("not a loss: " + text);
}

// The cases the Python client's rule is tested on too (python/tests/test_trial.py): the same verdicts, word for word.
TEST(TrainingRules, DivergenceGivesTheSharedCasesVerdicts) {
  const auto cases = nlohmann::json::parse(
      ReadWholeFile(std::filesystem::path(DLTUNE_SOURCE_DIR) / "src/train/testdata/divergence_cases.json"))["cases"];
  ASSERT_GE(cases.size(), 10u);
  for (const nlohmann::json& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    std::optional<double> first;
    if (!c["first_loss"].is_null()) first = c["first_loss"].get<double>();
    const double loss = Loss(c["loss"]);
    const std::optional<std::string> verdict =
        Divergence(first, loss, c["step"].get<std::int64_t>(), c["factor"].get<double>());
    if (c["diverged"].is_null()) {
      EXPECT_EQ(verdict, std::nullopt);
    } else {
      EXPECT_EQ(verdict, c["diverged"].get<std::string>());
    }
    ASSERT_TRUE(first.has_value());  // set by the run's first loss
    if (c["first_loss"].is_null() && std::isfinite(loss)) {
      EXPECT_EQ(*first, loss);
    }
  }
}

TEST(TrainingRules, AnIntervalsTimeIsSharedByItsSteps) {
  std::vector<StepMetrics> steps(4);
  ShareIntervalTime(steps, 2.0, 0.4, 32);
  for (const StepMetrics& m : steps) {
    EXPECT_EQ(m.step_time, 0.5);
    EXPECT_EQ(m.data_wait, 0.1);
    EXPECT_EQ(m.examples_per_second, 64);
  }
  std::vector<StepMetrics> instant(1);
  ShareIntervalTime(instant, 0, 0, 32);
  EXPECT_EQ(instant[0].examples_per_second, 0);  // not infinite
}

TEST(TrainingRules, MetricsComeFromTheWeightedSums) {
  std::vector<EvalMetric> metrics;
  AddMetricsFromSums("valid", {.loss = 6, .correct = 3, .weight = 4, .class_correct = {1, 2}}, metrics);
  ASSERT_EQ(metrics.size(), 5u);
  const std::vector<std::pair<std::string, double>> expected = {
      {"loss", 1.5}, {"error_rate", 0.25}, {"accuracy", 0.75}, {"correct_class_0", 1}, {"correct_class_1", 2}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(metrics[i].split, "valid");
    EXPECT_EQ(metrics[i].metric, expected[i].first);
    EXPECT_EQ(metrics[i].value, expected[i].second);
    EXPECT_EQ(metrics[i].examples, 4);
  }
}

TEST(TrainingRules, TheSplitsToEvaluate) {
  TrainingSettings settings;
  using Splits = std::vector<std::string>;
  EXPECT_EQ(SplitsToEvaluate(settings, false), (Splits{"train", "valid"}));
  settings.test_at_end = true;
  EXPECT_EQ(SplitsToEvaluate(settings, false), (Splits{"train", "valid"}));
  EXPECT_EQ(SplitsToEvaluate(settings, true), (Splits{"train", "valid", "test"}));
  // With a validation sample, the whole split at the last evaluation only.
  settings.valid_sample_examples = 500;
  EXPECT_EQ(SplitsToEvaluate(settings, false), (Splits{"train", "valid_sample"}));
  EXPECT_EQ(SplitsToEvaluate(settings, true), (Splits{"train", "valid_sample", "valid", "test"}));
}

TEST(TrainingRules, TheObjectiveIsItsSplitsMetricOrItsSamples) {
  Objective objective;
  objective.split = "valid";
  objective.metric = "error_rate";
  const std::vector<EvalMetric> sampled = {{"train", "error_rate", 0.1, 10}, {"valid_sample", "error_rate", 0.3, 5}};
  EXPECT_EQ(ObjectiveValue(objective, sampled), 0.3);
  std::vector<EvalMetric> whole = sampled;
  whole.push_back({"valid", "error_rate", 0.25, 50});
  EXPECT_EQ(ObjectiveValue(objective, whole), 0.25);  // the whole split wins over its sample
  objective.metric = "loss";
  EXPECT_EQ(ObjectiveValue(objective, whole), std::nullopt);
}

TEST(TrainingRules, TheBestStepIsTheFirstOfTheBestFiniteValues) {
  BestObjective best;
  best.Record(10, std::nullopt, Direction::kMinimize);
  EXPECT_EQ(best.step, std::nullopt);
  best.Record(20, std::nan(""), Direction::kMinimize);
  EXPECT_EQ(best.step, std::nullopt);  // not finite: never the best
  EXPECT_TRUE(std::isnan(*best.last));
  best.Record(30, 0.5, Direction::kMinimize);
  best.Record(40, 0.4, Direction::kMinimize);
  best.Record(50, 0.4, Direction::kMinimize);  // as good: the earlier step stays
  best.Record(60, 0.6, Direction::kMinimize);
  EXPECT_EQ(best.step, 40);
  EXPECT_EQ(best.value, 0.4);
  EXPECT_EQ(best.last, 0.6);
  BestObjective most;
  most.Record(1, 0.5, Direction::kMaximize);
  most.Record(2, 0.7, Direction::kMaximize);
  EXPECT_EQ(most.step, 2);
}

TEST(TrainingRules, TheCheckpointArchiveReadsBackWhatItWrote) {
  torch::manual_seed(1);
  torch::nn::Linear written(3, 2), read(3, 2);
  std::int64_t optimizer_value = 0;
  const std::string bytes = WriteTrainingState(
      *written, [](torch::serialize::OutputArchive& archive) { archive.write("steps", torch::tensor(7)); },
      {.step = 12, .best_step = 10, .best_value = 0.25, .initial_loss = 2.5, .cpu_generator = torch::tensor(3)}, 1,
      [](torch::serialize::OutputArchive& archive) { archive.write("extra", torch::tensor(9)); });
  torch::serialize::InputArchive archive;
  const TrainingProgress progress = ReadTrainingState(
      bytes, c10::nullopt, *read,
      [&](torch::serialize::InputArchive& optimizer) {
        torch::Tensor steps;
        optimizer.read("steps", steps);
        optimizer_value = steps.item<std::int64_t>();
      },
      archive);
  EXPECT_TRUE(torch::equal(read->weight, written->weight));
  EXPECT_TRUE(torch::equal(read->bias, written->bias));
  EXPECT_EQ(optimizer_value, 7);
  EXPECT_EQ(progress.step, 12);
  EXPECT_EQ(progress.best_step, 10);
  EXPECT_EQ(progress.best_value, 0.25);
  EXPECT_EQ(progress.initial_loss, 2.5);
  torch::Tensor extra;
  ASSERT_TRUE(archive.try_read("extra", extra));
  EXPECT_EQ(extra.item<std::int64_t>(), 9);
}

TEST(TrainingRules, AStepIsRefusedAGraphForTheFirstObstacleInOrder) {
  EXPECT_EQ(WhyTheStepIsNotCaptured("trial", torch::kCPU, {.data_parallel = true}), "the trial trains on cpu");
  EXPECT_EQ(WhyTheStepIsNotCaptured("group", torch::kCPU, {}), "the group trains on cpu");
  if (!StepGraph::Available()) GTEST_SKIP() << "no CUDA graphs here: the obstacles after the device are not reached";
  const torch::Device cuda(torch::kCUDA, 0);
  EXPECT_EQ(WhyTheStepIsNotCaptured("trial", cuda, {.data_parallel = true, .moving_average = true}),
            "data-parallel ranks exchange their gradients through the host");
  EXPECT_EQ(WhyTheStepIsNotCaptured("trial", cuda, {.moving_average = true, .profiled = true}),
            "the moving average's decay (ema_decay) changes on the host");
  EXPECT_EQ(WhyTheStepIsNotCaptured("group", cuda, {.host_dropout = true, .profiled = true}),
            "dropout draws its masks on the host");
  EXPECT_EQ(WhyTheStepIsNotCaptured("group", cuda, {.profiled = true}),
            "training.profile_steps records the eager step's operators");
  EXPECT_EQ(WhyTheStepIsNotCaptured("group", cuda, {}), "");
}

}  // namespace
}  // namespace dltune
