// The trainer on the synthetic workload, through the library: evaluation splits and metrics, clipping, options.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/workloads/registry.h"
#include "dltune/workloads/train.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

// Keeps everything the trainer reports.
struct Recorder : TrainerCallbacks {
  std::vector<StepMetrics> steps;
  std::map<std::int64_t, std::vector<EvalMetric>> evals;
  std::map<std::int64_t, std::vector<Prediction>> predictions;
  std::vector<CheckpointEvent> checkpoints;
  void OnTrainMetrics(const std::vector<StepMetrics>& s) override { steps.insert(steps.end(), s.begin(), s.end()); }
  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& m, std::int64_t, double) override {
    evals[step] = m;
  }
  void OnPredictions(std::int64_t step, const std::vector<Prediction>& p) override { predictions[step] = p; }
  void OnCheckpoint(const CheckpointEvent& e) override { checkpoints.push_back(e); }
};

double Metric(const std::vector<EvalMetric>& metrics, const std::string& split, const std::string& metric) {
  for (const auto& m : metrics) {
    if (m.split == split && m.metric == metric) return m.value;
  }
  return -1;
}

HyperParams Params(std::map<std::string, Value> params) { return HyperParams(nlohmann::json::object(), params); }

TEST(Trainer, ReportsEveryStepAndEvaluatesTheDocumentedSplits) {
  TrainerOptions options;
  options.max_train_steps = 90;
  options.training.eval_every_steps = 30;
  options.training.log_every_steps = 10;
  options.training.valid_sample_examples = 100;
  options.training.test_at_end = true;
  Recorder recorder;
  const TrainResult result =
      Train("synthetic", {{"examples", 1003}},
            Params({{"optimizer", Value("adam")}, {"learning_rate", Value(0.01)}, {"grad_clip_norm", Value(0.5)}}),
            options, recorder);
  EXPECT_EQ(result.outcome, TrainOutcome::kCompleted);
  ASSERT_EQ(recorder.steps.size(), 90u);
  for (std::size_t i = 0; i < recorder.steps.size(); ++i) {
    EXPECT_EQ(recorder.steps[i].step, static_cast<std::int64_t>(i) + 1);
    ASSERT_TRUE(recorder.steps[i].grad_norm && recorder.steps[i].clipped);
    EXPECT_EQ(*recorder.steps[i].clipped, *recorder.steps[i].grad_norm > 0.5);
  }
  EXPECT_EQ(recorder.evals.size(), 3u);
  // Periodic evals use the fixed valid sample; the last one also the whole valid split and the test split.
  const auto& first = recorder.evals.at(30);
  EXPECT_GE(Metric(first, "valid_sample", "error_rate"), 0);
  EXPECT_EQ(Metric(first, "valid", "error_rate"), -1);
  const auto& last = recorder.evals.at(90);
  EXPECT_GE(Metric(last, "valid", "error_rate"), 0);
  EXPECT_GE(Metric(last, "test", "error_rate"), 0);
  // Exact per-example averages over splits whose size is not a multiple of the eval batch (1003 examples: valid 200,
  // test 100, train 703): accuracy equals the per-class correct counts over the examples.
  for (const std::string split : {"train", "valid", "test"}) {
    double correct = 0;
    std::int64_t examples = 0;
    for (const auto& m : last) {
      if (m.split != split) continue;
      if (m.metric.rfind("correct_class_", 0) == 0) correct += m.value;
      examples = m.examples;
    }
    EXPECT_NEAR(correct / static_cast<double>(examples), Metric(last, split, "accuracy"), 1e-12) << split;
    EXPECT_NEAR(Metric(last, split, "error_rate"), 1 - Metric(last, split, "accuracy"), 1e-12);
  }
  EXPECT_EQ(recorder.predictions.at(90).size(), 32u);
  EXPECT_TRUE(result.best_step.has_value());
}

TEST(Trainer, RefusesBadOptionsAndParams) {
  Recorder recorder;
  TrainerOptions options;
  options.max_train_steps = 10;
  options.training.eval_batch_size = 16;
  try {
    Train("synthetic", {}, Params({{"batch_size", Value(std::int64_t{32})}}), options, recorder);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("eval_batch_size (16) must be at least the training batch size (32)"));
  }
  options.training.eval_batch_size = 0;
  EXPECT_THROW(Train("synthetic", {}, Params({{"optimizer", Value("adamw")}}), options, recorder), Error);
  EXPECT_THROW(Train("synthetic", {}, Params({{"schedule", Value("step")}}), options, recorder), Error);
  EXPECT_THROW(Train("nope", {}, Params({}), options, recorder), Error);
  options.max_train_steps = 0;
  EXPECT_THROW(Train("synthetic", {}, Params({}), options, recorder), Error);
}

// Label smoothing changes the training loss only: at a learning rate too small to move a weight, each step's loss is
// (1 - e) cross entropy + e (mean over classes of -log p), linear in e, while every evaluation reports the plain loss.
TEST(Trainer, LabelSmoothingSmoothsTheTrainingLossAndNotTheEvaluations) {
  TrainerOptions options;
  options.max_train_steps = 12;
  options.training.eval_every_steps = 12;
  options.training.log_every_steps = 1;
  const auto run = [&](double smoothing) {
    Recorder recorder;
    Train("synthetic", {},
          Params({{"optimizer", Value("sgd")}, {"learning_rate", Value(1e-30)}, {"label_smoothing", Value(smoothing)}}),
          options, recorder);
    return recorder;
  };
  const Recorder plain = run(0.0), quarter = run(0.25), half = run(0.5);
  ASSERT_EQ(plain.steps.size(), 12u);
  for (std::size_t i = 0; i < plain.steps.size(); ++i) {
    // float32 means over a batch of 128: each loss within 128 roundings of 2^-24 relative, three losses compared.
    const double tolerance = 3 * 128 * std::ldexp(1.0, -24) * std::fabs(plain.steps[i].loss);
    EXPECT_NEAR(quarter.steps[i].loss, (plain.steps[i].loss + half.steps[i].loss) / 2, tolerance) << i;
    EXPECT_GT(std::fabs(half.steps[i].loss - plain.steps[i].loss), 10 * tolerance) << i;
  }
  EXPECT_EQ(Metric(half.evals.at(12), "valid", "loss"), Metric(plain.evals.at(12), "valid", "loss"));
  Recorder refused;
  EXPECT_THROW(Train("synthetic", {}, Params({{"label_smoothing", Value(1.0)}}), options, refused), Error);
}

// Polyak averaging: training is unchanged (the same steps, bit for bit), evaluations are of the moving average, and
// a checkpoint evaluated later gives the numbers its evaluation during training gave.
TEST(Trainer, AMovingAverageOfTheWeightsIsEvaluatedAndCheckpointedAsItsOwn) {
  const auto dir = std::filesystem::temp_directory_path() / ("dltune_ema_" + std::to_string(::getpid()));
  RemoveTree(dir);
  TrainerOptions options;
  options.max_train_steps = 40;
  options.training.eval_every_steps = 20;
  options.training.log_every_steps = 1;
  const HyperParams plain_params =
      Params({{"optimizer", Value("momentum")}, {"learning_rate", Value(0.1)}, {"ema_decay", Value(0.0)}});
  const HyperParams ema_params =
      Params({{"optimizer", Value("momentum")}, {"learning_rate", Value(0.1)}, {"ema_decay", Value(0.9)}});
  Recorder plain, averaged;
  Train("synthetic", {}, plain_params, options, plain);
  options.checkpoint_dir = dir.string();
  Train("synthetic", {}, ema_params, options, averaged);
  ASSERT_EQ(averaged.steps.size(), plain.steps.size());
  for (std::size_t i = 0; i < plain.steps.size(); ++i) EXPECT_EQ(averaged.steps[i].loss, plain.steps[i].loss) << i;
  const double plain_loss = Metric(plain.evals.at(40), "valid", "loss");
  const double averaged_loss = Metric(averaged.evals.at(40), "valid", "loss");
  EXPECT_NE(averaged_loss, plain_loss);
  ASSERT_FALSE(averaged.checkpoints.empty());
  const std::string last = averaged.checkpoints.back().path;
  const CheckpointMetrics again = EvaluateWorkloadCheckpoint("synthetic", {}, ema_params, options, last, "valid");
  EXPECT_EQ(again.step, 40);
  EXPECT_EQ(Metric(again.metrics, "valid", "loss"), averaged_loss);
  RemoveTree(dir);
}

// The playbook's "number of layers" as a hyperparameter: num_layers hidden layers of `width` units.
TEST(Workloads, TheMlpsDepthIsAHyperparameter) {
  const auto workload = MakeWorkload("fashion_mnist_mlp");
  const auto count = [&](const std::map<std::string, Value>& params) {
    std::int64_t weights = 0;
    for (const auto& tensor : workload->BuildModel(Params(params))->parameters()) weights += tensor.numel();
    return weights;
  };
  const std::int64_t in = 28 * 28, out = 10;
  EXPECT_EQ(count({}), in * 256 + 256 + 256 * out + out);
  EXPECT_EQ(count({{"num_layers", Value(std::int64_t{3})}, {"width", Value(std::int64_t{64})}}),
            in * 64 + 64 + 2 * (64 * 64 + 64) + 64 * out + out);
  EXPECT_EQ(count({{"num_layers", Value(std::int64_t{2})}}), in * 256 + 256 + 256 * 256 + 256 + 256 * out + out);
  try {
    count({{"num_layers", Value(std::int64_t{2})}, {"hidden_sizes", Value(std::int64_t{64})}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("use one or the other"));
  }
  // What `dltune space check` runs: a param nobody reads is named before anything trains.
  try {
    CheckWorkloadParams("fashion_mnist_mlp", {}, Params({{"num_layer", Value(std::int64_t{2})}}), 100);
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("uses no hyperparameter named 'num_layer'"));
    EXPECT_THAT(e.what(), HasSubstr("did you mean 'num_layers'?"));
  }
  EXPECT_NO_THROW(CheckWorkloadParams("fashion_mnist_cnn", {}, Params({{"dense_size", Value(std::int64_t{32})}}), 100));
}

// A small Fashion-MNIST project: the first N training images; validation and test stay whole.
TEST(Workloads, FashionMnistTrainsOnItsFirstTrainingImagesWhenAsked) {
  const auto whole = MakeWorkload("fashion_mnist_mlp");
  const auto small = MakeWorkload("fashion_mnist_mlp", {{"train_examples", 300}});
  const WorkloadData& all = whole->Data();
  const WorkloadData& first = small->Data();
  ASSERT_EQ(first.train.size(), 300);
  EXPECT_TRUE(first.train.inputs.equal(all.train.inputs.slice(0, 0, 300)));
  EXPECT_EQ(first.valid.size(), all.valid.size());
  EXPECT_EQ(first.test.size(), all.test.size());
  EXPECT_THROW(MakeWorkload("fashion_mnist_mlp", {{"train_examples", -1}}), Error);
}

TEST(Registry, KnowsTheBuiltInsAndAcceptsAUsersOwn) {
  const auto names = WorkloadNames();
  EXPECT_THAT(names, ::testing::IsSupersetOf({"fashion_mnist_mlp", "fashion_mnist_cnn", "synthetic"}));
  RegisterWorkload("synthetic_alias", [](const nlohmann::json& args) { return MakeWorkload("synthetic", args); });
  EXPECT_EQ(MakeWorkload("synthetic_alias")->name(), "synthetic");
  try {
    MakeWorkload("fashion_mnist_mpl");
    FAIL();
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("did you mean 'fashion_mnist_mlp'?"));
  }
}

}  // namespace
}  // namespace dltune
