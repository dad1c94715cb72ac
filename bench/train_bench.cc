// Training throughput: `dltune train fashion_mnist_mlp` side by side with the same training in PyTorch, and the share
// of the machine's single-thread sgemm peak that dltune's training reaches.
//
// One invocation:
//   1. measures the sgemm peak: torch::mm of two 2048 x 2048 float32 matrices on 1 thread, best of 7 (2 n^3 FLOP each);
//   2. runs the dltune binary: fashion_mnist_mlp (784-256-10, ReLU), batch 128, nesterov, learning rate 0.05,
//      momentum 0.9, --steps 3000, --eval-every 500 (a fixed 10,000-example train subset and the full 10,000-example
//      valid split, eval batch 256), --threads 1, metrics and checkpoints in a fresh directory under $TMPDIR;
//   3. runs bench/peers/pytorch_mlp.py with the same model, split, batch size, steps, evaluation schedule and threads;
//   4. prints a table: training-loop steps/s, whole-run seconds, final valid error of each, and the ratios.
// Training-loop time excludes evaluations. For PyTorch the peer measures it itself. For dltune it is the first log
// interval's step_time from metrics.jsonl plus, for every later interval, the time from the previous "eval at step"
// line to the interval's "step" line on dltune's stdout (so dltune's predictions, checkpoint writes and metric flushes
// count as training time, against it). Whole-run seconds are process wall times, spawn to exit, startup included.
// MLP FLOP per training step = 6 x batch x (784*256 + 256*10): forward 2 FLOP per multiply-add, backward twice that.
// Exits 0 when everything ran (the 1.3x goal met or not: the table says which); 1 when something could not run.
// The peer's interpreter is $DLTUNE_PYTHON, else /usr/bin/python3 (Debian's python3-torch, the same LibTorch 1.13,
// is importable only there), else python3 on PATH. Flags: --steps N, --eval-every N, --threads N, --keep (keep the
// run directory).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr double kGoalRatio = 1.3;  // dltune's training-loop steps/s over PyTorch's
constexpr std::int64_t kBatchSize = 128;
constexpr std::int64_t kHidden = 256;
constexpr std::int64_t kEvalBatchSize = 256;  // dltune's default: twice the training batch
constexpr std::int64_t kSgemmSize = 2048;
constexpr int kSgemmRepeats = 7;
constexpr char kLearningRate[] = "0.05";
constexpr char kMomentum[] = "0.9";

struct Options {
  std::int64_t steps = 3000;
  std::int64_t eval_every = 500;
  int threads = 1;
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

// Runs argv[0] with its stdout and stderr piped to us; returns when it has exited. Lines are timestamped on arrival.
ProcessRun RunTimed(const std::vector<std::string>& argv, bool echo) {
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
    if (echo) std::printf("    | %s\n", text.c_str());
    std::fflush(stdout);
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
  std::string problem;                 // why it could not run; empty when it ran
};

// ---- sgemm peak ---------------------------------------------------------------------------------------------

double SgemmPeakGflops() {
  torch::set_num_threads(1);
  torch::manual_seed(0);
  const torch::Tensor a = torch::randn({kSgemmSize, kSgemmSize}, torch::kFloat32);
  const torch::Tensor b = torch::randn({kSgemmSize, kSgemmSize}, torch::kFloat32);
  torch::Tensor c = torch::mm(a, b);  // warm-up
  double best = 1e30;
  for (int i = 0; i < kSgemmRepeats; ++i) {
    const auto start = Clock::now();
    torch::mm_out(c, a, b);
    best = std::min(best, std::chrono::duration<double>(Clock::now() - start).count());
  }
  const auto n = static_cast<double>(kSgemmSize);
  return 2.0 * n * n * n / best / 1e9;
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

Side RunDltune(const Options& options, const fs::path& dir) {
  Side side;
  const fs::path out = dir / "dltune";
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
  std::printf("  %s\n", command.c_str());
  const ProcessRun run = RunTimed(argv, false);
  if (run.status != 0) {
    side.problem = "dltune train exited with status " + std::to_string(run.status) + ":\n" + run.Output();
    return side;
  }
  side.wall_seconds = run.wall_seconds;

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

Side RunPytorch(const Options& options, const char* argv0) {
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
  std::printf("  %s\n", command.c_str());
  const ProcessRun run = RunTimed(argv, false);
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
  std::printf("  peer: %s\n", summary.c_str());
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
      } else {
        return false;
      }
    } catch (const std::exception&) {
      return false;
    }
  }
  return options.steps > 0 && options.eval_every > 0 && options.threads > 0;
}

double LoadAverage() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, options)) {
    std::fprintf(stderr, "usage: %s [--steps N (3000)] [--eval-every N (500)] [--threads N (1)] [--keep]\n", argv[0]);
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

  std::printf("[1/3] sgemm peak: torch::mm %lldx%lld float32, 1 thread, best of %d ...\n",
              static_cast<long long>(kSgemmSize), static_cast<long long>(kSgemmSize), kSgemmRepeats);
  const double peak_gflops = SgemmPeakGflops();
  std::printf("[2/3] dltune ...\n");
  const Side dltune = RunDltune(options, dir);
  std::printf("[3/3] PyTorch %s ...\n", TORCH_VERSION);
  const Side pytorch = RunPytorch(options, argv[0]);

  const double flops_per_step = 6.0 * kBatchSize * (784.0 * kHidden + kHidden * 10.0);
  const std::optional<double> step_ratio = Ratio(dltune.steps_per_second, pytorch.steps_per_second);
  const std::optional<double> wall_ratio = Ratio(pytorch.wall_seconds, dltune.wall_seconds);

  std::printf("\n%-44s %12s %12s %16s\n", "figure", "dltune", "PyTorch", "dltune/PyTorch");
  std::printf("%s\n", std::string(87, '-').c_str());
  std::printf("%-44s %12s %12s %15sx\n", "training loop steps/s (evals excluded)",
              Cell(dltune.steps_per_second, "%.1f").c_str(), Cell(pytorch.steps_per_second, "%.1f").c_str(),
              Cell(step_ratio, "%.2f").c_str());
  std::printf("%-44s %12s %12s %15sx\n", "training loop seconds", Cell(dltune.train_seconds, "%.2f").c_str(),
              Cell(pytorch.train_seconds, "%.2f").c_str(),
              Cell(Ratio(pytorch.train_seconds, dltune.train_seconds), "%.2f").c_str());
  std::printf("%-44s %12s %12s %15sx\n", "whole run seconds (process wall, speedup)",
              Cell(dltune.wall_seconds, "%.2f").c_str(), Cell(pytorch.wall_seconds, "%.2f").c_str(),
              Cell(wall_ratio, "%.2f").c_str());
  std::printf("%-44s %12s %12s\n", "final valid error rate (10,000 examples)", Cell(dltune.valid_error, "%.4f").c_str(),
              Cell(pytorch.valid_error, "%.4f").c_str());
  std::printf("%-44s %12s %12s\n", "final train error rate (10,000-example subset)",
              Cell(dltune.train_error, "%.4f").c_str(), Cell(pytorch.train_error, "%.4f").c_str());

  std::printf("\nsgemm peak, 1 thread (torch::mm %lld^3 float32, best of %d): %.1f GFLOP/s\n",
              static_cast<long long>(kSgemmSize), kSgemmRepeats, peak_gflops);
  std::printf("MLP FLOP per training step = 6 x batch x (784*%lld + %lld*10) = 6 x %lld x %lld = %.1f MFLOP\n",
              static_cast<long long>(kHidden), static_cast<long long>(kHidden), static_cast<long long>(kBatchSize),
              static_cast<long long>(784 * kHidden + kHidden * 10), flops_per_step / 1e6);
  for (const auto& [name, side] : {std::pair<const char*, const Side*>{"dltune", &dltune}, {"PyTorch", &pytorch}}) {
    if (side->steps_per_second) {
      const double gflops = *side->steps_per_second * flops_per_step / 1e9;
      std::printf("%-7s training: %.1f GFLOP/s = %.1f%% of the sgemm peak\n", name, gflops,
                  100.0 * gflops / peak_gflops);
    }
  }

  bool ran = true;
  for (const auto& [name, side] : {std::pair<const char*, const Side*>{"dltune", &dltune}, {"PyTorch", &pytorch}}) {
    if (!side->problem.empty()) {
      std::printf("\ntrain bench: FAILED: %s could not be measured: %s\n", name, side->problem.c_str());
      ran = false;
    }
  }
  if (step_ratio) {
    std::printf("\ngoal: dltune training-loop steps/s >= %.1fx PyTorch's: %.2fx, %s\n", kGoalRatio, *step_ratio,
                *step_ratio >= kGoalRatio ? "MET" : "NOT MET");
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
