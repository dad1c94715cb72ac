// The trainer on CUDA (label gpu): the same training as on the CPU within a tolerance derived from float precision,
// bit-identical resumption on the GPU, a GPU checkpoint resumed on the CPU; a fused group on CUDA against the same
// group on the CPU, and its members' checkpoints resumed alone on the CPU. Each test that needs a CUDA device skips
// without one, saying why; the device-independent parts (training.device's resolution, the optimizer's tensor-op
// rules against the fused CPU loop) run everywhere.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <torch/version.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "device.h"
#include "dltune/core/error.h"
#include "dltune/train/trainer.h"
#include "dltune/train/workload.h"
#include "fused_training.h"
#include "optimizer.h"
#include "synthetic_data.h"
#include "torch_build.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// float32's machine epsilon: the relative rounding of one operation.
constexpr double kFloatEpsilon = 1.1920928955078125e-07;
// How many roundings one step adds to a weight or a loss, in the worst order a device may sum in: a product of the
// 16-64-4 MLP sums 64 terms and a batch's mean 64, so a pairwise (GPU) and a blocked (CPU) order differ by up to
// about log2(64 * 64) = 12 roundings per layer and pass; with forward, backward and update, 2^7 bounds them.
constexpr double kRoundingsPerStep = 128;

// The relative tolerance between CPU and CUDA after `steps` steps: the roundings of every step, accumulated. The
// MLP with SGD momentum on a well-conditioned problem neither damps nor amplifies them much over a few hundred
// steps, so they add up about linearly.
double DeviceTolerance(std::int64_t steps) { return static_cast<double>(steps) * kRoundingsPerStep * kFloatEpsilon; }

bool HasCuda() { return torch::cuda::is_available(); }

#define SKIP_WITHOUT_CUDA()                                                                 \
  if (!HasCuda()) {                                                                         \
    GTEST_SKIP() << "no CUDA device: "                                                      \
                 << (torch::hasCUDA() ? "this LibTorch has CUDA, but no GPU is visible"     \
                                      : "this LibTorch was built without CUDA (CPU-only)"); \
  }

// A 16-64-4 MLP, with optional dropout, on the synthetic problem (2000 training examples).
class SyntheticMlp final : public Workload {
 public:
  std::string name() const override { return "synthetic_mlp"; }
  std::int64_t num_classes() const override { return 4; }
  const WorkloadData& Data() override {
    if (data_.train.size() == 0) {
      const SyntheticSplits splits = MakeSyntheticSplits(2000, 400, 400, 16, 4, 7);
      data_ = {splits.train, splits.valid, splits.test};
    }
    return data_;
  }
  std::shared_ptr<Model> BuildModel(const HyperParams& params) override {
    return std::make_shared<Mlp>(params.Real("dropout", 0.0));
  }
  std::optional<ArrayNetwork> Fusion() const override { return ArrayNetwork{.kind = ArrayNetwork::Kind::kMlp}; }

 private:
  struct Mlp final : Model {
    explicit Mlp(double dropout_rate)
        : hidden(register_module("hidden", torch::nn::Linear(16, 64))),
          output(register_module("output", torch::nn::Linear(64, 4))),
          dropout(dropout_rate) {}
    torch::Tensor Forward(const torch::Tensor& inputs) override {
      return output(torch::dropout(torch::relu(hidden(inputs)), dropout, is_training()));
    }
    torch::nn::Linear hidden, output;
    double dropout;
  };
  WorkloadData data_;
};

// Keeps every step's loss and every evaluation; asks to stop after `stop_at` steps (0: never).
struct Recorder : TrainerCallbacks {
  std::int64_t stop_at = 0;
  std::map<std::int64_t, double> losses;
  std::map<std::int64_t, double> grad_norms;
  std::map<std::int64_t, std::vector<EvalMetric>> evals;
  void OnTrainMetrics(const std::vector<StepMetrics>& steps) override {
    for (const StepMetrics& s : steps) {
      losses[s.step] = s.loss;
      grad_norms[s.step] = s.grad_norm.value_or(-1);
    }
  }
  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& m, std::int64_t, double) override {
    evals[step] = m;
  }
  bool ShouldStop(std::int64_t step) override { return stop_at > 0 && step >= stop_at; }
};

double Metric(const std::vector<EvalMetric>& metrics, const std::string& split, const std::string& name) {
  for (const EvalMetric& m : metrics) {
    if (m.split == split && m.metric == name) return m.value;
  }
  return std::nan("");
}

class CudaTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dltune_cuda_training_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RemoveTree(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }

  // Trains `steps` steps on `device`, checkpointing into `run` (a directory under dir_; "" none), stopping after
  // `stop_at` steps (0: never).
  TrainResult Train(const std::string& device, std::int64_t steps, const std::string& run, Recorder& recorder,
                    std::map<std::string, Value> extra = {}, const std::string& cuda_graph = "false") {
    std::map<std::string, Value> params = {
        {"optimizer", Value("momentum")}, {"learning_rate", Value(0.05)}, {"batch_size", Value(std::int64_t{64})}};
    params.insert(extra.begin(), extra.end());
    TrainerOptions options;
    options.max_train_steps = steps;
    options.training.eval_every_steps = 50;
    options.training.log_every_steps = 10;
    options.training.threads = 1;
    options.init_seed = 11;
    options.data_seed = 12;
    options.device = device;
    options.training.cuda_graph = cuda_graph;
    if (!run.empty()) options.checkpoint_dir = (dir_ / run).string();
    SyntheticMlp workload;
    return TrainWorkload(workload, HyperParams(nlohmann::json::object(), params), options, recorder);
  }

  std::filesystem::path dir_;
};

TEST(TrainingDevice, CpuIsTheCpuAndAutoFollowsWhatTheProcessSees) {
  TrainingSettings settings;
  settings.device = "cpu";
  EXPECT_EQ(ResolveTrainingDevice(settings), "cpu");
  settings.device = "auto";
  EXPECT_EQ(ResolveTrainingDevice(settings), HasCuda() ? "cuda" : "cpu");
  settings.processes = 2;  // data-parallel ranks train on the CPU
  EXPECT_EQ(ResolveTrainingDevice(settings), "cpu");
}

// A data-parallel rank with device cuda trains on the GPU of its local rank, round-robin where there are fewer.
TEST(TrainingDevice, ARankTakesTheGpuOfItsLocalRank) {
  EXPECT_EQ(CudaDeviceOfRank(0, 2), "cuda:0");
  EXPECT_EQ(CudaDeviceOfRank(1, 2), "cuda:1");
  EXPECT_EQ(CudaDeviceOfRank(1, 1), "cuda:0");
  EXPECT_EQ(CudaDeviceOfRank(5, 4), "cuda:1");
}

TEST(TrainingDevice, CudaWithoutADeviceIsAnErrorNamingTheSetting) {
  TrainingSettings settings;
  settings.device = "cuda";
  if (HasCuda()) {
    EXPECT_EQ(ResolveTrainingDevice(settings), "cuda");
    return;
  }
  try {
    ResolveTrainingDevice(settings);
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("training.device is cuda, and this process sees no CUDA device: "));
  }
}

// The runner asks the build whether LibTorch has CUDA (it must not start CUDA itself); the process that trains asks
// LibTorch. They agree.
TEST(TrainingDevice, TheBuildKnowsWhetherLibTorchHasCuda) {
  if (HasCuda()) {
    EXPECT_TRUE(LibTorchHasCuda()) << "CUDA runs here, and the build says its LibTorch has none";
  }
  if (!LibTorchHasCuda()) {
    EXPECT_FALSE(torch::hasCUDA());
  }
}

TEST(TrainingDevice, IsARowOfTheSettingsTable) {
  TrainingSettings settings;
  EXPECT_EQ(settings.device, "auto");
  settings.device = "gpu";
  EXPECT_THROW(settings.Validate(100), Error);
  settings.device = "cuda";
  settings.processes = 2;  // data-parallel ranks on GPUs
  settings.Validate(100);
  settings.processes = 1;
  settings.Validate(100);
  EXPECT_EQ(TrainingSettingFlags(settings), "--device cuda");
  EXPECT_EQ(TrainingSettingsFromJson(TrainingSettingsToJson(settings)).device, "cuda");
}

// The device path's rules (LibTorch operations reading a coefficient table) against the fused CPU loop, run here on
// CPU tensors: equal up to the rounding of a fused multiply-add per operation, over 20 updates of every rule with and
// without weight decay, the first at a learning rate of 0 (a linear warm-up's).
TEST(TensorOpsUpdate, FollowsTheFusedRulesOfEveryOptimizer) {
  for (const std::string& kind : OptimizerKinds()) {
    for (const bool decoupled : {false, true}) {
      SCOPED_TRACE(kind + (decoupled ? " decoupled" : " coupled"));
      OptimizerOptions options;
      options.kind = kind;
      options.weight_decay = 0.01;
      options.decoupled_weight_decay = decoupled;
      torch::manual_seed(3);
      const torch::Tensor start = torch::randn({1000});
      Optimizer fused({start.clone()}, options);
      Optimizer tensor_ops({start.clone()}, options);
      for (int step = 1; step <= 20; ++step) {
        const double learning_rate = 0.01 * (step - 1) / 20;
        const torch::Tensor grad = torch::randn({1000});
        fused.params()[0].mutable_grad() = grad.clone();
        tensor_ops.params()[0].mutable_grad() = grad.clone();
        const double norm = fused.Step(learning_rate);
        // A capture's table counts nothing; the step's own counts the update.
        tensor_ops.CoefficientTable(learning_rate, /*advance=*/false);
        EXPECT_EQ(tensor_ops.steps(), step - 1);
        const double tensor_norm = tensor_ops.ApplyTable(tensor_ops.CoefficientTable(learning_rate)).item<double>();
        EXPECT_EQ(tensor_ops.steps(), step);
        EXPECT_NEAR(norm, grad.to(torch::kDouble).norm().item<double>(), 1e-9 * norm);
        EXPECT_NEAR(tensor_norm, norm, 1e-12 * norm);
      }
      EXPECT_TRUE(torch::allclose(fused.params()[0], tensor_ops.params()[0], 1e-5, 1e-6))
          << "largest difference " << (fused.params()[0] - tensor_ops.params()[0]).abs().max().item<double>();
      // The states too: a checkpoint of either resumes as the other.
      for (std::size_t b = 0; b < fused.Buffers(0).size(); ++b) {
        EXPECT_TRUE(torch::allclose(fused.Buffers(0)[b], tensor_ops.Buffers(0)[b], 1e-5, 1e-6)) << "buffer " << b;
      }
    }
  }
}

// Each optimizer on CUDA takes the CPU's steps, within the float rounding of its 20 updates, and its deferred norm
// stays on the device.
TEST(CudaOptimizer, StepsAsOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  for (const std::string& kind : OptimizerKinds()) {
    SCOPED_TRACE(kind);
    OptimizerOptions options;
    options.kind = kind;
    options.weight_decay = 0.01;
    torch::manual_seed(5);
    const torch::Tensor start = torch::randn({4096});
    Optimizer cpu({start.clone()}, options);
    Optimizer cuda({start.to(torch::kCUDA)}, options);
    for (int step = 1; step <= 20; ++step) {
      const torch::Tensor grad = torch::randn({4096});
      cpu.params()[0].mutable_grad() = grad.clone();
      cuda.params()[0].mutable_grad() = grad.to(torch::kCUDA);
      const double norm = cpu.Step(0.01);
      const torch::Tensor deferred = cuda.StepDeferred(0.01);
      EXPECT_TRUE(deferred.device().is_cuda());
      EXPECT_NEAR(deferred.item<double>(), norm, 1e-9 * norm);
    }
    const torch::Tensor on_gpu = cuda.params()[0].to(torch::kCPU);
    EXPECT_TRUE(torch::allclose(cpu.params()[0], on_gpu, DeviceTolerance(20), 1e-6))
        << "largest difference " << (cpu.params()[0] - on_gpu).abs().max().item<double>();
  }
}

TEST_F(CudaTraining, MatchesTheCpuWithinFloatPrecision) {
  SKIP_WITHOUT_CUDA();
  constexpr std::int64_t kSteps = 300;
  Recorder cpu, cuda;
  ASSERT_EQ(Train("cpu", kSteps, "", cpu).outcome, TrainOutcome::kCompleted);
  ASSERT_EQ(Train("cuda", kSteps, "", cuda).outcome, TrainOutcome::kCompleted);
  ASSERT_EQ(cuda.losses.size(), static_cast<std::size_t>(kSteps));
  for (const auto& [step, loss] : cpu.losses) {
    EXPECT_NEAR(cuda.losses.at(step), loss, DeviceTolerance(step) * std::max(1.0, std::abs(loss))) << "step " << step;
    EXPECT_NEAR(cuda.grad_norms.at(step), cpu.grad_norms.at(step),
                DeviceTolerance(step) * std::max(1.0, cpu.grad_norms.at(step)))
        << "step " << step;
  }
  for (const auto& [step, metrics] : cpu.evals) {
    const double loss = Metric(metrics, "valid", "loss");
    EXPECT_NEAR(Metric(cuda.evals.at(step), "valid", "loss"), loss, DeviceTolerance(step) * std::max(1.0, loss))
        << "step " << step;
  }
}

// Stopped after 90 steps and resumed, with dropout drawing from the GPU's generator, a run on CUDA reports exactly
// the losses and evaluations of the run that was never stopped.
TEST_F(CudaTraining, StoppedAndResumedIsBitIdentical) {
  SKIP_WITHOUT_CUDA();
  const std::map<std::string, Value> dropout = {{"dropout", Value(0.2)}};
  Recorder whole;
  ASSERT_EQ(Train("cuda", 200, "whole", whole, dropout).outcome, TrainOutcome::kCompleted);
  Recorder first;
  first.stop_at = 90;
  ASSERT_EQ(Train("cuda", 200, "parts", first, dropout).outcome, TrainOutcome::kStopped);
  Recorder second;
  const TrainResult resumed = Train("cuda", 200, "parts", second, dropout);
  ASSERT_EQ(resumed.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(resumed.resumed_from_step, 90);
  ASSERT_EQ(second.losses.size(), 110u);
  for (const auto& [step, loss] : second.losses) EXPECT_EQ(loss, whole.losses.at(step)) << "step " << step;
  for (const auto& [step, metrics] : second.evals) {
    for (const EvalMetric& m : metrics) {
      EXPECT_EQ(m.value, Metric(whole.evals.at(step), m.split, m.metric)) << m.split << "/" << m.metric;
    }
  }
}

// Every step's loss and gradient norm and every evaluation of `b` are those of `a`, bit for bit.
void ExpectSameSeries(const Recorder& a, const Recorder& b) {
  ASSERT_EQ(a.losses.size(), b.losses.size());
  for (const auto& [step, loss] : b.losses) {
    EXPECT_EQ(loss, a.losses.at(step)) << "step " << step;
    EXPECT_EQ(b.grad_norms.at(step), a.grad_norms.at(step)) << "step " << step;
  }
  ASSERT_EQ(a.evals.size(), b.evals.size());
  for (const auto& [step, metrics] : b.evals) {
    for (const EvalMetric& m : metrics) {
      EXPECT_EQ(m.value, Metric(a.evals.at(step), m.split, m.metric))
          << "step " << step << " " << m.split << "/" << m.metric;
    }
  }
}

// training.cuda_graph on a lone trial: the step captured once and replayed launches the eager step's kernels with
// the same coefficients, so the series are the same bit for bit, with Adam, gradient clipping and label smoothing
// (every output the step copies out); and a graphed trial stopped and resumed (captured again) continues exactly.
TEST_F(CudaTraining, AGraphedTrialTrainsBitForBitAsItsEagerSteps) {
  SKIP_WITHOUT_CUDA();
  const std::map<std::string, Value> extra = {{"optimizer", Value("adam")},
                                              {"learning_rate", Value(0.003)},
                                              {"grad_clip_norm", Value(0.5)},
                                              {"label_smoothing", Value(0.1)}};
  Recorder eager, graphed;
  ASSERT_EQ(Train("cuda", 200, "", eager, extra).outcome, TrainOutcome::kCompleted);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(Train("cuda", 200, "", graphed, extra, /*cuda_graph=*/"true").outcome, TrainOutcome::kCompleted);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), Not(HasSubstr("trains eagerly")));
  ExpectSameSeries(eager, graphed);

  Recorder first, second;
  first.stop_at = 90;
  ASSERT_EQ(Train("cuda", 200, "parts", first, extra, "true").outcome, TrainOutcome::kStopped);
  const TrainResult resumed = Train("cuda", 200, "parts", second, extra, "true");
  ASSERT_EQ(resumed.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(resumed.resumed_from_step, 90);
  for (const auto& [step, loss] : second.losses) EXPECT_EQ(loss, eager.losses.at(step)) << "step " << step;
}

// training.cuda_graph: auto (the default) times the step launched eagerly against its replay and keeps the faster;
// either way the trial trains bit for bit as eagerly, and its stderr says what was measured and chosen.
TEST_F(CudaTraining, AnAutoGraphTimesTheStepAndTrainsBitForBitAsEager) {
  SKIP_WITHOUT_CUDA();
  const std::map<std::string, Value> extra = {{"optimizer", Value("adam")}, {"learning_rate", Value(0.003)}};
  Recorder eager, automatic;
  ASSERT_EQ(Train("cuda", 200, "", eager, extra).outcome, TrainOutcome::kCompleted);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(Train("cuda", 200, "", automatic, extra, "auto").outcome, TrainOutcome::kCompleted);
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, HasSubstr("training.cuda_graph: the trial "));
  EXPECT_THAT(said, HasSubstr("auto: a replay took "));
  EXPECT_THAT(said, HasSubstr("ms a step, the step launched eagerly "));
  EXPECT_THAT(said, HasSubstr("(timed and captured in "));
  std::printf("%s", said.c_str());  // the GPU's figures, in the test's log
  ExpectSameSeries(eager, automatic);
}

// A step that draws random numbers (dropout) is not captured: the trial trains eagerly, says why, and its series
// is the eager one's.
TEST_F(CudaTraining, AGraphedTrialWithDropoutTrainsEagerlyAndSaysWhy) {
  SKIP_WITHOUT_CUDA();
  const std::map<std::string, Value> dropout = {{"dropout", Value(0.2)}};
  Recorder eager, asked;
  ASSERT_EQ(Train("cuda", 60, "", eager, dropout).outcome, TrainOutcome::kCompleted);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(Train("cuda", 60, "", asked, dropout, /*cuda_graph=*/"true").outcome, TrainOutcome::kCompleted);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("training.cuda_graph: the trial trains eagerly: the step draws random numbers (dropout)"));
  ExpectSameSeries(eager, asked);
}

// Where no CUDA graph can be captured (the CPU), a trial asking for one trains as without it and says why.
TEST_F(CudaTraining, CudaGraphOnTheCpuTrainsEagerlyAndSaysWhy) {
  Recorder eager, asked;
  ASSERT_EQ(Train("cpu", 60, "", eager).outcome, TrainOutcome::kCompleted);
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(Train("cpu", 60, "", asked, {}, /*cuda_graph=*/"true").outcome, TrainOutcome::kCompleted);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("training.cuda_graph: the trial trains eagerly: the trial trains on cpu"));
  ExpectSameSeries(eager, asked);

  // auto, the default, says nothing where there is nothing to choose.
  Recorder automatic;
  ::testing::internal::CaptureStderr();
  ASSERT_EQ(Train("cpu", 60, "", automatic, {}, "auto").outcome, TrainOutcome::kCompleted);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), Not(HasSubstr("cuda_graph")));
  ExpectSameSeries(eager, automatic);
}

// A checkpoint written on the GPU resumes on the CPU (its tensors are read onto the CPU), and the rest of the run
// follows the GPU's own within float precision.
TEST_F(CudaTraining, AGpuCheckpointResumesOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  Recorder whole;
  ASSERT_EQ(Train("cuda", 200, "", whole).outcome, TrainOutcome::kCompleted);
  Recorder first;
  first.stop_at = 100;
  ASSERT_EQ(Train("cuda", 200, "run", first).outcome, TrainOutcome::kStopped);
  Recorder second;
  const TrainResult resumed = Train("cpu", 200, "run", second);
  ASSERT_EQ(resumed.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(resumed.resumed_from_step, 100);
  ASSERT_EQ(second.losses.size(), 100u);
  for (const auto& [step, loss] : second.losses) {
    EXPECT_NEAR(loss, whole.losses.at(step), DeviceTolerance(step) * std::max(1.0, std::abs(loss))) << "step " << step;
  }
}

// Keeps each fused member's losses by step, and its evaluations' losses by step and split.
struct FusedRecorder : MemberCallbacks {
  std::map<std::size_t, std::map<std::int64_t, double>> losses;
  std::map<std::size_t, std::map<std::pair<std::int64_t, std::string>, double>> evaluation_losses;
  void OnTrainMetrics(std::size_t member, const std::vector<StepMetrics>& steps) override {
    for (const StepMetrics& s : steps) losses[member][s.step] = s.loss;
  }
  void OnEvaluation(std::size_t member, std::int64_t step, const std::vector<EvalMetric>& metrics, std::int64_t,
                    double) override {
    for (const EvalMetric& m : metrics) {
      if (m.metric == "loss") evaluation_losses[member][{step, m.split}] = m.value;
    }
  }
};

// Three members of the MLP, each its own learning rate and seeds, trained as one group on `device` for `steps` steps
// (stopping after `stop_after`; 0: never), each checkpointing under dir / m<i> when `dir` is given. Member 0 trains
// with Nesterov momentum, the others with Adam (the quickstart's question in one group: two runs of kinds).
std::vector<FusedMemberResult> TrainGroup(const std::string& device, std::int64_t steps, std::int64_t stop_after,
                                          const std::filesystem::path& dir, FusedRecorder& recorder,
                                          const std::string& cuda_graph = "false",
                                          const std::string& profile_steps = "") {
  std::vector<FusedMember> members;
  for (int m = 0; m < 3; ++m) {
    const std::map<std::string, Value> params = {{"optimizer", Value(m == 0 ? "nesterov" : "adam")},
                                                 {"learning_rate", Value(m == 0 ? 0.05 : 0.002 * (m + 1))},
                                                 {"batch_size", Value(std::int64_t{64})}};
    members.push_back({.params = HyperParams(nlohmann::json::object(), params),
                       .init_seed = static_cast<std::uint64_t>(11 + m),
                       .data_seed = static_cast<std::uint64_t>(12 + m),
                       .checkpoint_dir = dir.empty() ? "" : (dir / fmt::format("m{}", m)).string()});
  }
  FusedOptions options;
  options.max_train_steps = steps;
  options.stop_after_step = stop_after;
  options.training.eval_every_steps = 50;
  // Each member's own sample of the training split (its examples interleaved with the others'); valid is shared.
  options.training.train_eval_examples = 500;
  options.training.threads = 1;
  options.objective = {"valid", "error_rate", Direction::kMinimize};
  options.device = device;
  options.training.cuda_graph = cuda_graph;
  options.training.profile_steps = profile_steps;
  options.callbacks = &recorder;
  SyntheticMlp workload;
  return TrainFused(workload, members, options);
}

// A fused group on CUDA (the array model's batched products, the array optimizer's tensor form) follows the same
// group on the CPU within float precision, each member.
// Each of TrainGroup's three members in `results` (recorded in `other`) completed its 200 steps, with the losses of
// `reference` within DeviceTolerance.
void ExpectMembersCompletedNear(const FusedRecorder& reference, const FusedRecorder& other,
                                const std::vector<FusedMemberResult>& results) {
  for (std::size_t m = 0; m < 3; ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    EXPECT_EQ(results[m].result.outcome, TrainOutcome::kCompleted);
    ASSERT_EQ(other.losses.at(m).size(), 200U);
    for (const auto& [step, loss] : reference.losses.at(m)) {
      EXPECT_NEAR(other.losses.at(m).at(step), loss, DeviceTolerance(step) * std::max(1.0, std::abs(loss)))
          << "step " << step;
    }
  }
}

TEST_F(CudaTraining, AFusedGroupMatchesTheCpuGroupWithinFloatPrecision) {
  SKIP_WITHOUT_CUDA();
  FusedRecorder cpu, cuda;
  const auto on_cpu = TrainGroup("cpu", 200, 0, "", cpu);
  const auto on_cuda = TrainGroup("cuda", 200, 0, "", cuda);
  ExpectMembersCompletedNear(cpu, cuda, on_cuda);
  for (std::size_t m = 0; m < 3; ++m) {
    ASSERT_TRUE(on_cpu[m].result.final_value && on_cuda[m].result.final_value);
    EXPECT_NEAR(*on_cuda[m].result.final_value, *on_cpu[m].result.final_value, 0.02);
    // Every evaluation's loss, of each member's own training sample and of the shared validation split (on CUDA in
    // batches of 16 training batches, on the CPU of 2).
    ASSERT_EQ(cuda.evaluation_losses.at(m).size(), cpu.evaluation_losses.at(m).size());
    EXPECT_EQ(cpu.evaluation_losses.at(m).size(), 8U);  // 4 evaluations of train and valid
    for (const auto& [at, loss] : cpu.evaluation_losses.at(m)) {
      EXPECT_NEAR(cuda.evaluation_losses.at(m).at(at), loss, DeviceTolerance(at.first) * std::max(1.0, loss))
          << at.second << " at step " << at.first;
    }
  }
}

// A member of a group stopped on CUDA resumes alone on the CPU from its checkpoint, and follows the group that never
// stopped within float precision.
TEST_F(CudaTraining, AFusedMembersGpuCheckpointResumesAloneOnTheCpu) {
  SKIP_WITHOUT_CUDA();
  FusedRecorder whole, stopped;
  TrainGroup("cuda", 200, 0, "", whole);
  const auto parts = TrainGroup("cuda", 200, 100, dir_, stopped);
  ASSERT_EQ(parts[1].result.outcome, TrainOutcome::kStopped);
  Recorder second;
  TrainerOptions options;
  options.max_train_steps = 200;
  options.training.eval_every_steps = 50;
  options.training.threads = 1;
  options.init_seed = 12;
  options.data_seed = 13;
  options.checkpoint_dir = (dir_ / "m1").string();
  SyntheticMlp workload;
  const std::map<std::string, Value> params = {
      {"optimizer", Value("adam")}, {"learning_rate", Value(0.004)}, {"batch_size", Value(std::int64_t{64})}};
  const TrainResult resumed = TrainWorkload(workload, HyperParams(nlohmann::json::object(), params), options, second);
  ASSERT_EQ(resumed.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(resumed.resumed_from_step, 100);
  ASSERT_EQ(second.losses.size(), 100U);
  for (const auto& [step, loss] : second.losses) {
    EXPECT_NEAR(loss, whole.losses[1].at(step), DeviceTolerance(step) * std::max(1.0, std::abs(loss)))
        << "step " << step;
  }
}

// training.cuda_graph: the group's step captured once and replayed runs the eager step's kernels: the same series.
TEST_F(CudaTraining, AFusedGroupsGraphedStepsAgreeWithItsEagerSteps) {
  SKIP_WITHOUT_CUDA();
  FusedRecorder eager, graphed;
  TrainGroup("cuda", 200, 0, "", eager);
  ::testing::internal::CaptureStderr();
  const auto results = TrainGroup("cuda", 200, 0, "", graphed, /*cuda_graph=*/"true");
  const std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(said, ::testing::Not(HasSubstr("trains eagerly"))) << said;
  ExpectMembersCompletedNear(eager, graphed, results);

  // auto times the group's step eagerly against its replay and keeps the faster: the same series either way.
  FusedRecorder automatic;
  ::testing::internal::CaptureStderr();
  const auto automatic_results = TrainGroup("cuda", 200, 0, "", automatic, "auto");
  const std::string timed = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(timed, HasSubstr("auto: a replay took ")) << timed;
  std::printf("%s", timed.c_str());
  ExpectMembersCompletedNear(eager, automatic, automatic_results);
}

// A profile window on CUDA: the trace holds each operator's GPU time on a track of its own, and says how it was
// recorded.
TEST_F(CudaTraining, AProfileTraceOnCudaHasTheOperatorsGpuTimes) {
  SKIP_WITHOUT_CUDA();
  Recorder recorder;
  TrainerOptions options;
  options.max_train_steps = 30;
  options.training.eval_every_steps = 30;
  options.training.threads = 1;
  options.training.profile_steps = "10:15";
  options.device = "cuda";
  std::filesystem::create_directories(dir_);
  options.profile_path = (dir_ / "trace.json").string();
  SyntheticMlp workload;
  const std::map<std::string, Value> params = {
      {"optimizer", Value("momentum")}, {"learning_rate", Value(0.05)}, {"batch_size", Value(std::int64_t{64})}};
  const TrainResult result = TrainWorkload(workload, HyperParams(nlohmann::json::object(), params), options, recorder);
  ASSERT_EQ(result.profile_trace, options.profile_path);
  std::ifstream in(options.profile_path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int gpu_events = 0;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("cat", "") == "gpu") {
      ++gpu_events;
      EXPECT_GT(event.at("dur").get<double>(), 0);
    }
  }
  EXPECT_GT(gpu_events, 10) << "operators of 5 steps on the GPU";
  EXPECT_THAT(trace.at("otherData").at("dltune").at("profiler").get<std::string>(),
              HasSubstr("each operator's GPU time from CUDA events"));
}

// A fused group's profile window on CUDA: one trace of the group's steps, with its operators' GPU times, and the
// group trains eagerly meanwhile.
TEST_F(CudaTraining, AFusedGroupsProfileTraceHasTheOperatorsGpuTimes) {
  SKIP_WITHOUT_CUDA();
  FusedRecorder recorder;
  const auto results = TrainGroup("cuda", 200, 0, dir_, recorder, "auto", "20:25");
  const std::filesystem::path trace_path = dir_ / "profile.trace.json";  // the members' directories' parent
  for (const FusedMemberResult& result : results) EXPECT_EQ(result.result.profile_trace, trace_path.string());
  std::ifstream in(trace_path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  int gpu_events = 0;
  for (const auto& event : trace.at("traceEvents")) gpu_events += event.value("cat", "") == "gpu" ? 1 : 0;
  EXPECT_GT(gpu_events, 10) << "operators of 5 steps on the GPU";
  EXPECT_EQ(trace.at("otherData").at("dltune").at("fused_members"), 3);
  EXPECT_EQ(trace.at("otherData").at("dltune").at("last_step"), 25);
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
// Deterministic training on CUDA does not fill every new tensor with NaN (a kernel per allocation).
TEST(CudaDeterminism, LeavesNewMemoryUnfilled) {
  MakeCudaDeterministic();
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_FALSE(at::globalContext().deterministicFillUninitializedMemory());
}
#endif

}  // namespace
}  // namespace dltune
