// The start-up of the commands that do not train: `dltune --version`, `studies`, `show STUDY` and `next STUDY` on a
// store holding the quickstart study (4 trials, filled through the library), each run --runs times (21 by default)
// after one warm-up run; the median wall time of each, against the same command with the trainer module (LibTorch)
// preloaded, as every command of a dltune without the trainer's seam started. Prints the CPU and the load average
// before and after. Goal: each median under 50 ms on an idle machine. Usage: dltune_bench_startup [--runs N]; exits 1
// when a command fails.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../tests/quickstart_store.h"
#include "core/clock.h"
#include "core/files.h"
#include "dltune/store/store.h"

namespace {

namespace fs = std::filesystem;

// Runs dltune with `arguments` (split at spaces), its output discarded, with the trainer module preloaded when
// `preload` is not empty; its wall time in seconds, or -1 when it failed.
double Timed(const std::string& arguments, const std::string& preload) {
  std::vector<std::string> words = {DLTUNE_CLI_PATH};
  std::istringstream split(arguments);
  for (std::string word; split >> word;) words.push_back(word);
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);
  const double start = dltune::SteadySeconds();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    if (!preload.empty()) ::setenv("LD_PRELOAD", preload.c_str(), 1);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  const double elapsed = dltune::SteadySeconds() - start;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? elapsed : -1;
}

// The median wall time of `runs` runs after one unmeasured run; -1 when one failed.
double Median(const std::string& arguments, const std::string& preload, int runs) {
  if (Timed(arguments, preload) < 0) return -1;
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const double time = Timed(arguments, preload);
    if (time < 0) return -1;
    times.push_back(time);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

std::string FirstLineOf(const std::string& path, const std::string& prefix) {
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return line.substr(line.find(':') + 1);
  }
  return " unknown";
}

std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 21;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--runs") runs = std::max(1, std::atoi(argv[i + 1]));
  }
  const fs::path dir = fs::temp_directory_path() / ("dltune_bench_startup_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string url = "sqlite://" + (dir / "runs.db").string();
  dltune::test::FillQuickstartStore(url);  // 2 trials completed, 1 infeasible, 1 waiting

  const std::vector<std::pair<std::string, std::string>> commands = {
      {"dltune --version", "--version"},
      {"dltune studies", "studies --storage " + url},
      {"dltune show quickstart", "show quickstart --storage " + url},
      {"dltune next quickstart", "next quickstart --storage " + url},
  };
  std::printf("dltune start-up: median of %d runs each (after one more), CPU%s, load average %s\n", runs,
              FirstLineOf("/proc/cpuinfo", "model name").c_str(), LoadAverage().c_str());
  std::printf("  %-24s %10s %24s   %s\n", "command", "median ms", "LibTorch preloaded, ms", "goal < 50 ms (idle)");
  bool failed = false;
  for (const auto& [name, arguments] : commands) {
    const double plain = Median(arguments, "", runs);
    const double with_torch = Median(arguments, DLTUNE_TRAINER_MODULE_PATH, runs);
    failed = failed || plain < 0 || with_torch < 0;
    std::printf("  %-24s %10.1f %24.1f   %s\n", name.c_str(), plain * 1e3, with_torch * 1e3,
                plain < 0 ? "failed" : (plain < 0.05 ? "met" : "not met"));
  }
  std::printf("load average after: %s\n", LoadAverage().c_str());
  dltune::RemoveTree(dir);
  return failed ? 1 : 0;
}
