// dltune_bench_fused: M trials of one MLP study trained as one fused group (src/train/fused_training.h) against the
// same M trials trained alone one after the other (TrainWorkload), in one process, on the CPU. Prints the machine
// (CPU, cores, OpenBLAS kernel set, threads), each side's wall time, their ratio, and whether every member's series
// came out bit-identical to its lone trial's. Plain main().
//
//   dltune_bench_fused [--members M] [--steps N] [--hidden WIDTH] [--batch B] [--threads T] [--workload NAME]
//
// Defaults: 4 members of fashion_mnist_mlp (its first 10,000 training images; synthetic when Fashion-MNIST is not
// installed), 300 steps of Nesterov with batch 128 and one hidden layer of 256, one thread, one evaluation at the end
// (a 1,000-example training subset and the validation split).
//
// Then two CPU proxies of a fused step on a device (docs/gpu.md): the host's time per step of the M members of a tiny
// MLP (the synthetic data's 16 features, hidden 8, batch 8: its arithmetic is a few microseconds, so the step time is
// the host's work of dispatching the operators), in the optimizer's tensor form (a device's) and in the CPU's one-pass
// update; and the bytes the members' checkpoints write and copy at one evaluation of the group above.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/files.h"
#include "core/machine.h"
#include "dltune/core/error.h"
#include "dltune/train/trainer.h"
#include "dltune/workloads/registry.h"
#include "train/blas_kernels.h"
#include "train/fused_training.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  std::int64_t members = 4;
  std::int64_t steps = 300;
  std::int64_t hidden = 256;
  std::int64_t batch = 128;
  int threads = 1;
  std::string workload;
};

Settings ParseArguments(int argc, char** argv) {
  Settings settings;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--members")
      settings.members = std::stoll(value);
    else if (flag == "--steps")
      settings.steps = std::stoll(value);
    else if (flag == "--hidden")
      settings.hidden = std::stoll(value);
    else if (flag == "--batch")
      settings.batch = std::stoll(value);
    else if (flag == "--threads")
      settings.threads = std::stoi(value);
    else if (flag == "--workload")
      settings.workload = value;
    else
      throw dltune::Error(fmt::format("unknown flag {}", flag));
  }
  if (settings.workload.empty()) {
    settings.workload = std::filesystem::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")
                            ? "fashion_mnist_mlp"
                            : "synthetic";
  }
  return settings;
}

// Member m of the study: Nesterov with its own learning rate and momentum, seeds of its own.
dltune::FusedMember Member(const Settings& settings, std::int64_t m) {
  using dltune::Value;
  const std::map<std::string, Value> params = {
      {"optimizer", Value("nesterov")},
      {"learning_rate", Value(0.01 * static_cast<double>(m + 1))},
      {"one_minus_momentum", Value(0.05 + 0.02 * static_cast<double>(m))},
      {"batch_size", Value(settings.batch)},
      {"width", Value(settings.hidden)},
  };
  const auto seed = static_cast<std::uint64_t>(m + 1);
  return {dltune::HyperParams(nlohmann::json::object(), params), seed, seed + 1000, "", nullptr};
}

// The bytes one member's training step walks through: its weights, their gradients and Nesterov's momentum (each a
// float per parameter of the MLP), and its batch of inputs.
double StepBytes(const Settings& settings, dltune::Workload& workload) {
  const auto inputs = static_cast<double>(workload.Data().train.inputs[0].numel());
  const auto hidden = static_cast<double>(settings.hidden);
  const auto classes = static_cast<double>(workload.num_classes());
  const double parameters = inputs * hidden + hidden + hidden * classes + classes;
  return 4.0 * (3.0 * parameters + static_cast<double>(settings.batch) * inputs);
}

// The L2 cache of CPU 0 as the kernel reports it ("2048K"), or "unknown".
std::string L2CacheSize() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index2/size");
  std::string size;
  return in >> size ? size : "unknown";
}

double Seconds(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Records a lone trial's training losses and its last evaluation.
struct Recorder : dltune::TrainerCallbacks {
  std::vector<double> losses;
  std::vector<dltune::EvalMetric> last_evaluation;
  void OnTrainMetrics(const std::vector<dltune::StepMetrics>& steps) override {
    for (const auto& s : steps) losses.push_back(s.loss);
  }
  void OnEvaluation(std::int64_t, const std::vector<dltune::EvalMetric>& metrics, std::int64_t, double) override {
    last_evaluation = metrics;
  }
};

// The loop's own time per step (TrainFused's step_time: its time between two reads of the steps, shared among them;
// the median over the run) of the members of a tiny MLP, on the synthetic data: the host's overhead per step.
double HostSecondsPerStep(const Settings& settings, std::int64_t count, bool deferred) {
  Settings tiny = settings;
  tiny.members = count;
  tiny.hidden = 8;
  tiny.batch = 8;
  std::unique_ptr<dltune::Workload> workload = dltune::MakeWorkload("synthetic", nlohmann::json{{"examples", 4000}});
  workload->Data();
  dltune::FusedOptions options;
  options.max_train_steps = 400;
  options.training.eval_every_steps = options.max_train_steps;
  options.training.log_every_steps = 50;
  options.training.train_eval_examples = 100;
  options.training.threads = settings.threads;
  options.deferred = deferred;
  std::vector<dltune::FusedMember> members;
  for (std::int64_t m = 0; m < count; ++m) members.push_back(Member(tiny, m));
  const std::vector<dltune::FusedMemberResult> fused = dltune::TrainFused(*workload, members, options);
  std::vector<double> times;
  for (const dltune::StepMetrics& step : fused.front().steps) times.push_back(step.step_time);
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2), times.end());
  return times[times.size() / 2];
}

// The bytes of the files under `dir`.
std::uintmax_t BytesUnder(const std::filesystem::path& dir) {
  std::uintmax_t bytes = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    if (entry.is_regular_file()) bytes += entry.file_size();
  }
  return bytes;
}

// What the group's checkpoints cost at one evaluation: the bytes its members' checkpoint files hold (a group trained
// one step, evaluated and checkpointed once), and the bytes copied on the training thread before they are written off
// it (each member's weights into its lone model, and its optimizer state: Nesterov's momentum, as many).
struct CheckpointBytes {
  std::uintmax_t written = 0;
  std::uintmax_t copied = 0;
};
CheckpointBytes CheckpointBytesPerEvaluation(const Settings& settings, dltune::Workload& workload,
                                             const dltune::FusedOptions& base) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / fmt::format("dltune_bench_fused_{}", static_cast<long>(::getpid()));
  dltune::RemoveTree(dir);
  dltune::FusedOptions options = base;
  options.max_train_steps = 1;
  options.training.eval_every_steps = 1;
  std::vector<dltune::FusedMember> members;
  for (std::int64_t m = 0; m < settings.members; ++m) {
    members.push_back(Member(settings, m));
    members.back().checkpoint_dir = (dir / fmt::format("m{}", m)).string();
  }
  dltune::TrainFused(workload, members, options);
  CheckpointBytes bytes;
  bytes.written = BytesUnder(dir);
  dltune::RemoveTree(dir);
  std::int64_t parameters = 0;
  for (const torch::Tensor& p : workload.BuildModel(Member(settings, 0).params)->parameters()) {
    parameters += p.numel();
  }
  bytes.copied = static_cast<std::uintmax_t>(settings.members * parameters) * 2 * sizeof(float);
  return bytes;
}

bool SameSeries(const dltune::FusedMemberResult& fused, const Recorder& alone) {
  if (fused.steps.size() != alone.losses.size()) return false;
  for (std::size_t i = 0; i < alone.losses.size(); ++i) {
    if (fused.steps[i].loss != alone.losses[i]) return false;
  }
  const auto& evaluation = fused.evaluations.back().second;
  if (evaluation.size() != alone.last_evaluation.size()) return false;
  for (std::size_t i = 0; i < evaluation.size(); ++i) {
    if (evaluation[i].value != alone.last_evaluation[i].value) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  dltune::ReexecWithFasterBlasKernels(argv);
  // Freed memory kept in the process, as in the commands that train (docs/training.md, "Memory").
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
  const Settings settings = ParseArguments(argc, argv);
  const nlohmann::json args = settings.workload == "fashion_mnist_mlp" ? nlohmann::json{{"train_examples", 10000}}
                                                                       : nlohmann::json{{"examples", 20000}};
  std::unique_ptr<dltune::Workload> workload = dltune::MakeWorkload(settings.workload, args);
  workload->Data();  // loaded once, before either side's clock starts

  dltune::FusedOptions options;
  options.max_train_steps = settings.steps;
  options.training.eval_every_steps = settings.steps;
  options.training.train_eval_examples = 1000;
  options.training.threads = settings.threads;
  std::vector<dltune::FusedMember> members;
  for (std::int64_t m = 0; m < settings.members; ++m) members.push_back(Member(settings, m));

  std::printf("fused trials: %lld members of %s (hidden %lld, batch %lld), %lld steps, nesterov\n",
              static_cast<long long>(settings.members), settings.workload.c_str(),
              static_cast<long long>(settings.hidden), static_cast<long long>(settings.batch),
              static_cast<long long>(settings.steps));
  std::printf("  cpu: %s, %d cores available, OpenBLAS kernels: %s, threads: %d\n", dltune::CpuModelName().c_str(),
              dltune::AvailableCores(), dltune::OpenBlasCore().empty() ? "-" : dltune::OpenBlasCore().c_str(),
              settings.threads);

  // The lone trials, one after the other, as a study's single process would run them.
  std::vector<Recorder> recorders(members.size());
  const auto lone_start = Clock::now();
  for (std::size_t m = 0; m < members.size(); ++m) {
    dltune::TrainerOptions lone;
    lone.max_train_steps = options.max_train_steps;
    lone.training = options.training;
    lone.objective = options.objective;
    lone.init_seed = members[m].init_seed;
    lone.data_seed = members[m].data_seed;
    dltune::TrainWorkload(*workload, members[m].params, lone, recorders[m]);
  }
  const double lone_seconds = Seconds(lone_start);

  const auto fused_start = Clock::now();
  const std::vector<dltune::FusedMemberResult> fused = dltune::TrainFused(*workload, members, options);
  const double fused_seconds = Seconds(fused_start);

  bool identical = true;
  for (std::size_t m = 0; m < members.size(); ++m) identical = identical && SameSeries(fused[m], recorders[m]);
  std::printf("  %lld lone trials one after the other: %.3f s (%.2f ms per member-step)\n",
              static_cast<long long>(settings.members), lone_seconds,
              1e3 * lone_seconds / static_cast<double>(settings.members * settings.steps));
  std::printf("  one fused group:                   %.3f s (%.2f ms per member-step)\n", fused_seconds,
              1e3 * fused_seconds / static_cast<double>(settings.members * settings.steps));
  std::printf("  ratio lone / fused: %.2fx; every member bit-identical to its lone trial: %s\n",
              lone_seconds / fused_seconds, identical ? "yes" : "NO");
  const double member_bytes = StepBytes(settings, *workload);
  std::printf(
      "  one member's weights, gradients, momentum and batch: %.2f MB; all %lld members': %.2f MB; L2 cache per "
      "core: %s\n",
      member_bytes / 1e6, static_cast<long long>(settings.members),
      member_bytes * static_cast<double>(settings.members) / 1e6, L2CacheSize().c_str());
  std::printf(
      "  why: on the CPU a fused group does its lone trials' arithmetic, no less: LibTorch's baddbmm and bmm run one "
      "BLAS product per member (the very products of its lone Linear layers, hence bit-identical), and the optimizer "
      "makes the same passes over the same bytes. Fusing saves only what each step costs beside that arithmetic "
      "(operator dispatch and autograd nodes per layer, loss and optimizer calls: microseconds against the products' "
      "milliseconds), and it reuses the cache less (a step walks through every member's weights, gradients and state, "
      "a lone trial's stay in cache from step to step while they fit). So expect a ratio near 1 on the CPU, within the "
      "noise of a shared machine; what fusing is for is the GPU, "
      "where M small products become one kernel launch that fills the device.\n");

  // The CPU proxies of a device's fused step (docs/gpu.md, "CPU proxies of the fused step").
  const double tensor_form = HostSecondsPerStep(settings, settings.members, /*deferred=*/true);
  const double one_pass = HostSecondsPerStep(settings, settings.members, /*deferred=*/false);
  const double lone_tensor_form = HostSecondsPerStep(settings, 1, /*deferred=*/true);
  std::printf(
      "  host time per fused step of a tiny MLP (synthetic, 16 features, hidden 8, batch 8; median step time of 400 "
      "steps): %lld members: %.0f us in the optimizer's tensor form (a device's operators, eager), %.0f us in the "
      "CPU's one-pass update; 1 member: %.0f us in the tensor form (of what grows with M, the CPU's baddbmm "
      "dispatches one addmm a member, 2 M a step, where a device runs one batched product)\n",
      static_cast<long long>(settings.members), 1e6 * tensor_form, 1e6 * one_pass, 1e6 * lone_tensor_form);
  const CheckpointBytes checkpoint = CheckpointBytesPerEvaluation(settings, *workload, options);
  std::printf(
      "  checkpoint bytes per evaluation, %lld members of %s (hidden %lld): %.2f MB written (%.2f MB a member), %.2f "
      "MB copied on the training thread (weights and momentum)\n",
      static_cast<long long>(settings.members), settings.workload.c_str(), static_cast<long long>(settings.hidden),
      static_cast<double>(checkpoint.written) / 1e6,
      static_cast<double>(checkpoint.written) / 1e6 / static_cast<double>(settings.members),
      static_cast<double>(checkpoint.copied) / 1e6);
  return identical ? EXIT_SUCCESS : EXIT_FAILURE;
}
