// The runner: its overhead per trial, and the quickstart study end to end against Optuna + PyTorch.
//
// One invocation:
//   1. overhead: a study of 100 trials whose program is a trivial shell script (it writes one evaluation line and
//      exits) runs with `dltune run --parallel 1` on a fresh SQLite store. Per-trial overhead = (wall time of the run
//      - wall time of `dltune run` on the finished study, i.e. startup, summary and exit) / 100: spawning the trial
//      process, claiming, writing params.json and trial.json, reading its report, the store writes and reaping it.
//      The trivial script's own cost (100 runs of it by /bin/sh, without dltune) is printed beside it. Also printed:
//      the start-up cost of a built-in trial's process (`dltune run-trial`, which loads LibTorch), from a study of 20
//      one-step `synthetic` trials measured the same way;
//   2. quickstart (skipped with --overhead-only): `dltune run examples/quickstart.yaml` (32 trials: 16 per optimizer,
//      2000 steps of the Fashion-MNIST MLP, evaluation every 200 steps, 1 thread per trial, as many trials at once as
//      cores) against bench/peers/optuna_quickstart.py: the same study written with Optuna 3.1
//      (QMCSampler(qmc_type="halton"), one study per optimizer) and PyTorch Python, the same trials, steps, batch size,
//      evaluation schedule and threads, --jobs = the same parallelism. Prints each side's wall-clock seconds and best
//      valid error per optimizer, and the ratio. Goal: dltune >= 2x faster, best error within 0.5 points.
// Paths: the dltune binary is the one built with this benchmark; the peer runs with $DLTUNE_PYTHON, else
// /usr/bin/python3. Exits 0 when everything ran, 1 when something could not run.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "dltune/run/worker.h"
#include "dltune/store/store.h"
#include "dltune/store/tracking.h"

namespace {

namespace fs = std::filesystem;

double Seconds() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Runs a shell command; returns its wall time in seconds, or a negative number when it failed.
double Timed(const std::string& command) {
  const double start = Seconds();
  const int status = std::system(command.c_str());
  const double elapsed = Seconds() - start;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "failed (status %d): %s\n", status, command.c_str());
    return -1;
  }
  return elapsed;
}

std::string Python() {
  if (const char* python = std::getenv("DLTUNE_PYTHON")) return python;
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

// Per-trial overhead of `trials` trials of the study in `spec_text`: (run - rerun of the finished study) / trials.
double PerTrialSeconds(const fs::path& dir, const std::string& name, const std::string& spec_text, int trials) {
  const fs::path spec = dir / (name + ".yaml");
  std::ofstream(spec) << spec_text;
  const std::string run = "cd " + dir.string() + " && " + DLTUNE_CLI_PATH + " run " + spec.string() +
                          " --parallel 1 --storage sqlite://" + (dir / (name + ".db")).string() + " > " +
                          (dir / (name + ".out")).string() + " 2>&1";
  const double first = Timed(run);
  const double again = Timed(run);
  if (first < 0 || again < 0) return -1;
  return (first - again) / trials;
}

int Overhead(const fs::path& dir) {
  const fs::path script = dir / "trivial.sh";
  std::ofstream(script) << "printf '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":"
                           "0.5}}\\n' >> \"$DLTUNE_REPORT\"\n";
  constexpr int kTrials = 100;
  const double per_trial = PerTrialSeconds(dir, "overhead",
                                           "name: overhead\ncommand: sh " + script.string() +
                                               "\nmax_train_steps: 1\ntrials: " + std::to_string(kTrials) +
                                               "\nspace:\n  learning_rate: {min: 0.001, max: 1, scale: log}\n",
                                           kTrials);
  // The trivial program alone, run by the shell the same number of times.
  const double alone = Timed("for i in $(seq " + std::to_string(kTrials) + "); do DLTUNE_REPORT=/dev/null sh " +
                             script.string() + "; done");
  constexpr int kBuiltin = 20;
  const double builtin =
      PerTrialSeconds(dir, "builtin",
                      "name: builtin\nworkload: synthetic\nmax_train_steps: 1\ntrials: " + std::to_string(kBuiltin) +
                          "\nspace:\n  learning_rate: {min: 0.001, max: 1, scale: log}\n",
                      kBuiltin);
  if (per_trial < 0 || alone < 0 || builtin < 0) return 1;
  std::printf("\nrunner overhead per trial (goal < 100 ms)\n");
  std::printf(
      "  trivial trial program, %d trials, --parallel 1:  %.1f ms per trial (of which the program itself, "
      "run by sh alone: %.1f ms)\n",
      kTrials, per_trial * 1000, alone / kTrials * 1000);
  std::printf(
      "  built-in trial (synthetic, 1 step), %d trials:   %.1f ms per trial (the trial process loads "
      "LibTorch)\n",
      kBuiltin, builtin * 1000);
  std::printf("  goal %s\n", per_trial < 0.1 ? "met" : "NOT met");
  return 0;
}

std::map<std::string, double> BestPerSubstudy(const fs::path& db, const std::string& study_name) {
  const auto store = dltune::OpenStore("sqlite://" + db.string(), false);
  const auto study = store->FindStudy(study_name);
  std::map<std::string, double> best;
  if (!study) return best;
  const auto summary = dltune::SummarizeStudy(*store, *study);
  for (const auto& b : summary.best_per_substudy)
    best[b.substudy_label.substr(b.substudy_label.find('=') + 1)] = b.value;
  return best;
}

int Quickstart(const fs::path& dir) {
  const int parallel = dltune::DefaultParallelism(1);
  const fs::path spec = fs::path(DLTUNE_SOURCE_DIR) / "examples/quickstart.yaml";
  std::printf("\nquickstart: dltune run %s (%d trials at once) ...\n", spec.c_str(), parallel);
  std::fflush(stdout);
  const double dltune_seconds =
      Timed("cd " + dir.string() + " && " + DLTUNE_CLI_PATH + " run " + spec.string() + " --storage sqlite://" +
            (dir / "quickstart.db").string() + " > " + (dir / "quickstart.out").string() + " 2>&1");
  if (dltune_seconds < 0) return 1;
  auto dltune_best = BestPerSubstudy(dir / "quickstart.db", "quickstart");
  std::printf("quickstart: Optuna + PyTorch (--jobs %d) ...\n", parallel);
  std::fflush(stdout);
  const fs::path peer_json = dir / "optuna.json";
  const double peer_seconds = Timed(Python() + " " + DLTUNE_SOURCE_DIR + "/bench/peers/optuna_quickstart.py --jobs " +
                                    std::to_string(parallel) + " --out " + peer_json.string() + " > " +
                                    (dir / "optuna.out").string() + " 2>&1");
  if (peer_seconds < 0) return 1;
  std::ifstream in(peer_json);
  const nlohmann::json peer = nlohmann::json::parse(in);
  std::printf("\n%-34s %12s %18s %18s\n", "quickstart (32 trials x 2000 steps)", "wall s", "best nesterov err",
              "best adam err");
  std::printf("%-34s %12.1f %18.4f %18.4f\n", "dltune run", dltune_seconds, dltune_best["nesterov"],
              dltune_best["adam"]);
  std::printf("%-34s %12.1f %18.4f %18.4f\n", "Optuna 3.1 + PyTorch (Python)", peer_seconds,
              peer["best_valid_error"]["nesterov"].get<double>(), peer["best_valid_error"]["adam"].get<double>());
  const double dltune_overall = std::min(dltune_best["nesterov"], dltune_best["adam"]);
  const double peer_overall = peer["best_overall"].get<double>();
  std::printf(
      "ratio (Optuna wall / dltune wall): %.2fx (goal >= 2x: %s); best valid error %.4f vs %.4f (%+.2f "
      "points; goal within 0.5: %s)\n",
      peer_seconds / dltune_seconds, peer_seconds / dltune_seconds >= 2 ? "met" : "NOT met", dltune_overall,
      peer_overall, 100 * (dltune_overall - peer_overall), dltune_overall <= peer_overall + 0.005 ? "met" : "NOT met");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  bool overhead_only = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--overhead-only") {
      overhead_only = true;
    } else {
      std::fprintf(stderr, "usage: %s [--overhead-only]\n", argv[0]);
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("dltune_bench_runner_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int status = Overhead(dir);
  if (status == 0 && !overhead_only) status = Quickstart(dir);
  if (status == 0)
    fs::remove_all(dir);
  else
    std::fprintf(stderr, "outputs kept in %s\n", dir.c_str());
  return status;
}
