#include "machine_limit.h"

#include "core/machine.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <torch/torch.h>

#include "core/machine.h"

namespace dltune::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWindows = 3;
constexpr double kWindowSeconds = 0.4;
constexpr std::int64_t kReferenceSize = 2048;
constexpr char kSelf[] = "/proc/self/exe";

double Since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double CpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// A line read from `in` without its newline; nullopt at end of file.
std::optional<std::string> ReadLine(std::FILE* in) {
  char* line = nullptr;
  std::size_t capacity = 0;
  const ssize_t length = getline(&line, &capacity, in);
  if (length < 0) {
    std::free(line);
    return std::nullopt;
  }
  std::string text(line, static_cast<std::size_t>(length));
  std::free(line);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

// A running worker of MeasureSgemm: its stdin to write to and its stdout+stderr to read.
struct Worker {
  pid_t pid = -1;
  std::FILE* to = nullptr;
  std::FILE* from = nullptr;
  std::string output;
};

Worker SpawnWorker(const std::vector<std::string>& argv, const Environment& environment) {
  int to_child[2];
  int from_child[2];
  // Close-on-exec: a later worker must not hold this one's stdin open (dup2 clears the flag on 0, 1 and 2).
  if (pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(to_child[0], STDIN_FILENO);
    dup2(from_child[1], STDOUT_FILENO);
    dup2(from_child[1], STDERR_FILENO);
    for (const int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
    for (const auto& [name, value] : environment) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execv(kSelf, args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", kSelf, std::strerror(errno));
    _exit(127);
  }
  close(to_child[0]);
  close(from_child[1]);
  return {pid, fdopen(to_child[1], "w"), fdopen(from_child[0], "r"), {}};
}

int Reap(pid_t pid) {
  int wait_status = 0;
  while (waitpid(pid, &wait_status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
}

std::string Shape(const Gemm& gemm) {
  return std::to_string(gemm.m) + " x " + std::to_string(gemm.k) + " x " + std::to_string(gemm.n);
}

std::string Cell(const std::optional<double>& value, const char* format) {
  if (!value) return "-";
  char text[64];
  std::snprintf(text, sizeof text, format, *value);
  return text;
}

}  // namespace

// ---- child processes ----------------------------------------------------------------------------------------

std::string ProcessRun::Output() const {
  std::string text;
  for (const auto& [at, line] : lines) text += line + "\n";
  return text;
}

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
  while (const auto line = ReadLine(in)) run.lines.emplace_back(Since(start), *line);
  std::fclose(in);
  run.status = Reap(pid);
  run.wall_seconds = Since(start);
  return run;
}

std::string EnvironmentText(const Environment& environment) {
  std::string text;
  for (const auto& [name, value] : environment) text += name + "=" + value + " ";
  return text;
}

Environment WithCoreReport(Environment environment) {
  environment.emplace_back("OPENBLAS_VERBOSE", "2");
  return environment;
}

std::string CoreIn(std::string_view text) {
  std::string core;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with("Core: ")) core = std::string(line.substr(6));
    at = end + 1;
  }
  while (!core.empty() && (core.back() == '\r' || core.back() == ' ')) core.pop_back();
  return core;
}

std::string CoreOf(const ProcessRun& run) { return CoreIn(run.Output()); }

// ---- the MLP's products -------------------------------------------------------------------------------------

double Mlp::Weights() const { return static_cast<double>(inputs * hidden + hidden * outputs); }

std::vector<Gemm> Mlp::TrainStep() const {
  // Linear: y = x W^T with W stored outputs x inputs; backward dx = dy W, dW = dy^T x.
  return {
      {"training: hidden layer forward", batch, inputs, hidden, false, true},
      {"training: output layer forward", batch, hidden, outputs, false, true},
      {"training: output layer input gradient", batch, outputs, hidden, false, false},
      {"training: output layer weight gradient", outputs, batch, hidden, true, false},
      {"training: hidden layer weight gradient", hidden, batch, inputs, true, false},
  };
}

std::vector<Gemm> Mlp::EvalBatch() const {
  return {
      {"evaluation: hidden layer forward", eval_batch, inputs, hidden, false, true},
      {"evaluation: output layer forward", eval_batch, hidden, outputs, false, true},
  };
}

std::vector<Gemm> Mlp::Measured() const {
  std::vector<Gemm> gemms = TrainStep();
  for (Gemm& gemm : EvalBatch()) gemms.push_back(std::move(gemm));
  gemms.push_back({"reference", kReferenceSize, kReferenceSize, kReferenceSize, false, false});
  return gemms;
}

double Mlp::TrainStepFormulaFlop() const { return 6.0 * static_cast<double>(batch) * Weights(); }

double Mlp::TrainStepProductFlop() const {
  double flop = 0;
  for (const Gemm& gemm : TrainStep()) flop += gemm.Flop();
  return flop;
}

double Mlp::EvalExampleFlop() const { return 2.0 * Weights(); }

std::optional<double> SgemmRates::Seconds(const Mlp& mlp, const MlpWork& work, bool per_cpu_second) const {
  double seconds = 0;
  const auto add = [&](const std::vector<Gemm>& gemms, double times) {
    for (const Gemm& gemm : gemms) {
      const auto found = gflops.find(gemm.name);
      if (found == gflops.end() || !(found->second > 0)) return false;
      seconds += times * gemm.Flop() / (found->second * 1e9);
    }
    return true;
  };
  // Evaluated examples in full batches: the last partial batch of a split costs its share, about.
  if (!add(mlp.TrainStep(), work.train_steps) ||
      !add(mlp.EvalBatch(), work.eval_examples / static_cast<double>(mlp.eval_batch))) {
    return std::nullopt;
  }
  if (per_cpu_second) {
    if (!(cpu_share > 0)) return std::nullopt;
    seconds *= cpu_share;
  }
  return seconds;
}

SgemmRates MeasureSgemm(const std::vector<Gemm>& gemms, const Environment& environment, int processes) {
  SgemmRates rates;
  rates.processes = processes;
  std::vector<std::string> argv = {kSelf, kSgemmWorkerFlag};
  for (const Gemm& gemm : gemms) {
    argv.push_back(std::to_string(gemm.m) + "," + std::to_string(gemm.k) + "," + std::to_string(gemm.n) + "," +
                   (gemm.a_transposed ? "t" : "n") + (gemm.b_transposed ? "t" : "n"));
  }
  std::vector<Worker> workers;
  for (int i = 0; i < processes; ++i) workers.push_back(SpawnWorker(argv, WithCoreReport(environment)));
  // Each worker loads LibTorch and warms up, then says "ready"; all start their windows at one time.
  bool ready = true;
  for (Worker& worker : workers) {
    bool said = false;
    while (const auto line = ReadLine(worker.from)) {
      worker.output += *line + "\n";
      if (*line == "ready") {
        said = true;
        break;
      }
    }
    ready = ready && said;
  }
  // A worker that died would make our write raise SIGPIPE: ignored while writing, restored after (children inherit
  // an ignored signal, and the benchmarks' later child processes must not).
  struct sigaction ignore {};
  struct sigaction previous {};
  ignore.sa_handler = SIG_IGN;
  sigaction(SIGPIPE, &ignore, &previous);
  const auto start = Clock::now() + std::chrono::milliseconds(50);
  const auto start_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  for (Worker& worker : workers) {
    if (ready) std::fprintf(worker.to, "%lld\n", static_cast<long long>(start_ns));
    std::fclose(worker.to);  // without a start time the worker reads end of file and exits
  }
  sigaction(SIGPIPE, &previous, nullptr);
  // sums[gemm][window]: GFLOP/s summed over the workers.
  std::vector<std::vector<double>> sums(gemms.size(), std::vector<double>(kWindows, 0.0));
  std::vector<std::vector<int>> reports(gemms.size(), std::vector<int>(kWindows, 0));
  double cpu_sum = 0;
  int cpu_count = 0;
  for (Worker& worker : workers) {
    while (const auto line = ReadLine(worker.from)) {
      worker.output += *line + "\n";
      unsigned gemm = 0;
      int window = 0;
      double gflops = 0;
      double cpu = 0;
      if (std::sscanf(line->c_str(), "rate %u %d %lf %lf", &gemm, &window, &gflops, &cpu) == 4 && gemm < gemms.size() &&
          window >= 0 && window < kWindows) {
        sums[gemm][static_cast<std::size_t>(window)] += gflops;
        ++reports[gemm][static_cast<std::size_t>(window)];
        cpu_sum += cpu;
        ++cpu_count;
        rates.cpu_share_most = std::max(rates.cpu_share_most, cpu);
      }
    }
    std::fclose(worker.from);
    const int status = Reap(worker.pid);
    if (rates.core.empty()) rates.core = CoreIn(worker.output);
    if (status != 0 && rates.problem.empty()) {
      rates.problem = "an sgemm process exited with status " + std::to_string(status) + ":\n" + worker.output;
    }
  }
  if (!rates.problem.empty()) return rates;
  if (cpu_count > 0) rates.cpu_share = cpu_sum / cpu_count;
  for (std::size_t i = 0; i < gemms.size(); ++i) {
    double best = 0;
    for (std::size_t window = 0; window < kWindows; ++window) {
      if (reports[i][window] == processes) best = std::max(best, sums[i][window]);
    }
    if (best > 0) rates.gflops[gemms[i].name] = best;
  }
  if (rates.gflops.size() != gemms.size()) rates.problem = "an sgemm process reported no rate for some products";
  return rates;
}

int RunSgemmWorker(int argc, char** argv) {
  torch::set_num_threads(1);
  try {
    torch::set_num_interop_threads(1);
  } catch (const c10::Error&) {
    // Already in use: keep its size.
  }
  struct Operands {
    Gemm gemm;
    torch::Tensor a, b, c;
  };
  std::vector<Operands> products;
  torch::manual_seed(0);
  for (int i = 2; i < argc; ++i) {
    long long size[3] = {0, 0, 0};
    char a_layout = 'n';
    char b_layout = 'n';
    if (std::sscanf(argv[i], "%lld,%lld,%lld,%c%c", &size[0], &size[1], &size[2], &a_layout, &b_layout) != 5) {
      std::fprintf(stderr, "sgemm worker: bad product %s\n", argv[i]);
      return 2;
    }
    const auto m = static_cast<std::int64_t>(size[0]);
    const auto k = static_cast<std::int64_t>(size[1]);
    const auto n = static_cast<std::int64_t>(size[2]);
    Operands product;
    product.gemm = {"", m, k, n, a_layout == 't', b_layout == 't'};
    product.a = product.gemm.a_transposed ? torch::randn({k, m}).t() : torch::randn({m, k});
    product.b = product.gemm.b_transposed ? torch::randn({n, k}).t() : torch::randn({k, n});
    product.c = torch::empty({m, n});
    for (int warm = 0; warm < 3; ++warm) torch::mm_out(product.c, product.a, product.b);
    products.push_back(std::move(product));
  }
  std::printf("ready\n");
  std::fflush(stdout);
  long long start_ns = 0;
  if (std::scanf("%lld", &start_ns) != 1) return 1;  // the parent gave up
  const Clock::time_point start{std::chrono::nanoseconds(start_ns)};
  const auto window = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kWindowSeconds));
  for (std::size_t i = 0; i < products.size(); ++i) {
    Operands& product = products[i];
    for (int w = 0; w < kWindows; ++w) {
      std::this_thread::sleep_until(start + window * static_cast<int>(i * kWindows + static_cast<std::size_t>(w)));
      const auto began = Clock::now();
      const double cpu_began = CpuSeconds();
      std::int64_t done = 0;
      // At least one product, and until the window's length has passed since it began.
      do {
        torch::mm_out(product.c, product.a, product.b);
        ++done;
      } while (Clock::now() < began + window);
      const double seconds = Since(began);
      std::printf("rate %zu %d %.6f %.3f\n", i, w, static_cast<double>(done) * product.gemm.Flop() / seconds / 1e9,
                  (CpuSeconds() - cpu_began) / seconds);
    }
  }
  return 0;
}

// ---- the machine's limit ------------------------------------------------------------------------------------

const MachineLimit::KernelSet* MachineLimit::Fastest(const MlpWork& work, bool all_cores, bool per_cpu_second) const {
  const KernelSet* fastest = nullptr;
  std::optional<double> least;
  for (const KernelSet& set : sets) {
    const auto seconds = (all_cores ? set.all_cores : set.one_core).Seconds(mlp, work, per_cpu_second);
    if (seconds && (!least || *seconds < *least)) {
      least = seconds;
      fastest = &set;
    }
  }
  return fastest;
}

const MachineLimit::KernelSet* MachineLimit::Find(const std::string& core) const {
  for (const KernelSet& set : sets) {
    if (set.core == core) return &set;
  }
  return nullptr;
}

std::optional<double> MachineLimit::Seconds(const MlpWork& work, bool all_cores, bool per_cpu_second) const {
  const KernelSet* set = Fastest(work, all_cores, per_cpu_second);
  if (set == nullptr) return std::nullopt;
  return (all_cores ? set->all_cores : set->one_core).Seconds(mlp, work, per_cpu_second);
}

double MachineLimit::CpuShare(bool all_cores) const {
  double least = 1;
  for (const KernelSet& set : sets) least = std::min(least, (all_cores ? set.all_cores : set.one_core).cpu_share);
  return least;
}

std::string MachineLimit::Problems() const {
  std::string problems;
  for (const KernelSet& set : sets) {
    for (const SgemmRates* rates : {&set.one_core, &set.all_cores}) {
      if (!rates->problem.empty()) problems += rates->problem + "\n";
    }
  }
  return problems;
}

MachineLimit MeasureMachineLimit(const Mlp& mlp, const std::vector<KernelUser>& users) {
  MachineLimit limit;
  limit.cpu = CpuModelName();
  limit.cores = AvailableCores();
  limit.mlp = mlp;
  // Environments measured so far, with the kernel set each ran, so that users with the same environment share one.
  std::vector<std::pair<Environment, std::string>> measured;
  for (const KernelUser& user : users) {
    const auto same = std::find_if(measured.begin(), measured.end(),
                                   [&](const auto& entry) { return entry.first == user.environment; });
    if (same != measured.end()) {
      for (MachineLimit::KernelSet& set : limit.sets) {
        if (set.core == same->second) set.users.push_back(user.who);
      }
      continue;
    }
    std::printf("  measuring sgemm for %s: %s1 process, then %d at once ...\n", user.who.c_str(),
                EnvironmentText(user.environment).c_str(), limit.cores);
    std::fflush(stdout);
    MachineLimit::KernelSet set;
    set.users.push_back(user.who);
    set.one_core = MeasureSgemm(mlp.Measured(), user.environment, 1);
    set.all_cores = MeasureSgemm(mlp.Measured(), user.environment, limit.cores);
    set.core = set.one_core.core;
    measured.emplace_back(user.environment, set.core);
    // Another environment that ends in the same kernel set: keep the first measurement.
    const auto known = std::find_if(limit.sets.begin(), limit.sets.end(),
                                    [&](const MachineLimit::KernelSet& other) { return other.core == set.core; });
    if (known != limit.sets.end()) {
      known->users.push_back(user.who);
    } else {
      limit.sets.push_back(std::move(set));
    }
  }
  return limit;
}

void PrintMachineLimit(const MachineLimit& limit) {
  const Mlp& mlp = limit.mlp;
  std::printf("\nThe machine's limit\n");
  std::printf("  CPU: %s (/proc/cpuinfo), %d cores available\n", limit.cpu.c_str(), limit.cores);
  for (const MachineLimit::KernelSet& set : limit.sets) {
    std::string users;
    for (const std::string& user : set.users) users += (users.empty() ? "" : ", ") + user;
    std::printf("  OpenBLAS kernels %s: %s\n", set.core.empty() ? "(none reported: not OpenBLAS?)" : set.core.c_str(),
                users.c_str());
  }
  std::printf(
      "  sgemm (torch::mm, float32) GFLOP/s: 1 core = 1 process of 1 thread; %d cores = %d such processes at once, "
      "summed; best of %d windows of %.1f s\n",
      limit.cores, limit.cores, kWindows, kWindowSeconds);
  std::printf("    %-40s %20s", "product", "m x k x n");
  for (const MachineLimit::KernelSet& set : limit.sets) {
    std::printf(" %18s %18s", (set.core + " 1 core").c_str(),
                (set.core + " " + std::to_string(limit.cores) + " cores").c_str());
  }
  std::printf("\n");
  const auto rate = [](const SgemmRates& rates, const std::string& name) -> std::optional<double> {
    const auto found = rates.gflops.find(name);
    return found == rates.gflops.end() ? std::nullopt : std::optional<double>(found->second);
  };
  for (const Gemm& gemm : mlp.Measured()) {
    std::printf("    %-40s %20s", gemm.name.c_str(), Shape(gemm).c_str());
    for (const MachineLimit::KernelSet& set : limit.sets) {
      std::printf(" %18s %18s", Cell(rate(set.one_core, gemm.name), "%.1f").c_str(),
                  Cell(rate(set.all_cores, gemm.name), "%.1f").c_str());
    }
    std::printf("\n");
  }
  // One training step and one evaluated example at each kernel set's rates, as seconds and as effective GFLOP/s.
  const auto limit_row = [&](const char* name, const MlpWork& work, double flop, bool per_cpu_second) {
    std::printf("    %-61s", name);
    for (const MachineLimit::KernelSet& set : limit.sets) {
      for (const SgemmRates* rates : {&set.one_core, &set.all_cores}) {
        const auto seconds = rates->Seconds(mlp, work, per_cpu_second);
        std::printf(" %18s", seconds ? Cell(flop / *seconds / 1e9, "%.1f").c_str() : "-");
      }
    }
    std::printf("\n");
  };
  const MlpWork eval_batch{0, static_cast<double>(mlp.eval_batch)};
  const double eval_batch_flop = mlp.EvalExampleFlop() * static_cast<double>(mlp.eval_batch);
  limit_row("one training step (its 5 products), effective", {1, 0}, mlp.TrainStepProductFlop(), false);
  limit_row("one evaluation batch (its 2 products), effective", eval_batch, eval_batch_flop, false);
  limit_row("the same per CPU second: a training step", {1, 0}, mlp.TrainStepProductFlop(), true);
  limit_row("the same per CPU second: an evaluation batch", eval_batch, eval_batch_flop, true);
  for (const MachineLimit::KernelSet& set : limit.sets) {
    std::printf(
        "    CPU seconds per second of each %s process, mean: %.2f on 1 core, %.2f on %d cores (1.00 with a core to "
        "itself; less: other load shared the cores, the GFLOP/s measured are below the hardware's and those per CPU "
        "second estimate it)\n",
        set.core.c_str(), set.one_core.cpu_share, set.all_cores.cpu_share, limit.cores);
    for (const SgemmRates* rates : {&set.one_core, &set.all_cores}) {
      if (rates->cpu_share_most > 1.2) {
        std::printf("    note: a %s process used %.2f CPU seconds per second: more than one thread\n", set.core.c_str(),
                    rates->cpu_share_most);
      }
    }
  }
  std::printf(
      "  FLOP per training step: 6 x batch x weights = 6 x %lld x %.0f = %.1f M by the usual count; the products a "
      "step runs: %.1f M (the hidden layer's input gradient is never computed: the input needs none)\n",
      static_cast<long long>(mlp.batch), mlp.Weights(), mlp.TrainStepFormulaFlop() / 1e6,
      mlp.TrainStepProductFlop() / 1e6);
  std::printf("  FLOP per evaluated example: 2 x weights = %.3f M (batches of %lld)\n", mlp.EvalExampleFlop() / 1e6,
              static_cast<long long>(mlp.eval_batch));
  if (const MachineLimit::KernelSet* fastest = limit.Fastest({1, 0}, false)) {
    const auto step = fastest->one_core.Seconds(mlp, {1, 0});
    const auto steps_all = fastest->all_cores.Seconds(mlp, {1, 0});
    const auto step_cpu = fastest->one_core.Seconds(mlp, {1, 0}, true);
    const auto steps_all_cpu = fastest->all_cores.Seconds(mlp, {1, 0}, true);
    const auto per_second = [](const std::optional<double>& seconds) { return seconds ? 1 / *seconds : 0.0; };
    std::printf(
        "  limit (%s kernels, the products alone): %.1f training steps/s on 1 core (%.3f ms per step), %.1f on %d "
        "cores; per CPU second: %.1f and %.1f\n",
        fastest->core.c_str(), per_second(step), step ? *step * 1e3 : 0.0, per_second(steps_all), limit.cores,
        per_second(step_cpu), per_second(steps_all_cpu));
  }
}

}  // namespace dltune::bench
