// Training throughput: `dltune train fashion_mnist_mlp` side by side with the same training in PyTorch, and the share
// of the machine's single-thread sgemm peak that dltune's training reaches.
//
// One invocation:
//   1. measures sgemm: torch::mm of two 2048 x 2048 float32 matrices on 1 thread, best of >= 7 in >= 1.5 s (2 n^3
//      FLOP each), with the BLAS as configured and, when it is OpenBLAS, with each kernel set OPENBLAS_CORETYPE can
//      force (Haswell, SkylakeX, Cooperlake; this binary re-run with --sgemm-only: OpenBLAS reads it only at load).
//      The best of these is the machine's peak: OpenBLAS 0.3.21 runs its generic "Prescott" kernels on CPUs it does
//      not know, at a fraction of what the CPU can do;
//   2. runs the dltune binary: fashion_mnist_mlp (784-256-10, ReLU), batch 128, nesterov, learning rate 0.05,
//      momentum 0.9, --steps 3000, --eval-every 500 (a fixed 10,000-example train subset and the full 10,000-example
//      valid split, eval batch 256), --threads 1, metrics and checkpoints in a fresh directory under $TMPDIR;
//   3. runs bench/peers/pytorch_mlp.py with the same model, split, batch size, steps, evaluation schedule and threads;
//   2 and 3 run in up to three environments:
//     a. as a user runs each: dltune with its default DLTUNE_BLAS_KERNELS=auto (it restarts itself with the CPU's
//        kernel set when OpenBLAS picked an older one, see include/dltune/train/blas_kernels.h), PyTorch with the
//        environment as it is. This is the comparison the 1.3x goal is judged on;
//     b. the same kernels forced on both sides: OPENBLAS_CORETYPE set to the kernel set dltune chooses (when it
//        chooses one, and OPENBLAS_CORETYPE was not set already): the ratio without kernel selection;
//     c. OpenBLAS's own choice on both sides (dltune with DLTUNE_BLAS_KERNELS=off), when dltune chooses other kernels;
//   every run gets OPENBLAS_VERBOSE=2, so OpenBLAS prints the kernel set it loads ("Core: NAME"), and the tables name
//   the kernels each side trained with (for dltune, those of its restarted process);
//   4. prints a table per environment: kernels, training-loop steps/s, whole-run seconds, final valid error of each,
//      the ratios, and the training GFLOP/s as a share of its kernels' sgemm and of the machine's peak.
// Training-loop time excludes evaluations. For PyTorch the peer measures it itself. For dltune it is the first log
// interval's step_time from metrics.jsonl plus, for every later interval, the time from the previous "eval at step"
// line to the interval's "step" line on dltune's stdout (so dltune's predictions, checkpoint writes and metric flushes
// count as training time, against it). Whole-run seconds are process wall times, spawn to exit, startup included.
// MLP FLOP per training step = 6 x batch x (784*256 + 256*10): forward 2 FLOP per multiply-add, backward twice that.
// Exits 0 when everything ran (the 1.3x goal met or not: the tables say which); 1 when something could not run.
// The peer's interpreter is $DLTUNE_PYTHON, else /usr/bin/python3 (Debian's python3-torch, the same LibTorch 1.13,
// is importable only there), else python3 on PATH. Flags: --steps N, --eval-every N, --threads N, --repeats N (run
// each side N times, alternating, and keep each side's fastest run: less sensitive to other load; default 1), --keep
// (keep the run directory).
#include <sys/wait.h>
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
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "dltune/train/blas_kernels.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kGoalRatio = 1.3;  // dltune's training-loop steps/s over PyTorch's
constexpr std::int64_t kBatchSize = 128;
constexpr std::int64_t kHidden = 256;
constexpr std::int64_t kEvalBatchSize = 256;  // dltune's default: twice the training batch
constexpr std::int64_t kSgemmSize = 2048;
constexpr int kSgemmRepeats = 7;       // at least this many products, and
constexpr double kSgemmSeconds = 1.5;  // for at least this long: a best time that other load is less likely to spoil
constexpr char kLearningRate[] = "0.05";
constexpr char kMomentum[] = "0.9";
constexpr char kSgemmFlag[] = "--sgemm-only";  // hidden: print this process's sgemm GFLOP/s and exit
// OpenBLAS kernel sets tried for the machine's peak: AVX2, AVX-512, AVX-512 + BF16.
constexpr std::array<const char*, 3> kOpenBlasCores = {"Haswell", "SkylakeX", "Cooperlake"};

struct Options {
  std::int64_t steps = 3000;
  std::int64_t eval_every = 500;
  int threads = 1;
  int repeats = 1;
  bool keep = false;
};

// A finished child process: exit status and its stdout+stderr lines, each with the seconds since spawn it arrived at.
struct ProcessRun {
  int status = -1;  // exit status, or -1 when killed by a signal
  double wall_seconds = 0;
  std::vector<std::pair<double, std::string>> lines;
  std::string Output() const {
    std::string text;
    for (const auto& [at, line] : lines) text += line + "\n";
    return text;
  }
};

// Variables set in a child process's environment, beside those it inherits.
using Environment = std::vector<std::pair<std::string, std::string>>;

// Runs argv[0] with its stdout and stderr piped to us; returns when it has exited. Lines are timestamped on arrival.
ProcessRun RunTimed(const std::vector<std::string>& argv, const Environment& environment) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  const auto start = Clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[1]);
    for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  ProcessRun run;
  std::FILE* in = fdopen(fds[0], "r");
  char* line = nullptr;
  std::size_t capacity = 0;
  ssize_t length = 0;
  while ((length = getline(&line, &capacity, in)) >= 0) {
    std::string text(line, static_cast<std::size_t>(length));
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    run.lines.emplace_back(std::chrono::duration<double>(Clock::now() - start).count(), std::move(text));
  }
  std::free(line);
  std::fclose(in);
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  run.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  run.status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  return run;
}

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

// "NAME=value " for printing before a command.
std::string EnvironmentText(const Environment& environment) {
  std::string text;
  for (const auto& [name, value] : environment) text += name + "=" + value + " ";
  return text;
}

// The environment plus OPENBLAS_VERBOSE=2: OpenBLAS then prints "Core: NAME" when it loads (and nothing else).
Environment WithCoreReport(Environment environment) {
  environment.emplace_back("OPENBLAS_VERBOSE", "2");
  return environment;
}

// The kernel set of the last "Core: NAME" line of a run (a restarted dltune prints two); empty when none.
std::string CoreOf(const ProcessRun& run) {
  std::string core;
  for (const auto& [at, line] : run.lines) {
    if (line.starts_with("Core: ")) core = line.substr(6);
  }
  return core;
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

Side RunDltune(const Options& options, const fs::path& out, const Environment& environment) {
  Side side;
  const std::vector<std::string> argv = {DLTUNE_CLI_PATH,
                                         "train",
                                         "fashion_mnist_mlp",
                                         "--set",
                                         "hidden_sizes=[" + std::to_string(kHidden) + "]",
                                         "--set",
                                         "optimizer=nesterov",
                                         "--set",
                                         std::string("learning_rate=") + kLearningRate,
                                         "--set",
                                         std::string("momentum=") + kMomentum,
                                         "--set",
                                         "batch_size=" + std::to_string(kBatchSize),
                                         "--steps",
                                         std::to_string(options.steps),
                                         "--eval-every",
                                         std::to_string(options.eval_every),
                                         "--threads",
                                         std::to_string(options.threads),
                                         "--seed",
                                         "0",
                                         "--out",
                                         out.string()};
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

Side RunPytorch(const Options& options, const char* argv0, const Environment& environment) {
  Side side;
  const std::string script = FindPeerScript(argv0);
  if (script.empty()) {
    side.problem = "peer script bench/peers/pytorch_mlp.py not found";
    return side;
  }
  const std::vector<std::string> argv = {PythonInterpreter(), script,
                                         "--steps",           std::to_string(options.steps),
                                         "--eval-every",      std::to_string(options.eval_every),
                                         "--batch-size",      std::to_string(kBatchSize),
                                         "--eval-batch-size", std::to_string(kEvalBatchSize),
                                         "--hidden",          std::to_string(kHidden),
                                         "--learning-rate",   kLearningRate,
                                         "--momentum",        kMomentum,
                                         "--threads",         std::to_string(options.threads)};
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

// Both sides run in one environment each.
struct Comparison {
  std::string title;  // "as users run them", ...
  Environment dltune_environment;
  Environment pytorch_environment;
  bool goal = false;  // the comparison the 1.3x goal is judged on
  Side dltune;
  Side pytorch;
  std::optional<double> StepRatio() const { return Ratio(dltune.steps_per_second, pytorch.steps_per_second); }
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

void PrintComparison(const Comparison& comparison, double flops_per_step, const SgemmTable& sgemm) {
  const Side& dltune = comparison.dltune;
  const Side& pytorch = comparison.pytorch;
  std::printf("\n%s\n", comparison.title.c_str());
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
      comparison.StepRatio());
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
  row("training GFLOP/s (formula below)", gflops(dltune), gflops(pytorch), "%.1f", std::nullopt);
  row("  % of its kernels' sgemm", share(gflops(dltune), sgemm.Of(dltune.core)),
      share(gflops(pytorch), sgemm.Of(pytorch.core)), "%.1f%%", std::nullopt);
  row("  % of the machine's sgemm peak", share(gflops(dltune), sgemm.peak), share(gflops(pytorch), sgemm.peak),
      "%.1f%%", std::nullopt);
  if (const auto ratio = comparison.StepRatio()) {
    if (comparison.goal) {
      std::printf("  goal: dltune training-loop steps/s >= %.1fx PyTorch's, each as a user runs it: %.2fx, %s\n",
                  kGoalRatio, *ratio, *ratio >= kGoalRatio ? "MET" : "NOT MET");
    } else {
      std::printf("  same kernels on both sides: dltune/PyTorch %.2fx\n", *ratio);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 2 && std::string(argv[1]) == kSgemmFlag) {
    std::printf("gflops=%.3f core=%s\n", SgemmGflops(), dltune::OpenBlasCore().c_str());
    return 0;
  }
  Options options;
  if (!ParseOptions(argc, argv, options)) {
    std::fprintf(stderr,
                 "usage: %s [--steps N (3000)] [--eval-every N (500)] [--threads N (1)] [--repeats N (1)] [--keep]\n",
                 argv[0]);
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
  std::printf(
      "dltune train bench: fashion_mnist_mlp 784-%lld-10, batch %lld, nesterov lr %s momentum %s, %lld steps, "
      "eval every %lld (10k train subset + 10k valid, eval batch %lld), %d thread(s); %ld cores, load %.2f; "
      "files in %s\n",
      static_cast<long long>(kHidden), static_cast<long long>(kBatchSize), kLearningRate, kMomentum,
      static_cast<long long>(options.steps), static_cast<long long>(options.eval_every),
      static_cast<long long>(kEvalBatchSize), options.threads, sysconf(_SC_NPROCESSORS_ONLN), LoadAverage(),
      dir.c_str());

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

  std::vector<Comparison> comparisons;
  Comparison as_run;
  as_run.title = "As users run them: dltune with its default DLTUNE_BLAS_KERNELS=auto, PyTorch as it is";
  as_run.dltune_environment = {{dltune::kBlasKernelsVariable, "auto"}};
  as_run.goal = true;
  comparisons.push_back(as_run);
  if (chosen) {
    Comparison forced;
    forced.title = "The same kernels forced on both sides: " + chosen->first + "=" + chosen->second;
    forced.dltune_environment = {*chosen};
    forced.pytorch_environment = {*chosen};
    comparisons.push_back(forced);
    Comparison own;
    own.title =
        "OpenBLAS's own choice on both sides (" + core + "): dltune with " + dltune::kBlasKernelsVariable + "=off";
    own.dltune_environment = {{dltune::kBlasKernelsVariable, "off"}};
    comparisons.push_back(own);
  }
  for (std::size_t i = 0; i < comparisons.size(); ++i) {
    Comparison& comparison = comparisons[i];
    std::printf("[%zu/%zu] %s\n", i + 1, comparisons.size(), comparison.title.c_str());
    for (int repeat = 0; repeat < options.repeats; ++repeat) {
      const std::string run_name = "dltune_" + std::to_string(i) + "_" + std::to_string(repeat);
      KeepFaster(comparison.dltune, RunDltune(options, dir / run_name, comparison.dltune_environment));
      KeepFaster(comparison.pytorch, RunPytorch(options, argv[0], comparison.pytorch_environment));
    }
  }

  const double flops_per_step = 6.0 * kBatchSize * (784.0 * kHidden + kHidden * 10.0);
  for (const Comparison& comparison : comparisons) PrintComparison(comparison, flops_per_step, sgemm);
  std::printf(
      "\nMLP FLOP per training step = 6 x batch x (784*%lld + %lld*10) = 6 x %lld x %lld = %.1f MFLOP (forward "
      "2 FLOP per multiply-add, backward twice the forward)\n",
      static_cast<long long>(kHidden), static_cast<long long>(kHidden), static_cast<long long>(kBatchSize),
      static_cast<long long>(784 * kHidden + kHidden * 10), flops_per_step / 1e6);

  bool ran = true;
  for (const Comparison& comparison : comparisons) {
    for (const auto& [name, side] :
         {std::pair<const char*, const Side*>{"dltune", &comparison.dltune}, {"PyTorch", &comparison.pytorch}}) {
      if (!side->problem.empty()) {
        std::printf("\ntrain bench: FAILED: %s (%s) could not be measured: %s\n", name, comparison.title.c_str(),
                    side->problem.c_str());
        ran = false;
      }
    }
  }
  if (options.keep) {
    std::printf("run directory kept: %s\n", dir.c_str());
  } else {
    std::error_code error;
    fs::remove_all(dir, error);
    if (error) std::fprintf(stderr, "train bench: cannot remove %s: %s\n", dir.c_str(), error.message().c_str());
  }
  return ran ? 0 : 1;
}
