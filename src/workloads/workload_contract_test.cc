// The contract every built-in workload keeps, one parameterized suite: the shapes of its data, model and loss,
// initialization from the seed, evaluations that count every example once, and training that resumes exactly. A
// new workload joins by one line in Cases().
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "core/files.h"
#include "dltune/workloads/registry.h"
#include "dltune/workloads/train.h"

namespace dltune {
namespace {

struct WorkloadCase {
  std::string name;      // as registered
  nlohmann::json args;   // workload.args: a small slice of the data
  nlohmann::json model;  // hyperparameters that keep the model small
};

void PrintTo(const WorkloadCase& c, std::ostream* os) { *os << c.name; }

const std::vector<WorkloadCase>& Cases() {
  static const std::vector<WorkloadCase> cases = {
      {"fashion_mnist_mlp", {{"train_examples", 300}}, {{"hidden_sizes", {32}}}},
      {"fashion_mnist_cnn", {{"train_examples", 300}}, {{"conv_channels", {4, 8}}, {"dense_size", 16}}},
      {"synthetic", {{"examples", 400}}, {}},
  };
  return cases;
}

constexpr std::int64_t kBatch = 32;
// Not a divisor of any case's training split: the last evaluation batch is padded.
constexpr std::int64_t kEvalBatch = 64;
constexpr std::int64_t kSteps = 6;

// Keeps what the trainer reports.
struct Recorder : TrainerCallbacks {
  std::int64_t stop_after = -1;  // >= 0: stop once this many steps are done
  std::vector<StepMetrics> steps;
  std::map<std::int64_t, std::vector<EvalMetric>> evals;
  std::vector<CheckpointEvent> checkpoints;
  void OnTrainMetrics(const std::vector<StepMetrics>& s) override { steps.insert(steps.end(), s.begin(), s.end()); }
  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& m, std::int64_t, double) override {
    evals[step] = m;
  }
  void OnCheckpoint(const CheckpointEvent& e) override { checkpoints.push_back(e); }
  bool ShouldStop(std::int64_t step) override { return stop_after >= 0 && step >= stop_after; }

  // The newest checkpoint still on disk.
  std::string Latest() const {
    std::string latest;
    std::int64_t step = -1;
    for (const auto& e : checkpoints) {
      if (e.deleted || e.step <= step) continue;
      step = e.step;
      latest = e.path;
    }
    return latest;
  }
};

double Metric(const std::vector<EvalMetric>& metrics, const std::string& split, const std::string& metric) {
  for (const auto& m : metrics) {
    if (m.split == split && m.metric == metric) return m.value;
  }
  ADD_FAILURE() << "no " << split << "/" << metric;
  return NAN;
}

std::vector<torch::Tensor> Parameters(const Model& model) {
  std::vector<torch::Tensor> tensors;
  for (const auto& tensor : model.parameters()) tensors.push_back(tensor.detach().clone());
  for (const auto& tensor : model.buffers()) tensors.push_back(tensor.detach().clone());
  return tensors;
}

bool Same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!a[i].sizes().equals(b[i].sizes()) || !torch::equal(a[i], b[i])) return false;
  }
  return true;
}

class WorkloadContract : public ::testing::TestWithParam<WorkloadCase> {
 protected:
  void SetUp() override {
    workload_ = MakeWorkload(GetParam().name, GetParam().args);
    dir_ = std::filesystem::temp_directory_path() /
           ("dltune_workload_contract_" + GetParam().name + "_" + std::to_string(::getpid()));
    RemoveTree(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }

  // The case's small model, trained with dropout (so that resuming must restore the generator too).
  HyperParams Params() const {
    nlohmann::json params = GetParam().model;
    params["batch_size"] = kBatch;
    params["optimizer"] = "momentum";
    params["learning_rate"] = 0.05;
    params["dropout"] = 0.1;
    return HyperParams(params, {});
  }

  TrainerOptions Options(const std::string& checkpoint_dir) const {
    TrainerOptions options;
    options.max_train_steps = kSteps;
    options.training.eval_every_steps = kSteps;
    options.training.log_every_steps = 1;
    options.training.eval_batch_size = kEvalBatch;
    options.training.threads = 1;
    options.training.train_eval_examples = workload_->Data().train.size();  // the whole split, as it is
    options.init_seed = 3;
    options.data_seed = 4;
    options.checkpoint_dir = (dir_ / checkpoint_dir).string();
    return options;
  }

  // A fresh model from `seed`, as the trainer builds it.
  std::shared_ptr<Model> Build(std::uint64_t seed) {
    torch::manual_seed(seed);
    return workload_->BuildModel(Params());
  }

  // The model as saved in a checkpoint (step directory) by the trainer.
  std::shared_ptr<Model> Restore(const std::string& checkpoint) {
    const auto model = Build(0);
    torch::serialize::InputArchive archive;
    archive.load_from((std::filesystem::path(checkpoint) / "state.pt").string());
    torch::serialize::InputArchive model_archive;
    archive.read("model", model_archive);
    model->load(model_archive);
    return model;
  }

  std::unique_ptr<Workload> workload_;
  std::filesystem::path dir_;
};

TEST_P(WorkloadContract, DataModelAndLossHaveTheDocumentedShapes) {
  const WorkloadData& data = workload_->Data();
  const std::int64_t classes = workload_->num_classes();
  ASSERT_GE(classes, 2);
  for (const auto& [split, set] : {std::pair{"train", &data.train}, {"valid", &data.valid}, {"test", &data.test}}) {
    ASSERT_GT(set->size(), 0) << split;
    EXPECT_EQ(set->inputs.scalar_type(), torch::kFloat32) << split;
    ASSERT_GE(set->inputs.dim(), 2) << split;
    EXPECT_EQ(set->inputs.size(0), set->size()) << split;
    EXPECT_TRUE(set->inputs.sizes().slice(1).equals(data.train.inputs.sizes().slice(1))) << split;
    EXPECT_EQ(set->labels.scalar_type(), torch::kInt64) << split;
    ASSERT_EQ(set->labels.dim(), 1) << split;
    EXPECT_GE(set->labels.min().item<std::int64_t>(), 0) << split;
    EXPECT_LT(set->labels.max().item<std::int64_t>(), classes) << split;
  }
  const auto model = Build(0);
  const Dataset batch = data.train.Slice(0, 7);
  for (const bool training : {true, false}) {
    model->train(training);
    const torch::Tensor outputs = model->Forward(batch.inputs);
    ASSERT_EQ(outputs.sizes(), (std::vector<std::int64_t>{7, classes})) << "training " << training;
    const torch::Tensor losses = workload_->PerExampleLoss(outputs, batch.labels);
    ASSERT_EQ(losses.sizes(), (std::vector<std::int64_t>{7})) << "training " << training;
    EXPECT_TRUE(torch::isfinite(losses).all().item<bool>()) << "training " << training;
  }
}

TEST_P(WorkloadContract, TheSeedDecidesTheInitialParameters) {
  const auto first = Parameters(*Build(1));
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(Same(Parameters(*Build(1)), first));
  EXPECT_FALSE(Same(Parameters(*Build(2)), first));
}

// The trainer's evaluation of a split is the mean over its examples, each counted once: the padding that fills the
// last batch weighs nothing (src/train/eval_batches.h).
TEST_P(WorkloadContract, AnEvaluationCountsEveryExampleOnce) {
  const TrainerOptions options = Options("run");
  Recorder recorder;
  ASSERT_EQ(TrainWorkload(*workload_, Params(), options, recorder).outcome, TrainOutcome::kCompleted);
  const Dataset& train = workload_->Data().train;
  ASSERT_NE(train.size() % kEvalBatch, 0);
  const std::string checkpoint = recorder.Latest();
  ASSERT_FALSE(checkpoint.empty());
  const CheckpointMetrics evaluated = EvaluateCheckpoint(*workload_, Params(), options, checkpoint, "train");
  EXPECT_EQ(evaluated.step, kSteps);
  // The checkpoint's model on the whole split at once, every example weighing the same.
  const auto model = Restore(checkpoint);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor outputs = model->Forward(train.inputs);
  const double loss = workload_->PerExampleLoss(outputs, train.labels).to(torch::kDouble).mean().item<double>();
  const double accuracy = (outputs.argmax(1) == train.labels).to(torch::kDouble).mean().item<double>();
  const std::vector<EvalMetric>& during_training = recorder.evals.at(kSteps);
  for (const auto* metrics : {&evaluated.metrics, &during_training}) {
    for (const auto& m : *metrics) {
      if (m.split == "train") {
        EXPECT_EQ(m.examples, train.size()) << m.metric;
      }
    }
    EXPECT_NEAR(Metric(*metrics, "train", "loss"), loss, 1e-5 * std::max(1.0, loss));
    EXPECT_NEAR(Metric(*metrics, "train", "accuracy"), accuracy, 1.5 / static_cast<double>(train.size()));
  }
}

// Stopped after a few steps and resumed from its checkpoint, a run ends with the parameters and measurements of one
// trained straight through.
TEST_P(WorkloadContract, TrainingResumedFromACheckpointMatchesTrainingStraightThrough) {
  Recorder straight;
  ASSERT_EQ(TrainWorkload(*workload_, Params(), Options("straight"), straight).outcome, TrainOutcome::kCompleted);

  Recorder stopped;
  stopped.stop_after = kSteps / 2;
  const TrainResult first = TrainWorkload(*workload_, Params(), Options("resumed"), stopped);
  ASSERT_EQ(first.outcome, TrainOutcome::kStopped);
  ASSERT_EQ(first.steps, kSteps / 2);
  // Resumed as a new process would: a new workload object.
  workload_ = MakeWorkload(GetParam().name, GetParam().args);
  Recorder resumed;
  const TrainResult second = TrainWorkload(*workload_, Params(), Options("resumed"), resumed);
  ASSERT_EQ(second.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(second.resumed_from_step, kSteps / 2);

  ASSERT_EQ(straight.steps.size(), static_cast<std::size_t>(kSteps));
  ASSERT_EQ(resumed.steps.size(), static_cast<std::size_t>(kSteps - kSteps / 2));
  for (std::size_t i = 0; i < resumed.steps.size(); ++i) {
    const StepMetrics& expected = straight.steps[kSteps / 2 + i];
    EXPECT_EQ(resumed.steps[i].step, expected.step);
    EXPECT_EQ(resumed.steps[i].loss, expected.loss) << "step " << expected.step;
  }
  const auto& straight_eval = straight.evals.at(kSteps);
  const auto& resumed_eval = resumed.evals.at(kSteps);
  ASSERT_EQ(resumed_eval.size(), straight_eval.size());
  for (std::size_t i = 0; i < straight_eval.size(); ++i) {
    EXPECT_EQ(resumed_eval[i].value, straight_eval[i].value)
        << straight_eval[i].split << "/" << straight_eval[i].metric;
  }
  EXPECT_TRUE(Same(Parameters(*Restore(resumed.Latest())), Parameters(*Restore(straight.Latest()))));
}

INSTANTIATE_TEST_SUITE_P(Builtin, WorkloadContract, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<WorkloadCase>& test) { return test.param.name; });

TEST(WorkloadContractCases, CoverEveryBuiltInWorkload) {
  std::set<std::string> covered;
  for (const auto& c : Cases()) covered.insert(c.name);
  const auto names = WorkloadNames();
  EXPECT_EQ(covered, std::set<std::string>(names.begin(), names.end()));
}

}  // namespace
}  // namespace dltune
