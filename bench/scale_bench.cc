// Costs that must not grow with a study's size (the most a study has is 1,000,000 trials), each measured on a small
// study and on a million-trial one in the same run, with the ratio:
//   1. the runner's overhead per trial: `dltune run --parallel 1` on a study of 1,000 and of 1,000,000 trials of a
//      trivial shell-script program, for the first 200 trials of each (the 201st fails, and
//      --max-consecutive-failures 1 stops the run there). Per trial = (wall of that run - wall of the same command
//      again, which starts, runs one failing trial and stops) / 200;
//   2. reading a study whose trials are all made and completed: 10,000 and 1,000,000 of them, filled through the
//      store (its rows written in bulk), then `dltune show STUDY`, `dltune studies` and the dashboard's first page
//      (StudiesJson, what /api/studies answers), each timed.
// Goal: every ratio (million / small) below 2. Usage: dltune_bench_scale; exits 1 when something could not run.
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/clock.h"
#include "core/files.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"
#include "store/tracking.h"

namespace {

namespace fs = std::filesystem;
using dltune::SteadySeconds;

// Peak resident memory (kB) of the last command Timed ran, and of what it waited for.
long last_peak_kb = 0;

// Runs a shell command; its wall time in seconds, or a negative number when it exited with another status.
double Timed(const std::string& command, int expected_status = 0) {
  const double start = SteadySeconds();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  const double elapsed = SteadySeconds() - start;
  last_peak_kb = usage.ru_maxrss;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != expected_status) {
    std::fprintf(stderr, "failed (status %d): %s\n", status, command.c_str());
    return -1;
  }
  return elapsed;
}

constexpr int kTrialsRun = 200;

// Per-trial overhead of the first kTrialsRun trials of a study of `trials` trials; `peak_kb` gets the runner's peak
// memory.
double RunnerOverhead(const fs::path& dir, int trials, long& peak_kb) {
  const std::string name = "run" + std::to_string(trials);
  const fs::path script = dir / "trial.sh";
  std::ofstream(script) << "if [ \"$1\" -ge " << kTrialsRun << " ]; then exit 3; fi\n"
                        << "printf '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":"
                           "0.5}}\\n' >> \"$DLTUNE_REPORT\"\n";
  const fs::path spec = dir / (name + ".yaml");
  std::ofstream(spec) << "name: " << name << "\ncommand: sh " << script.string()
                      << " {trial_number}\nmax_train_steps: 1\ntrials: " << trials
                      << "\nspace:\n  learning_rate: {min: 0.001, max: 1, scale: log}\n";
  const std::string run = "cd " + dir.string() + " && exec " + DLTUNE_CLI_PATH + " run " + spec.string() +
                          " --parallel 1 --max-consecutive-failures 1 --no-report --storage sqlite://" +
                          (dir / (name + ".db")).string() + " > " + (dir / (name + ".out")).string() + " 2>&1";
  const double first = Timed(run, 3);
  peak_kb = last_peak_kb;
  const double again = Timed(run, 3);
  if (first < 0 || again < 0) return -1;
  return (first - again) / kTrialsRun;
}

// A store holding one study of `trials` made and completed trials. Returns false when it could not be made.
bool FillStore(const fs::path& db, int trials) {
  const std::string spec_text =
      "name: big\ncommand: 'true'\nmax_train_steps: 100\nscientific_mode: joint\ntrials: " + std::to_string(trials) +
      "\nspace:\n  optimizer: {values: [sgd, adam], role: scientific}\n"
      "  learning_rate: {min: 0.001, max: 1, scale: log}\n";
  const dltune::StudySpec spec = dltune::ParseStudySpec(spec_text, "big.yaml");
  const dltune::StudyPlan plan(spec);
  {
    auto store = dltune::OpenStore("sqlite://" + db.string());
    const dltune::StudyRecord study = store->CreateStudy(dltune::DescribeNewStudy(spec, "dltune run big.yaml"));
    std::vector<dltune::NewTrial> chunk;
    for (int n = 0; n < trials; ++n) {
      const dltune::PlannedTrial t = plan.Trial(static_cast<std::uint64_t>(n));
      chunk.push_back({t.number, t.substudy, "all", t.params, static_cast<std::uint64_t>(n)});
      if (chunk.size() == 20000 || n + 1 == trials) {
        store->AddTrials(study.id, chunk);
        chunk.clear();
      }
    }
  }
  // Completing a million trials one transaction each would take longer than the rest of the benchmark: one UPDATE.
  sqlite3* handle = nullptr;
  if (sqlite3_open(db.c_str(), &handle) != SQLITE_OK) return false;
  const int code = sqlite3_exec(handle,
                                "UPDATE trials SET state = 'completed', worker = 'bench', best_step = 100, "
                                "best_value = (abs(random()) % 100000) / 100000.0, final_value = 0.5, "
                                "started_at = 1.7e9, ended_at = 1.7e9 + 60",
                                nullptr, nullptr, nullptr);
  sqlite3_close(handle);
  return code == SQLITE_OK;
}

struct ReadTimes {
  double show = -1, studies = -1, dashboard = -1;
};

ReadTimes TimeReads(const fs::path& db) {
  ReadTimes times;
  const std::string storage = " --storage sqlite://" + db.string() + " > /dev/null";
  times.show = Timed(std::string(DLTUNE_CLI_PATH) + " show big" + storage);
  times.studies = Timed(std::string(DLTUNE_CLI_PATH) + " studies" + storage);
  auto store = dltune::OpenStoreReadOnly("sqlite://" + db.string());
  const double start = SteadySeconds();
  const std::size_t bytes = dltune::StudiesJson(*store).dump().size();
  times.dashboard = bytes > 0 ? SteadySeconds() - start : -1;
  return times;
}

void Row(const char* what, double small, double large, const char* unit, double scale) {
  std::printf("  %-44s %12.1f %12.1f %s   ratio %.2f (goal < 2: %s)\n", what, small * scale, large * scale, unit,
              large / small, large / small < 2 ? "met" : "NOT met");
}

}  // namespace

int main() {
  const fs::path dir = fs::temp_directory_path() / ("dltune_bench_scale_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::printf("runner overhead per trial, first %d trials, --parallel 1 ...\n", kTrialsRun);
  std::fflush(stdout);
  long small_peak = 0, large_peak = 0;
  const double small_run = RunnerOverhead(dir, 1000, small_peak);
  const double large_run = RunnerOverhead(dir, 1000000, large_peak);
  std::printf("filling stores of 10,000 and 1,000,000 completed trials ...\n");
  std::fflush(stdout);
  const bool filled = FillStore(dir / "small.db", 10000) && FillStore(dir / "large.db", 1000000);
  if (small_run < 0 || large_run < 0 || !filled) {
    std::fprintf(stderr, "outputs kept in %s\n", dir.c_str());
    return 1;
  }
  const ReadTimes small = TimeReads(dir / "small.db");
  const ReadTimes large = TimeReads(dir / "large.db");
  if (small.show < 0 || large.show < 0 || small.studies < 0 || large.studies < 0) {
    std::fprintf(stderr, "outputs kept in %s\n", dir.c_str());
    return 1;
  }
  std::printf("\n  %-44s %12s %12s\n", "", "small", "1,000,000");
  Row("runner overhead per trial (1,000-trial study)", small_run, large_run, "ms", 1000);
  Row("runner's peak memory", static_cast<double>(small_peak), static_cast<double>(large_peak), "MB", 1.0 / 1024);
  Row("dltune show STUDY (10,000 completed trials)", small.show, large.show, "ms", 1000);
  Row("dltune studies", small.studies, large.studies, "ms", 1000);
  Row("dashboard first page (/api/studies)", small.dashboard, large.dashboard, "ms", 1000);
  std::printf("(dltune show and studies include the command's start-up, about the same in both)\n");
  dltune::RemoveTree(dir);
  return 0;
}
