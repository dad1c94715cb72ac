// Training throughput: `dltune train fashion_mnist_mlp` side by side with the same training in PyTorch, for each
// optimizer compared, and the share of the machine's limit that each reaches.
//
// One invocation:
//   1. measures sgemm: torch::mm of two 2048 x 2048 float32 matrices on 1 thread, best of >= 7 in >= 1.5 s (2 n^3
//      FLOP each), with the BLAS as configured and, when it is OpenBLAS, with each kernel set OPENBLAS_CORETYPE can
//      force (Haswell, SkylakeX, Cooperlake; this binary re-run with --sgemm-only: OpenBLAS reads it only at load).
//      The best of these is the machine's peak: OpenBLAS 0.3.21 runs its generic "Prescott" kernels on CPUs it does
//      not know, at a fraction of what the CPU can do;
//   2. measures the machine's limit (bench/machine_limit.h): the CPU model, the OpenBLAS kernel set each side trains
//      with as users run them, and in each of those kernel sets the sgemm GFLOP/s of the MLP's own products (those of
//      a training step at batch 128 and of an evaluation batch of 256) and of a 2048 cube, on 1 core and on all cores
//      (one single-thread process per core at once, summed); the limit of a run is the seconds its products need at
//      the fastest of those kernel sets' 1-core speeds (also given per CPU second: the GFLOP/s over the share of a
//      core the measuring process got, for a machine that other load shares);
//   3. runs the dltune binary: fashion_mnist_mlp (784-256-10, ReLU), batch 128, --steps 3000, --eval-every 500 (a
//      fixed 10,000-example train subset and the full 10,000-example valid split, eval batch 256), --threads 1,
//      metrics and checkpoints in a fresh directory under $TMPDIR, once per optimizer of --optimizers: nesterov
//      (learning rate 0.05, momentum 0.9) and adam (learning rate 0.001, beta1 0.9, beta2 0.999, epsilon 1e-8);
//   4. runs bench/peers/pytorch_mlp.py with the same model, split, batch size, steps, evaluation schedule, threads
//      and optimizer, as PyTorch users run it (torch.optim.SGD with nesterov=True, torch.optim.Adam);
//   3 and 4 run in up to three environments:
//     a. as a user runs each: dltune with its default DLTUNE_BLAS_KERNELS=auto (it restarts itself with the CPU's
//        kernel set when OpenBLAS picked an older one, see include/dltune/train/blas_kernels.h), PyTorch with the
//        environment as it is. This is the comparison the 1.3x goal is judged on;
//     b. the same kernels forced on both sides: OPENBLAS_CORETYPE set to the kernel set dltune chooses (when it
//        chooses one, and OPENBLAS_CORETYPE was not set already): the ratio without kernel selection;
//     c. OpenBLAS's own choice on both sides (dltune with DLTUNE_BLAS_KERNELS=off), when dltune chooses other kernels;
//   every run gets OPENBLAS_VERBOSE=2, so OpenBLAS prints the kernel set it loads ("Core: NAME"), and the tables name
//   the kernels each side trained with (for dltune, those of its restarted process);
//   5. prints a table per environment and optimizer: kernels, training-loop steps/s, whole-run seconds, final valid
//      error of each, the ratios, the training GFLOP/s as a share of its kernels' 2048 sgemm and of the machine's
//      peak, and the training loop's and whole run's share of the machine's limit; then a summary of steps/s by
//      environment and optimizer with the goals: as users run them dltune >= 1.3x PyTorch; with the same kernels on
//      both sides dltune >= 1.2x PyTorch for every optimizer; dltune's Adam within 15% of its Nesterov's steps/s.
// Training-loop time excludes evaluations. For PyTorch the peer measures it itself. For dltune it is the first log
// interval's step_time from metrics.jsonl plus, for every later interval, the time from the previous "eval at step"
// line to the interval's "step" line on dltune's stdout (so dltune's predictions, checkpoint writes and metric flushes
// count as training time, against it). Whole-run seconds are process wall times, spawn to exit, startup included.
// MLP FLOP per training step = 6 x batch x (784*256 + 256*10): forward 2 FLOP per multiply-add, backward twice that
// (the GFLOP/s rows); the machine's limit counts the products a step runs, without the hidden layer's input gradient.
// Exits 0 when everything ran (the goals met or not: the tables say which); 1 when something could not run.
// The peer's interpreter is $DLTUNE_PYTHON, else /usr/bin/python3 (Debian's python3-torch, the same LibTorch 1.13,
// is importable only there), else python3 on PATH. Flags: --steps N, --eval-every N, --threads N, --optimizers LIST
// (comma-separated, of nesterov and adam; default nesterov,adam), --repeats N (run each side N times, alternating,
// and keep each side's fastest run: less sensitive to other load; default 1), --keep (keep the run directory).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "data_parallel_bench.h"
#include "machine_limit.h"
#include "train/blas_kernels.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kGoalRatio = 1.3;             // dltune's training-loop steps/s over PyTorch's, as users run them
constexpr double kSameKernelsGoalRatio = 1.2;  // the same with the same kernels on both sides, for every optimizer
constexpr double kAdamGoalShare = 0.85;        // dltune's Adam steps/s over its Nesterov's
constexpr std::int64_t kInputs = 784;
constexpr std::int64_t kEvalExamples = 20000;  // per evaluation: the 10,000-example train subset and valid split
constexpr std::int64_t kBatchSize = 128;
constexpr std::int64_t kHidden = 256;
constexpr std::int64_t kEvalBatchSize = 256;  // dltune's default: twice the training batch
constexpr std::int64_t kSgemmSize = 2048;
constexpr int kSgemmRepeats = 7;       // at least this many products, and
constexpr double kSgemmSeconds = 1.5;  // for at least this long: a best time that other load is less likely to spoil
constexpr char kSgemmFlag[] = "--sgemm-only";  // hidden: print this process's sgemm GFLOP/s and exit
// OpenBLAS kernel sets tried for the machine's peak: AVX2, AVX-512, AVX-512 + BF16.
constexpr std::array<const char*, 3> kOpenBlasCores = {"Haswell", "SkylakeX", "Cooperlake"};

using dltune::bench::CoreOf;
using dltune::bench::Environment;
using dltune::bench::EnvironmentText;
using dltune::bench::ProcessRun;
using dltune::bench::RunTimed;
using dltune::bench::WithCoreReport;

// An optimizer both sides train with, and its hyperparameters for each.
struct OptimizerSetting {
  std::string name;                                         // dltune's optimizer= and the peer's --optimizer
  std::vector<std::pair<std::string, std::string>> values;  // dltune's --set key=value beside optimizer=
  std::vector<std::string> peer_flags;
  std::string description;
};

const std::vector<OptimizerSetting>& KnownOptimizers() {
  static const std::vector<OptimizerSetting> kOptimizers = {
      {"nesterov",
       {{"learning_rate", "0.05"}, {"momentum", "0.9"}},
       {"--learning-rate", "0.05", "--momentum", "0.9"},
       "lr 0.05, momentum 0.9"},
      {"adam",
       {{"learning_rate", "0.001"}, {"beta1", "0.9"}, {"beta2", "0.999"}, {"epsilon", "1e-8"}},
       {"--learning-rate", "0.001", "--beta1", "0.9", "--beta2", "0.999", "--epsilon", "1e-8"},
       "lr 0.001, beta1 0.9, beta2 0.999, epsilon 1e-8"},
  };
  return kOptimizers;
}

struct Options {
  std::int64_t steps = 3000;
  std::int64_t eval_every = 500;
  int threads = 1;
  int repeats = 1;
  bool keep = false;
  std::vector<OptimizerSetting> optimizers = KnownOptimizers();
};

// One side of the comparison; nullopt fields were not measured.
struct Side {
  std::optional<double> steps_per_second;  // training loop only
  std::optional<double> train_seconds;
  std::optional<double> wall_seconds;  // process, spawn to exit
  std::optional<double> valid_error;   // at the last step, full valid split
  std::optional<double> train_error;   // at the last step, the 10,000-example train subset
  std::string core;                    // the OpenBLAS kernel set it trained with; empty when unknown
  std::string problem;                 // why it could not run; empty when it ran
};

// ---- sgemm peak ---------------------------------------------------------------------------------------------

// Best GFLOP/s of torch::mm on two kSgemmSize-square float32 matrices, 1 thread, over kSgemmRepeats products and
// kSgemmSeconds.
double SgemmGflops() {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  const torch::Tensor a = torch::randn({kSgemmSize, kSgemmSize}, torch::kFloat32);
  const torch::Tensor b = torch::randn({kSgemmSize, kSgemmSize}, torch::kFloat32);
  torch::Tensor c = torch::mm(a, b);  // warm-up
  double best = 1e30;
  const auto begin = Clock::now();
  for (int i = 0; i < kSgemmRepeats || std::chrono::duration<double>(Clock::now() - begin).count() < kSgemmSeconds;
       ++i) {
    const auto start = Clock::now();
    torch::mm_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  const auto n = static_cast<double>(kSgemmSize);
  return 2.0 * n * n * n / best / 1e9;
}

// The sgemm GFLOP/s of this binary re-run with OPENBLAS_CORETYPE=core (OpenBLAS reads it only at load time), and the
// kernel set OpenBLAS reports it ran.
std::optional<std::pair<std::string, double>> SgemmWithCore(const std::string& core) {
  const ProcessRun run =
      RunTimed({fs::read_symlink("/proc/self/exe").string(), kSgemmFlag}, {{"OPENBLAS_CORETYPE", core}});
  for (const auto& [at, line] : run.lines) {
    if (run.status == 0 && line.starts_with("gflops=")) {
      const std::size_t name_at = line.find(" core=");
      return std::pair(name_at == std::string::npos ? core : line.substr(name_at + 6), std::stod(line.substr(7)));
    }
  }
  return std::nullopt;
}

// ---- dltune -------------------------------------------------------------------------------------------------

// The step number N of a dltune stdout line "step N/M ..." or "eval at step N: ...", by its prefix.
std::optional<std::int64_t> StepOfLine(const std::string& line, const std::string& prefix) {
  if (!line.starts_with(prefix)) return std::nullopt;
  try {
    return std::stoll(line.substr(prefix.size()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Side RunDltune(const Options& options, const OptimizerSetting& optimizer, const fs::path& out,
               const Environment& environment) {
  Side side;
  std::vector<std::string> argv = {DLTUNE_CLI_PATH,
                                   "train",
                                   "fashion_mnist_mlp",
                                   "--set",
                                   "hidden_sizes=[" + std::to_string(kHidden) + "]",
                                   "--set",
                                   "optimizer=" + optimizer.name};
  for (const auto& [key, value] : optimizer.values) {
    argv.push_back("--set");
    argv.push_back(key + "=" + value);
  }
  for (const std::string& arg :
       {std::string("--set"), "batch_size=" + std::to_string(kBatchSize), std::string("--steps"),
        std::to_string(options.steps), std::string("--eval-every"), std::to_string(options.eval_every),
        std::string("--threads"), std::to_string(options.threads), std::string("--seed"), std::string("0"),
        std::string("--out"), out.string()}) {
    argv.push_back(arg);
  }
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  std::printf("  %s%s\n", EnvironmentText(environment).c_str(), command.c_str());
  const ProcessRun run = RunTimed(argv, WithCoreReport(environment));
  if (run.status != 0) {
    side.problem = "dltune train exited with status " + std::to_string(run.status) + ":\n" + run.Output();
    return side;
  }
  side.wall_seconds = run.wall_seconds;
  side.core = CoreOf(run);

  // The arrival time of each interval's "step" line and each evaluation's "eval at step" line.
  std::map<std::int64_t, double> step_line_at;
  std::map<std::int64_t, double> eval_line_at;
  for (const auto& [at, line] : run.lines) {
    if (const auto step = StepOfLine(line, "step ")) step_line_at[*step] = at;
    if (const auto step = StepOfLine(line, "eval at step ")) eval_line_at[*step] = at;
  }

  // metrics.jsonl: the first interval's step_time and the last evaluation.
  std::ifstream metrics(out / "metrics.jsonl");
  if (!metrics) {
    side.problem = "no " + (out / "metrics.jsonl").string();
    return side;
  }
  const std::int64_t first_interval = std::min(options.eval_every, options.steps);
  double first_interval_seconds = 0;
  std::int64_t first_interval_steps = 0;
  for (std::string line; std::getline(metrics, line);) {
    const nlohmann::json record = nlohmann::json::parse(line);
    const std::string type = record.value("type", "");
    const std::int64_t step = record.value("step", std::int64_t{0});
    if (type == "train" && step <= first_interval) {
      first_interval_seconds += record.value("step_time", 0.0);
      ++first_interval_steps;
    } else if (type == "eval" && step == options.steps && record.value("metric", "") == "error_rate") {
      const std::string split = record.value("split", "");
      if (split == "valid") side.valid_error = record.value("value", 0.0);
      if (split == "train") side.train_error = record.value("value", 0.0);
    }
  }
  if (first_interval_steps != first_interval || step_line_at.empty() || !side.valid_error) {
    side.problem =
        "dltune's metrics.jsonl or stdout lacks the expected training and evaluation lines:\n" + run.Output();
    return side;
  }
  double train_seconds = first_interval_seconds;
  std::optional<double> previous_eval_at;
  for (const auto& [step, at] : step_line_at) {
    if (step > first_interval) {
      if (!previous_eval_at) {
        side.problem = "dltune printed no evaluation before the training line of step " + std::to_string(step);
        return side;
      }
      train_seconds += at - *previous_eval_at;
    }
    if (const auto eval = eval_line_at.find(step); eval != eval_line_at.end()) previous_eval_at = eval->second;
  }
  side.train_seconds = train_seconds;
  side.steps_per_second = static_cast<double>(options.steps) / train_seconds;
  std::printf(
      "  dltune: steps=%lld train_seconds=%.3f wall_seconds=%.3f steps_per_second=%.1f train_error_rate=%.4f "
      "valid_error_rate=%.4f openblas_core=%s\n",
      static_cast<long long>(options.steps), train_seconds, run.wall_seconds, *side.steps_per_second,
      side.train_error.value_or(-1), *side.valid_error, side.core.empty() ? "-" : side.core.c_str());
  return side;
}

// ---- PyTorch ------------------------------------------------------------------------------------------------

std::string PythonInterpreter() {
  if (const char* configured = std::getenv("DLTUNE_PYTHON"); configured != nullptr && *configured != '\0') {
    return configured;
  }
  if (fs::exists("/usr/bin/python3")) return "/usr/bin/python3";
  return "python3";
}

std::string FindPeerScript(const char* argv0) {
  const fs::path in_source = fs::path(DLTUNE_SOURCE_DIR) / "bench/peers/pytorch_mlp.py";
  if (fs::exists(in_source)) return in_source.string();
  const fs::path binary_dir = fs::absolute(argv0).parent_path();
  for (const auto& candidate :
       {binary_dir / "peers/pytorch_mlp.py", binary_dir.parent_path() / "bench/peers/pytorch_mlp.py"}) {
    if (fs::exists(candidate)) return candidate.string();
  }
  return {};
}

// The value of `key=` in a line of space-separated key=value pairs.
std::optional<double> FieldOf(const std::string& line, const std::string& key) {
  const std::string pattern = " " + key + "=";
  const std::size_t at = line.find(pattern);
  if (at == std::string::npos) return std::nullopt;
  try {
    return std::stod(line.substr(at + pattern.size()));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

Side RunPytorch(const Options& options, const OptimizerSetting& optimizer, const char* argv0,
                const Environment& environment) {
  Side side;
  const std::string script = FindPeerScript(argv0);
  if (script.empty()) {
    side.problem = "peer script bench/peers/pytorch_mlp.py not found";
    return side;
  }
  std::vector<std::string> argv = {PythonInterpreter(), script,
                                   "--steps",           std::to_string(options.steps),
                                   "--eval-every",      std::to_string(options.eval_every),
                                   "--batch-size",      std::to_string(kBatchSize),
                                   "--eval-batch-size", std::to_string(kEvalBatchSize),
                                   "--hidden",          std::to_string(kHidden),
                                   "--threads",         std::to_string(options.threads),
                                   "--optimizer",       optimizer.name};
  argv.insert(argv.end(), optimizer.peer_flags.begin(), optimizer.peer_flags.end());
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  std::printf("  %s%s\n", EnvironmentText(environment).c_str(), command.c_str());
  const ProcessRun run = RunTimed(argv, WithCoreReport(environment));
  std::string summary;
  for (const auto& [at, line] : run.lines) {
    if (line.starts_with("pytorch_mlp ")) summary = line;
  }
  if (run.status != 0 || summary.empty()) {
    side.problem = "the PyTorch peer failed (exit status " + std::to_string(run.status) + "):\n" + run.Output() +
                   "python3 with python3-torch and python3-numpy is required for the comparison (apt-get install "
                   "python3-torch, or set DLTUNE_PYTHON to an interpreter that has torch)";
    return side;
  }
  side.core = CoreOf(run);
  std::printf("  peer: %s openblas_core=%s\n", summary.c_str(), side.core.empty() ? "-" : side.core.c_str());
  side.wall_seconds = run.wall_seconds;
  side.train_seconds = FieldOf(summary, "train_seconds");
  side.steps_per_second = FieldOf(summary, "steps_per_second");
  side.valid_error = FieldOf(summary, "valid_error_rate");
  side.train_error = FieldOf(summary, "train_error_rate");
  if (!side.steps_per_second || !side.valid_error) side.problem = "cannot read the peer's summary: " + summary;
  return side;
}

// ---- main ---------------------------------------------------------------------------------------------------

std::string Cell(const std::optional<double>& value, const char* format) {
  if (!value) return "-";
  char text[64];
  std::snprintf(text, sizeof text, format, *value);
  return text;
}

std::optional<double> Ratio(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b || *b == 0) return std::nullopt;
  return *a / *b;
}

// The optimizers of a comma-separated list of KnownOptimizers() names; nullopt for an unknown or empty one.
std::optional<std::vector<OptimizerSetting>> ParseOptimizers(const std::string& list) {
  std::vector<OptimizerSetting> optimizers;
  for (std::size_t at = 0; at <= list.size();) {
    std::size_t end = list.find(',', at);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(at, end - at);
    const auto& known = KnownOptimizers();
    const auto found = std::find_if(known.begin(), known.end(), [&](const auto& o) { return o.name == name; });
    if (found == known.end()) return std::nullopt;
    if (std::none_of(optimizers.begin(), optimizers.end(), [&](const auto& o) { return o.name == name; })) {
      optimizers.push_back(*found);
    }
    at = end + 1;
  }
  return optimizers;
}

bool ParseOptions(int argc, char** argv, Options& options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    try {
      if (arg == "--steps" && has_value) {
        options.steps = std::stoll(argv[++i]);
      } else if (arg == "--eval-every" && has_value) {
        options.eval_every = std::stoll(argv[++i]);
      } else if (arg == "--threads" && has_value) {
        options.threads = std::stoi(argv[++i]);
      } else if (arg == "--keep") {
        options.keep = true;
      } else if (arg == "--repeats" && has_value) {
        options.repeats = std::stoi(argv[++i]);
      } else if (arg == "--optimizers" && has_value) {
        const auto optimizers = ParseOptimizers(argv[++i]);
        if (!optimizers) return false;
        options.optimizers = *optimizers;
      } else {
        return false;
      }
    } catch (const std::exception&) {
      return false;
    }
  }
  return options.steps > 0 && options.eval_every > 0 && options.threads > 0 && options.repeats > 0;
}

double LoadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

// Keeps the faster of two runs of one side in `best`; a run that could not be measured spoils it.
void KeepFaster(Side& best, Side run) {
  if (!run.problem.empty() || !run.steps_per_second) {
    if (best.problem.empty()) best.problem = run.problem.empty() ? "no steps/s" : run.problem;
    return;
  }
  if (best.problem.empty() && (!best.steps_per_second || *run.steps_per_second > *best.steps_per_second)) {
    best = std::move(run);
  }
}

// Both sides trained with one optimizer.
struct Match {
  std::string optimizer;
  Side dltune;
  Side pytorch;
  std::optional<double> StepRatio() const { return Ratio(dltune.steps_per_second, pytorch.steps_per_second); }
  bool SameKernels() const { return !dltune.core.empty() && dltune.core == pytorch.core; }
};

// Both sides run in one environment each, once per optimizer.
struct Comparison {
  std::string title;  // "As users run them: ...", ...
  std::string label;  // short, for the summary
  Environment dltune_environment;
  Environment pytorch_environment;
  bool goal = false;  // the comparison the 1.3x goal is judged on
  std::vector<Match> matches;
  const Match* Of(const std::string& optimizer) const {
    for (const Match& match : matches) {
      if (match.optimizer == optimizer) return &match;
    }
    return nullptr;
  }
};

// Single-thread sgemm GFLOP/s by OpenBLAS kernel set ("" for a BLAS that is not OpenBLAS), and the best of them.
struct SgemmTable {
  std::map<std::string, double> by_core;
  double peak = 0;
  std::optional<double> Of(const std::string& core) const {
    const auto found = by_core.find(core);
    return found == by_core.end() ? std::nullopt : std::optional<double>(found->second);
  }
};

// What one run of either side does: its training steps and evaluated examples.
dltune::bench::MlpWork RunWork(const Options& options, bool with_evaluations) {
  const std::int64_t evaluations = options.steps / options.eval_every + (options.steps % options.eval_every != 0);
  return {static_cast<double>(options.steps),
          with_evaluations ? static_cast<double>(evaluations * kEvalExamples) : 0.0};
}

void PrintComparison(const Comparison& comparison, const Match& match, const Options& options, double flops_per_step,
                     const SgemmTable& sgemm, const dltune::bench::MachineLimit& limit) {
  const Side& dltune = match.dltune;
  const Side& pytorch = match.pytorch;
  std::printf("\n%s; %s\n", comparison.title.c_str(), match.optimizer.c_str());
  std::printf("%-46s %10s %10s %15s\n", "  figure", "dltune", "PyTorch", "dltune/PyTorch");
  std::printf("  %s\n", std::string(82, '-').c_str());
  std::printf("  %-44s %10s %10s %15s\n", "OpenBLAS kernels (OpenBLAS's \"Core:\" line)",
              dltune.core.empty() ? "-" : dltune.core.c_str(), pytorch.core.empty() ? "-" : pytorch.core.c_str(),
              dltune.core == pytorch.core ? "same" : "different");
  auto row = [](const char* name, const std::optional<double>& a, const std::optional<double>& b, const char* format,
                const std::optional<double>& ratio) {
    std::printf("  %-44s %10s %10s %14s%s\n", name, Cell(a, format).c_str(), Cell(b, format).c_str(),
                Cell(ratio, "%.2f").c_str(), ratio ? "x" : "");
  };
  row("training loop steps/s (evals excluded)", dltune.steps_per_second, pytorch.steps_per_second, "%.1f",
      match.StepRatio());
  row("training loop seconds", dltune.train_seconds, pytorch.train_seconds, "%.2f",
      Ratio(pytorch.train_seconds, dltune.train_seconds));
  row("whole run seconds (process wall; speedup)", dltune.wall_seconds, pytorch.wall_seconds, "%.2f",
      Ratio(pytorch.wall_seconds, dltune.wall_seconds));
  row("final valid error rate (10,000 examples)", dltune.valid_error, pytorch.valid_error, "%.4f", std::nullopt);
  row("final train error rate (10,000-ex. subset)", dltune.train_error, pytorch.train_error, "%.4f", std::nullopt);
  auto gflops = [&](const Side& side) -> std::optional<double> {
    if (!side.steps_per_second) return std::nullopt;
    return *side.steps_per_second * flops_per_step / 1e9;
  };
  auto share = [](const std::optional<double>& value, const std::optional<double>& peak) -> std::optional<double> {
    if (!value || !peak || *peak <= 0) return std::nullopt;
    return 100.0 * *value / *peak;
  };
  row("training GFLOP/s (6 x batch x weights)", gflops(dltune), gflops(pytorch), "%.1f", std::nullopt);
  row("  % of its kernels' 2048 sgemm", share(gflops(dltune), sgemm.Of(dltune.core)),
      share(gflops(pytorch), sgemm.Of(pytorch.core)), "%.1f%%", std::nullopt);
  row("  % of the machine's 2048 sgemm peak", share(gflops(dltune), sgemm.peak), share(gflops(pytorch), sgemm.peak),
      "%.1f%%", std::nullopt);
  // Shares of the machine's limit: the limit's seconds for the work over the seconds the side took.
  const auto limit_share = [](const std::optional<double>& limit_seconds, const std::optional<double>& seconds) {
    return limit_seconds && seconds && *seconds > 0 ? std::optional<double>(100.0 * *limit_seconds / *seconds)
                                                    : std::nullopt;
  };
  const auto loop_limit = limit.Seconds(RunWork(options, false), false);
  const auto run_limit = limit.Seconds(RunWork(options, true), false);
  row("training loop, % of the machine's limit", limit_share(loop_limit, dltune.train_seconds),
      limit_share(loop_limit, pytorch.train_seconds), "%.1f%%", std::nullopt);
  const auto own_limit = [&](const Side& side) -> std::optional<double> {
    const auto* set = limit.Find(side.core);
    return set == nullptr ? std::nullopt : set->one_core.Seconds(limit.mlp, RunWork(options, false));
  };
  row("  % of its kernels' limit", limit_share(own_limit(dltune), dltune.train_seconds),
      limit_share(own_limit(pytorch), pytorch.train_seconds), "%.1f%%", std::nullopt);
  const auto loop_limit_cpu = limit.Seconds(RunWork(options, false), false, true);
  row("  % of the limit per CPU second", limit_share(loop_limit_cpu, dltune.train_seconds),
      limit_share(loop_limit_cpu, pytorch.train_seconds), "%.1f%%", std::nullopt);
  row("whole run (process wall), % of machine limit", limit_share(run_limit, dltune.wall_seconds),
      limit_share(run_limit, pytorch.wall_seconds), "%.1f%%", std::nullopt);
  if (const auto ratio = match.StepRatio()) {
    if (comparison.goal) {
      std::printf("  goal: dltune training-loop steps/s >= %.1fx PyTorch's, each as a user runs it: %.2fx, %s\n",
                  kGoalRatio, *ratio, *ratio >= kGoalRatio ? "MET" : "NOT MET");
    } else {
      std::printf("  dltune/PyTorch %.2fx\n", *ratio);
    }
  }
}

// Steps/s by environment and optimizer, and the goals across optimizers.
void PrintSummary(const std::vector<Comparison>& comparisons, const Options& options) {
  std::printf("\nSummary: training-loop steps/s (evaluations excluded), best of %d run(s) per side\n", options.repeats);
  std::printf("  %-40s %-9s %9s %9s %15s  %s\n", "environment", "optimizer", "dltune", "PyTorch", "dltune/PyTorch",
              "kernels (dltune / PyTorch)");
  for (const Comparison& comparison : comparisons) {
    for (const Match& match : comparison.matches) {
      const auto ratio = match.StepRatio();
      std::printf("  %-40s %-9s %9s %9s %14s%s  %s / %s\n", comparison.label.c_str(), match.optimizer.c_str(),
                  Cell(match.dltune.steps_per_second, "%.1f").c_str(),
                  Cell(match.pytorch.steps_per_second, "%.1f").c_str(), Cell(ratio, "%.2f").c_str(), ratio ? "x" : " ",
                  match.dltune.core.empty() ? "-" : match.dltune.core.c_str(),
                  match.pytorch.core.empty() ? "-" : match.pytorch.core.c_str());
    }
  }
  // dltune's Adam against its Nesterov, as users run dltune.
  const Comparison& as_run = comparisons.front();
  const Match* nesterov = as_run.Of("nesterov");
  const Match* adam = as_run.Of("adam");
  if (nesterov != nullptr && adam != nullptr) {
    const auto share = Ratio(adam->dltune.steps_per_second, nesterov->dltune.steps_per_second);
    std::printf("  goal: dltune's Adam within %.0f%% of its Nesterov's steps/s (%s): adam/nesterov %s, %s\n",
                100 * (1 - kAdamGoalShare), as_run.label.c_str(), Cell(share, "%.3f").c_str(),
                !share                     ? "not measured"
                : *share >= kAdamGoalShare ? "MET"
                                           : "NOT MET");
  }
  // With the same kernels on both sides: the forced comparison when there is one, else any whose sides agree.
  const Comparison* same = nullptr;
  for (const Comparison& comparison : comparisons) {
    const bool agree =
        !comparison.matches.empty() && std::all_of(comparison.matches.begin(), comparison.matches.end(),
                                                   [](const Match& match) { return match.SameKernels(); });
    if (agree && (same == nullptr || !comparison.pytorch_environment.empty())) same = &comparison;
  }
  if (same == nullptr) {
    std::printf("  goal: dltune >= %.1fx PyTorch with the same kernels: not measured (no run had the same kernels)\n",
                kSameKernelsGoalRatio);
    return;
  }
  std::string results;
  bool met = true;
  for (const Match& match : same->matches) {
    const auto ratio = match.StepRatio();
    met = met && ratio && *ratio >= kSameKernelsGoalRatio;
    results += (results.empty() ? "" : ", ") + match.optimizer + " " + Cell(ratio, "%.2f") + "x";
  }
  std::printf("  goal: dltune >= %.1fx PyTorch with the same kernels, every optimizer (%s, %s on both sides): %s, %s\n",
              kSameKernelsGoalRatio, same->label.c_str(), same->matches.front().dltune.core.c_str(), results.c_str(),
              met ? "MET" : "NOT MET");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == kSgemmFlag) {
    std::printf("gflops=%.3f core=%s\n", SgemmGflops(), dltune::OpenBlasCore().c_str());
    return 0;
  }
  if (argc >= 2 && std::string(argv[1]) == dltune::bench::kSgemmWorkerFlag) {
    return dltune::bench::RunSgemmWorker(argc, argv);
  }
  // --processes LIST: the data-parallel comparison instead (bench/data_parallel_bench.h).
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != "--processes") continue;
    dltune::bench::DataParallelBenchOptions data_parallel;
    data_parallel.processes.clear();
    std::stringstream list(argv[i + 1]);
    for (std::string item; std::getline(list, item, ',');) data_parallel.processes.push_back(std::stoi(item));
    for (int j = 1; j < argc; ++j) {
      if (std::string(argv[j]) == "--repeats" && j + 1 < argc) data_parallel.repeats = std::stoi(argv[j + 1]);
      if (std::string(argv[j]) == "--keep") data_parallel.keep = true;
    }
    return dltune::bench::RunDataParallelBench(data_parallel, argv[0]);
  }
  Options options;
  if (!ParseOptions(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: %s [--steps N (3000)] [--eval-every N (500)] [--threads N (1)] [--optimizers LIST "
                 "(nesterov,adam)] [--repeats N (1)] [--keep]\n   or: %s --processes LIST (e.g. 1,2: data-parallel "
                 "MLP and CNN against PyTorch DDP) [--repeats N] [--keep]\n",
                 argv[0], argv[0]);
    return 2;
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      (fs::path(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") / "dltune_bench_train.XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "train bench: cannot create a directory like %s: %s\n", pattern.c_str(), std::strerror(errno));
    return 1;
  }
  const fs::path dir = pattern;
  std::string optimizers;
  for (const OptimizerSetting& optimizer : options.optimizers) {
    optimizers += (optimizers.empty() ? "" : "; ") + optimizer.name + " " + optimizer.description;
  }
  std::printf(
      "dltune train bench: fashion_mnist_mlp 784-%lld-10, batch %lld, %lld steps, eval every %lld (10k train subset "
      "+ 10k valid, eval batch %lld), %d thread(s); optimizers: %s; %ld cores, load %.2f; files in %s\n",
      static_cast<long long>(kHidden), static_cast<long long>(kBatchSize), static_cast<long long>(options.steps),
      static_cast<long long>(options.eval_every), static_cast<long long>(kEvalBatchSize), options.threads,
      optimizers.c_str(), sysconf(_SC_NPROCESSORS_ONLN), LoadAverage(), dir.c_str());

  // The sgemm peak: as configured, and with each OpenBLAS kernel set this CPU may run.
  std::printf("sgemm, torch::mm %lldx%lld float32, 1 thread, best of >= %d products and >= %.1f s:\n",
              static_cast<long long>(kSgemmSize), static_cast<long long>(kSgemmSize), kSgemmRepeats, kSgemmSeconds);
  const std::string core = dltune::OpenBlasCore();
  const char* forced_core = std::getenv("OPENBLAS_CORETYPE");
  const bool core_forced = forced_core != nullptr;
  SgemmTable sgemm;
  sgemm.by_core[core] = SgemmGflops();
  const std::string own_label = core.empty() ? "BLAS as configured (not OpenBLAS)"
                                             : "OpenBLAS " + core + " kernels (" +
                                                   (core_forced ? "OPENBLAS_CORETYPE=" + std::string(forced_core)
                                                                : std::string("OpenBLAS's own choice for this CPU")) +
                                                   ")";
  std::printf("  %-64s %7.1f GFLOP/s\n", own_label.c_str(), sgemm.by_core[core]);
  sgemm.peak = sgemm.by_core[core];
  if (!core.empty()) {
    for (const char* candidate : kOpenBlasCores) {
      const auto measured = SgemmWithCore(candidate);
      const std::string label = std::string("OpenBLAS with OPENBLAS_CORETYPE=") + candidate;
      if (!measured) {
        std::printf("  %-64s    (could not run)\n", label.c_str());
        continue;
      }
      std::printf("  %-64s %7.1f GFLOP/s (runs %s)\n", label.c_str(), measured->second, measured->first.c_str());
      sgemm.by_core.emplace(measured->first, measured->second);
      sgemm.peak = std::max(sgemm.peak, measured->second);
    }
  }
  std::printf("  machine's single-thread sgemm peak: %.1f GFLOP/s\n", sgemm.peak);

  // What dltune's DLTUNE_BLAS_KERNELS=auto does in this environment.
  const auto chosen = dltune::FasterBlasEnvironment();
  std::string choice = "none: keeps " + (core.empty() ? std::string("its BLAS (not OpenBLAS)") : core);
  if (chosen) choice = chosen->first + "=" + chosen->second + ", over OpenBLAS's own " + core;
  std::printf("dltune's kernel choice here (%s=auto): %s\n", dltune::kBlasKernelsVariable, choice.c_str());

  // The machine's limit in the kernel sets the sides train with as users run them.
  dltune::bench::Mlp mlp;
  mlp.inputs = kInputs;
  mlp.hidden = kHidden;
  mlp.batch = kBatchSize;
  mlp.eval_batch = kEvalBatchSize;
  const dltune::bench::MachineLimit limit = dltune::bench::MeasureMachineLimit(
      mlp, {{"dltune (" + std::string(chosen ? "its choice" : "OpenBLAS's own choice") + ")",
             chosen ? Environment{*chosen} : Environment{}},
            {"PyTorch (as it is)", {}}});
  dltune::bench::PrintMachineLimit(limit);
  const dltune::bench::MlpWork run_work = RunWork(options, true);
  const auto run_limit = limit.Seconds(run_work, false);
  const auto loop_limit = limit.Seconds(RunWork(options, false), false);
  std::printf(
      "  one run's arithmetic: %lld steps x %.1f MFLOP of products + %.0f evaluated examples x %.3f MFLOP = %.1f "
      "GFLOP; at the limit on 1 core: %s s (training loop %s s)\n\n",
      static_cast<long long>(options.steps), mlp.TrainStepProductFlop() / 1e6, run_work.eval_examples,
      mlp.EvalExampleFlop() / 1e6,
      (run_work.train_steps * mlp.TrainStepProductFlop() + run_work.eval_examples * mlp.EvalExampleFlop()) / 1e9,
      Cell(run_limit, "%.2f").c_str(), Cell(loop_limit, "%.2f").c_str());

  std::vector<Comparison> comparisons;
  Comparison as_run;
  as_run.title = "As users run them: dltune with its default DLTUNE_BLAS_KERNELS=auto, PyTorch as it is";
  as_run.label = "as users run them";
  as_run.dltune_environment = {{dltune::kBlasKernelsVariable, "auto"}};
  as_run.goal = true;
  comparisons.push_back(as_run);
  if (chosen) {
    Comparison forced;
    forced.title = "The same kernels forced on both sides: " + chosen->first + "=" + chosen->second;
    forced.label = "same kernels forced (" + chosen->second + ")";
    forced.dltune_environment = {*chosen};
    forced.pytorch_environment = {*chosen};
    comparisons.push_back(forced);
    Comparison own;
    own.title =
        "OpenBLAS's own choice on both sides (" + core + "): dltune with " + dltune::kBlasKernelsVariable + "=off";
    own.label = "OpenBLAS's own choice (" + core + ")";
    own.dltune_environment = {{dltune::kBlasKernelsVariable, "off"}};
    comparisons.push_back(own);
  }
  for (std::size_t i = 0; i < comparisons.size(); ++i) {
    Comparison& comparison = comparisons[i];
    std::printf("[%zu/%zu] %s\n", i + 1, comparisons.size(), comparison.title.c_str());
    for (const OptimizerSetting& optimizer : options.optimizers) comparison.matches.push_back({optimizer.name, {}, {}});
    for (int repeat = 0; repeat < options.repeats; ++repeat) {
      for (std::size_t o = 0; o < options.optimizers.size(); ++o) {
        const OptimizerSetting& optimizer = options.optimizers[o];
        Match& match = comparison.matches[o];
        const std::string run_name =
            "dltune_" + std::to_string(i) + "_" + optimizer.name + "_" + std::to_string(repeat);
        KeepFaster(match.dltune, RunDltune(options, optimizer, dir / run_name, comparison.dltune_environment));
        KeepFaster(match.pytorch, RunPytorch(options, optimizer, argv[0], comparison.pytorch_environment));
      }
    }
  }

  const double flops_per_step = mlp.TrainStepFormulaFlop();
  for (const Comparison& comparison : comparisons) {
    for (const Match& match : comparison.matches) {
      PrintComparison(comparison, match, options, flops_per_step, sgemm, limit);
    }
  }
  PrintSummary(comparisons, options);
  std::printf(
      "\nMLP FLOP per training step = 6 x batch x (784*%lld + %lld*10) = 6 x %lld x %lld = %.1f MFLOP (forward "
      "2 FLOP per multiply-add, backward twice the forward); the machine's limit counts the %.1f MFLOP of products a "
      "step runs. Other load on the machine slows both sides and the sgemm measurements.\n",
      static_cast<long long>(kHidden), static_cast<long long>(kHidden), static_cast<long long>(kBatchSize),
      static_cast<long long>(784 * kHidden + kHidden * 10), flops_per_step / 1e6, mlp.TrainStepProductFlop() / 1e6);

  bool ran = true;
  if (const std::string problems = limit.Problems(); !problems.empty()) {
    std::printf("\ntrain bench: FAILED: the machine's limit could not be measured: %s", problems.c_str());
    ran = false;
  }
  for (const Comparison& comparison : comparisons) {
    for (const Match& match : comparison.matches) {
      for (const auto& [name, side] :
           {std::pair<const char*, const Side*>{"dltune", &match.dltune}, {"PyTorch", &match.pytorch}}) {
        if (!side->problem.empty()) {
          std::printf("\ntrain bench: FAILED: %s (%s; %s) could not be measured: %s\n", name, comparison.title.c_str(),
                      match.optimizer.c_str(), side->problem.c_str());
          ran = false;
        }
      }
    }
  }
  if (options.keep) {
    std::printf("run directory kept: %s\n", dir.c_str());
  } else {
    std::error_code error;
    dltune::RemoveTree(dir, error);
    if (error) std::fprintf(stderr, "train bench: cannot remove %s: %s\n", dir.c_str(), error.message().c_str());
  }
  return ran ? 0 : 1;
}
