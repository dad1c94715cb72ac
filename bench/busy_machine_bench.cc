// A shared, busy machine: dltune's training must not collapse when other processes (other runners, other users) want
// the cores too. OpenMP threads that spin while they wait take the cores from everything else; dltune's processes and
// trials wait passively (OMP_WAIT_POLICY=PASSIVE) unless the environment chooses otherwise (docs/parallel-layout.md,
// "A shared machine").
//
// One invocation, on an idle machine and then under a background load of --load busy-looping processes (default 3 per
// core, a load average of about 3 x cores + dltune's own):
//   1. `dltune run` of a small Fashion-MNIST study (--trials MLP trials of --steps steps, layout measured as users run
//      it) alone, then 2 and then 4 of them at once (each its own store and run_dir): the wall time of the group
//      against the time the same runs take one after another (k x one alone). Goal: at most 2x (no collapse; about
//      1x or below means the machine was shared well);
//   2. `dltune train fashion_mnist_mlp --steps --steps` with its default threads (auto: the cores other processes
//      leave idle) against `--threads 1`. Goal: at most 2x the one-thread time, idle and busy;
//   3. for reference, the same training on every core waiting passively (the policy set beforehand: no restart) and
//      spinning as dltune's threads did before (GOMP_SPINCOUNT=300000, libgomp's own default when no policy is set;
//      dltune leaves a chosen GOMP_SPINCOUNT alone), and PyTorch (bench/peers/pytorch_mlp.py) with every core and
//      with one: what the wait policy and the auto threads are worth. Cut off at --timeout seconds.
// Prints the CPU, the cores, each figure and its ratio; exits 0 when everything ran.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "core/files.h"
#include "core/machine.h"
#include "machine_limit.h"

namespace {

namespace fs = std::filesystem;
using dltune::bench::Environment;
using dltune::bench::ProcessRun;
using dltune::bench::RunTimed;

struct Options {
  int load = 0;  // background processes; 0: 3 per core
  int trials = 6;
  int steps = 300;
  int timeout = 300;
  std::string python = "/usr/bin/python3";  // Debian's, with python3-torch; $DLTUNE_PYTHON or --python to change
};

// Busy-looping processes until Stop().
class BackgroundLoad {
 public:
  explicit BackgroundLoad(int processes) {
    for (int i = 0; i < processes; ++i) {
      const pid_t pid = ::fork();
      if (pid == 0) {
        volatile unsigned long spin = 0;
        while (true) spin = spin + 1;
      }
      if (pid > 0) pids_.push_back(pid);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the scheduler sees them before timing starts
  }
  ~BackgroundLoad() {
    for (const pid_t pid : pids_) ::kill(pid, SIGKILL);
    for (const pid_t pid : pids_) ::waitpid(pid, nullptr, 0);
  }
  BackgroundLoad(const BackgroundLoad&) = delete;
  BackgroundLoad& operator=(const BackgroundLoad&) = delete;

 private:
  std::vector<pid_t> pids_;
};

std::string Dltune() { return DLTUNE_CLI_PATH; }

// Writes the study every runner runs (its own copy each, under `dir`).
fs::path WriteStudy(const fs::path& dir, const Options& options) {
  fs::create_directories(dir);
  const fs::path spec = dir / "study.yaml";
  std::FILE* out = std::fopen(spec.c_str(), "w");
  std::fprintf(out,
               "name: shared\nworkload: {name: fashion_mnist_mlp, args: {hidden_sizes: [128]}}\n"
               "max_train_steps: %d\ntrials: %d\nrun_dir: %s\n"
               "training: {eval_every_steps: %d, train_eval_examples: 2000}\n"
               "space:\n  optimizer: nesterov\n  momentum: 0.9\n  batch_size: 128\n"
               "  learning_rate: {min: 0.01, max: 0.3, scale: log}\n",
               options.steps, options.trials, (dir / "runs").c_str(), options.steps);
  std::fclose(out);
  return spec;
}

// `count` runs of the study at once, each in its own directory; the group's wall seconds (-1 when one failed).
double RunsAtOnce(const fs::path& root, int count, const Options& options) {
  std::vector<std::thread> threads;
  std::vector<ProcessRun> runs(static_cast<std::size_t>(count));
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    const fs::path dir = root / ("runner_" + std::to_string(i));
    dltune::RemoveTree(dir);
    const fs::path spec = WriteStudy(dir, options);
    threads.emplace_back([&runs, i, dir, spec, &options] {
      runs[static_cast<std::size_t>(i)] =
          RunTimed({"timeout", std::to_string(options.timeout), Dltune(), "run", spec.string(), "--no-report",
                    "--storage", "sqlite://" + (dir / "dltune.db").string()},
                   {});
    });
  }
  for (auto& thread : threads) thread.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const ProcessRun& run : runs) {
    if (run.status != 0) {
      std::printf("    a run ended with status %d:\n%s\n", run.status, run.Output().c_str());
      return -1;
    }
  }
  return seconds;
}

// `dltune train` of the MLP with `threads` (0: its default), or the PyTorch peer; wall seconds, -1 past the timeout.
double Train(const fs::path& root, int threads, const Environment& environment, const Options& options,
             bool pytorch = false) {
  std::vector<std::string> argv = {"timeout", std::to_string(options.timeout)};
  if (pytorch) {
    const int cores = dltune::AvailableCores();
    for (const std::string& arg :
         {options.python, std::string(DLTUNE_SOURCE_DIR) + "/bench/peers/pytorch_mlp.py", std::string("--steps"),
          std::to_string(options.steps), std::string("--eval-every"), std::to_string(options.steps),
          std::string("--threads"), std::to_string(threads == 0 ? cores : threads)}) {
      argv.push_back(arg);
    }
  } else {
    const fs::path out = root / ("train_" + std::to_string(threads));
    dltune::RemoveTree(out);
    for (const std::string& arg : {Dltune(), std::string("train"), std::string("fashion_mnist_mlp"),
                                   std::string("--steps"), std::to_string(options.steps), std::string("--eval-every"),
                                   std::to_string(options.steps), std::string("--out"), out.string()}) {
      argv.push_back(arg);
    }
    if (threads > 0) {
      argv.push_back("--threads");
      argv.push_back(std::to_string(threads));
    }
  }
  const ProcessRun run = RunTimed(argv, environment);
  if (run.status == 124) return -1;
  if (run.status != 0) std::printf("    ended with status %d:\n%s\n", run.status, run.Output().c_str());
  return run.wall_seconds;
}

std::string Seconds(double seconds, int timeout) {
  if (seconds < 0) return "past " + std::to_string(timeout) + " s";
  char text[32];
  std::snprintf(text, sizeof text, "%.2f s", seconds);
  return text;
}

std::string Ratio(double value, double base) {
  if (value < 0 || base <= 0) return "-";
  char text[32];
  std::snprintf(text, sizeof text, "%.2fx", value / base);
  return text;
}

void Measure(const fs::path& root, const Options& options, const char* machine) {
  std::printf("\n== %s ==\n", machine);
  const double alone = RunsAtOnce(root, 1, options);
  std::printf("  dltune run, 1 alone:            %s\n", Seconds(alone, options.timeout).c_str());
  for (const int count : {2, 4}) {
    const double together = RunsAtOnce(root, count, options);
    std::printf("  dltune run, %d at once:          %s  (%s the %d runs one after another; goal <= 2x)\n", count,
                Seconds(together, options.timeout).c_str(), Ratio(together, count * alone).c_str(), count);
  }
  const int cores = dltune::AvailableCores();
  const double one = Train(root, 1, {}, options);
  const double automatic = Train(root, 0, {}, options);
  const double passive = Train(root, cores, {{"OMP_WAIT_POLICY", "PASSIVE"}}, options);
  const double spinning = Train(root, cores, {{"GOMP_SPINCOUNT", "300000"}}, options);
  std::printf("  dltune train, --threads 1:      %s\n", Seconds(one, options.timeout).c_str());
  std::printf("  dltune train, default threads:  %s  (%s the one-thread time; goal <= 2x)\n",
              Seconds(automatic, options.timeout).c_str(), Ratio(automatic, one).c_str());
  std::printf("  every core, waiting passively:  %s  (%s; --threads %d, OMP_WAIT_POLICY=PASSIVE set beforehand)\n",
              Seconds(passive, options.timeout).c_str(), Ratio(passive, one).c_str(), cores);
  std::printf("  every core, spinning:           %s  (%s; --threads %d, GOMP_SPINCOUNT=300000: libgomp's default)\n",
              Seconds(spinning, options.timeout).c_str(), Ratio(spinning, one).c_str(), cores);
  const double peer_one = Train(root, 1, {}, options, true);
  const double peer_every = Train(root, 0, {}, options, true);
  std::printf("  PyTorch, 1 thread:              %s\n", Seconds(peer_one, options.timeout).c_str());
  std::printf("  PyTorch, every core:            %s  (%s its one-thread time)\n",
              Seconds(peer_every, options.timeout).c_str(), Ratio(peer_every, peer_one).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (const char* python = std::getenv("DLTUNE_PYTHON"); python != nullptr && *python != '\0') options.python = python;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* value = argv[i + 1];
    if (flag == "--load") {
      options.load = std::atoi(value);
    } else if (flag == "--trials") {
      options.trials = std::atoi(value);
    } else if (flag == "--steps") {
      options.steps = std::atoi(value);
    } else if (flag == "--timeout") {
      options.timeout = std::atoi(value);
    } else if (flag == "--python") {
      options.python = value;
    } else {
      std::fprintf(stderr, "usage: dltune_bench_busy [--load N] [--trials N] [--steps N] [--timeout S] [--python P]\n");
      return 2;
    }
  }
  const int cores = dltune::AvailableCores();
  if (options.load <= 0) options.load = 3 * cores;
  std::printf("CPU: %s, %d cores; OMP_WAIT_POLICY %s; a study of %d trials x %d steps\n",
              dltune::CpuModelName().c_str(), cores,
              std::getenv("OMP_WAIT_POLICY") ? std::getenv("OMP_WAIT_POLICY") : "unset (dltune sets PASSIVE)",
              options.trials, options.steps);
  const fs::path root = fs::temp_directory_path() / ("dltune_bench_busy_" + std::to_string(::getpid()));
  Measure(root, options, "idle machine");
  {
    const BackgroundLoad load(options.load);
    Measure(
        root, options,
        (std::to_string(options.load) + " busy-looping processes beside (load ~" + std::to_string(options.load) + ")")
            .c_str());
  }
  dltune::RemoveTree(root);
  return 0;
}
