// The runner: its overhead per trial, and the quickstart study end to end against Optuna + PyTorch and against the
// machine's limit.
//
// One invocation:
//   1. overhead: a study of 100 trials whose program is a trivial shell script (it writes one evaluation line and
//      exits) runs with `dltune run --parallel 1` on a fresh SQLite store. Per-trial overhead = (wall time of the run
//      - wall time of `dltune run` on the finished study, i.e. startup, summary and exit) / 100: spawning the trial
//      process, claiming, writing params.json and trial.json, reading its report, the store writes and reaping it.
//      The trivial script's own cost (100 runs of it by /bin/sh, without dltune) is printed beside it. Also printed:
//      the start-up cost of a built-in trial's process (`dltune run-trial`, forked by the worker's trial server, on
//      one thread), from a study of 20 one-step `synthetic` trials measured the same way;
//   2. quickstart (skipped with --overhead-only): first the machine's limit (bench/machine_limit.h): the CPU model,
//      the OpenBLAS kernel set each side trains with (dltune's trials get its choice, DLTUNE_BLAS_KERNELS=auto; the
//      peer runs OpenBLAS's own), and in each the sgemm GFLOP/s of the MLP's products (a training step's at batch 128,
//      an evaluation batch's at 256) and of a 2048 cube, on 1 core and on all cores (one single-thread process per
//      core at once, summed, as the study's trial processes run). Then `dltune run examples/quickstart.yaml` (32
//      trials: 16 per optimizer, 2000 steps of the Fashion-MNIST MLP, evaluation every 200 steps, trials at once and
//      threads each as dltune measures them on a fresh cache, the probe's time included: docs/parallel-layout.md)
//      against bench/peers/optuna_quickstart.py: the same study written with Optuna
//      3.1 (QMCSampler(qmc_type="halton"), one study per optimizer) and PyTorch Python, the same trials, steps, batch
//      size and evaluation schedule, 1 thread per trial, --jobs = as many trials at once as cores. Both run with
//      OPENBLAS_VERBOSE=2, so the kernel set of dltune's trials (each one's stderr.log, or the trial server's line in
//      the runner's output) and of the peer is read from OpenBLAS's "Core:" line. Prints each side's wall-clock seconds
//      and best valid error per optimizer, and the ratio; each side's work (training steps and evaluated examples:
//      dltune's from its SQLite store in the run directory, the peer's from its JSON; trials that diverge stop early)
//      and its machine limit: the seconds that work's products need at the fastest measured kernel set's all-cores
//      GFLOP/s (MLP FLOP per training step by the usual count 6 x batch x (784*256 + 256*10); the limit counts the
//      products a step runs, without the hidden layer's input gradient; per evaluated example 2 x (784*256 + 256*10));
//      the share of it each side reaches, limit seconds / wall seconds; and dltune's time per trial beyond training and
//      evaluation, from the store's trials.time_split: the sum of its phases but train, data_wait and evaluation (store
//      writes, which overlap the others, excluded) over the trials. Goals (printed met or not, never failing the exit
//      status): dltune >= 1.5x faster than the peer, best error within 0.5 points, >= 70% of the machine's limit, < 0.3
//      s per trial beyond training and evaluation. Other load on the machine slows both sides and the sgemm
//      measurements: the limit is also given per CPU second (the GFLOP/s over the share of a core each measuring
//      process got), and the 70% goal is judged only when the measuring processes had their cores (at least 0.9 of one
//      each).
//   3. with --fuse N, instead: the quickstart with training.fuse: N against the same study with each trial alone
//      (today's layout), in one run: each side's wall time and best valid error per optimizer, and the ratio.
//   4. with --device cuda [--fuse N] [--no-peers] [--no-eager] [--serial-peer-trials N], instead: the quickstart on one
//   GPU
//      (runner_gpu.cc).
// Paths: the dltune binary is the one built with this benchmark; the peer runs with $DLTUNE_PYTHON, else
// /usr/bin/python3. Exits 0 when everything ran, 1 when something could not run.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/machine.h"
#include "dltune/store/store.h"
#include "machine_limit.h"
#include "run/worker.h"
#include "runner_common.h"
#include "store/tracking.h"
#include "train/blas_kernels.h"

namespace {

namespace fs = std::filesystem;
using dltune::bench::BestPerSubstudy;
using dltune::bench::Python;
using dltune::bench::ReadStudy;
using dltune::bench::StudyRecordSummary;
using dltune::bench::Timed;

constexpr double kGoalSpeedup = 1.5;        // the peer's wall time over dltune's
constexpr double kGoalLimitShare = 0.7;     // dltune's share of the machine's limit
constexpr double kGoalTrialOverhead = 0.3;  // seconds per trial beyond training and evaluation

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
                      "name: builtin\nworkload: synthetic\nmax_train_steps: 1\ntraining: {threads: 1}\ntrials: " +
                          std::to_string(kBuiltin) + "\nspace:\n  learning_rate: {min: 0.001, max: 1, scale: log}\n",
                      kBuiltin);
  if (per_trial < 0 || alone < 0 || builtin < 0) return 1;
  std::printf("\nrunner overhead per trial (goal < 100 ms)\n");
  std::printf(
      "  trivial trial program, %d trials, --parallel 1:  %.1f ms per trial (of which the program itself, "
      "run by sh alone: %.1f ms)\n",
      kTrials, per_trial * 1000, alone / kTrials * 1000);
  std::printf(
      "  built-in trial (synthetic, 1 step, 1 thread), %d trials:   %.1f ms per trial (forked by the worker's "
      "trial server)\n",
      kBuiltin, builtin * 1000);
  std::printf("  goal %s\n", per_trial < 0.1 ? "met" : "NOT met");
  return 0;
}

// The kernel sets the trials of a run directory ran, from OpenBLAS's "Core:" line in each trial's stderr.log: "NAME
// (n trials)", comma-separated. Trials forked by a trial server (src/trial/trial_server.h) print none: the
// server loaded OpenBLAS, and its "Core:" line is the last in the runner's output `runner_output`; "-" when neither
// has one.
std::string TrialCores(const fs::path& runs, const fs::path& runner_output) {
  std::map<std::string, int> cores;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(runs, error); !error && it != fs::recursive_directory_iterator();
       it.increment(error)) {
    if (it->path().filename() != "stderr.log") continue;
    std::ifstream in(it->path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string core = dltune::bench::CoreIn(text.str());
    if (!core.empty()) ++cores[core];
  }
  std::string text;
  for (const auto& [core, trials] : cores) {
    text += (text.empty() ? "" : ", ") + core + " (" + std::to_string(trials) + " trials)";
  }
  if (text.empty()) {
    std::ifstream in(runner_output);
    std::stringstream output;
    output << in.rdbuf();
    text = dltune::bench::CoreIn(output.str());
    if (!text.empty()) text += " (trial server)";
  }
  return text.empty() ? "-" : text;
}

std::string Met(bool met) { return met ? "met" : "NOT met"; }

std::string Cell(const std::optional<double>& value, const char* format) {
  if (!value) return "-";
  char text[64];
  std::snprintf(text, sizeof text, format, *value);
  return text;
}

int Quickstart(const fs::path& dir) {
  const int parallel = dltune::DefaultParallelism(1);
  const fs::path spec = fs::path(DLTUNE_SOURCE_DIR) / "examples/quickstart.yaml";

  // The machine's limit, in the kernel sets dltune's trials and the peer run.
  const auto chosen = dltune::FasterBlasEnvironment();
  const dltune::bench::Environment dltune_environment =
      chosen ? dltune::bench::Environment{*chosen} : dltune::bench::Environment{};
  std::printf("\nquickstart: the machine's limit ...\n");
  std::fflush(stdout);
  const dltune::bench::Mlp mlp;
  const dltune::bench::MachineLimit limit = dltune::bench::MeasureMachineLimit(
      mlp,
      {{std::string("dltune's trials (") + (chosen ? "its choice" : "OpenBLAS's own choice") + ")", dltune_environment},
       {"Optuna + PyTorch (as it is)", {}}});
  dltune::bench::PrintMachineLimit(limit);
  if (const std::string problems = limit.Problems(); !problems.empty()) {
    std::fprintf(stderr, "the machine's limit could not be measured: %s", problems.c_str());
    return 1;
  }

  std::printf("\nquickstart: dltune run %s (its own layout, measured on a fresh cache) ...\n", spec.c_str());
  std::fflush(stdout);
  const double dltune_seconds =
      Timed("cd " + dir.string() + " && DLTUNE_CACHE_DIR=" + (dir / "cache").string() + " OPENBLAS_VERBOSE=2 " +
            DLTUNE_CLI_PATH + " run " + spec.string() + " --storage sqlite://" + (dir / "quickstart.db").string() +
            " > " + (dir / "quickstart.out").string() + " 2>&1");
  if (dltune_seconds < 0) return 1;
  {
    std::ifstream out(dir / "quickstart.out");
    for (std::string line; std::getline(out, line);) {
      if (line.starts_with("parallel layout: ") && line.find("...") == std::string::npos) {
        std::printf("  dltune's %s\n", line.c_str());
      }
    }
  }
  auto dltune_best = BestPerSubstudy(dir / "quickstart.db", "quickstart");
  const StudyRecordSummary dltune_study = ReadStudy(dir / "quickstart.db", "quickstart");
  std::printf("quickstart: Optuna + PyTorch (--jobs %d) ...\n", parallel);
  std::fflush(stdout);
  const fs::path peer_json = dir / "optuna.json";
  const double peer_seconds = Timed("OPENBLAS_VERBOSE=2 " + Python() + " " + DLTUNE_SOURCE_DIR +
                                    "/bench/peers/optuna_quickstart.py --jobs " + std::to_string(parallel) + " --out " +
                                    peer_json.string() + " > " + (dir / "optuna.out").string() + " 2>&1");
  if (peer_seconds < 0) return 1;
  std::ifstream in(peer_json);
  const nlohmann::json peer = nlohmann::json::parse(in);
  std::ifstream peer_out(dir / "optuna.out");
  std::stringstream peer_text;
  peer_text << peer_out.rdbuf();
  std::string peer_core = dltune::bench::CoreIn(peer_text.str());
  if (peer_core.empty()) peer_core = peer.value("openblas_core", std::string("-"));
  const dltune::bench::MlpWork peer_work{peer.value("train_steps", 0.0), peer.value("eval_examples", 0.0)};

  std::printf("\n%-34s %12s %18s %18s\n", "quickstart (32 trials x 2000 steps)", "wall s", "best nesterov err",
              "best adam err");
  std::printf("%-34s %12.1f %18.4f %18.4f\n", "dltune run", dltune_seconds, dltune_best["nesterov"],
              dltune_best["adam"]);
  std::printf("%-34s %12.1f %18.4f %18.4f\n", "Optuna 3.1 + PyTorch (Python)", peer_seconds,
              peer["best_valid_error"]["nesterov"].get<double>(), peer["best_valid_error"]["adam"].get<double>());
  const double dltune_overall = std::min(dltune_best["nesterov"], dltune_best["adam"]);
  const double peer_overall = peer["best_overall"].get<double>();
  std::printf(
      "ratio (Optuna wall / dltune wall): %.2fx (goal >= %.1fx: %s); best valid error %.4f vs %.4f (%+.2f "
      "points; goal within 0.5: %s)\n",
      peer_seconds / dltune_seconds, kGoalSpeedup, Met(peer_seconds / dltune_seconds >= kGoalSpeedup).c_str(),
      dltune_overall, peer_overall, 100 * (dltune_overall - peer_overall),
      Met(dltune_overall <= peer_overall + 0.005).c_str());

  // Each side's work against the machine's limit on all cores: as measured, and per CPU second (what the sgemm
  // processes would have done with a core each, when other load shared the cores while measuring).
  const dltune::bench::MachineLimit::KernelSet* fastest = limit.Fastest(dltune_study.work, true);
  const double cpu_share = limit.CpuShare(true);
  const bool idle = cpu_share >= dltune::bench::kIdleCpuShare;
  std::printf("\nthe machine's limit for each side's work (%s kernels, %d cores; products only):\n",
              fastest != nullptr ? fastest->core.c_str() : "-", limit.cores);
  std::printf("  %-30s %-24s %11s %13s %7s %8s %9s %8s %11s %13s\n", "side", "OpenBLAS kernels", "train steps",
              "eval examples", "TFLOP", "limit s", "per CPU s", "wall s", "% of limit", "per CPU s: %");
  const auto side_row = [&](const char* name, const std::string& cores, const dltune::bench::MlpWork& work,
                            double wall) -> std::pair<std::optional<double>, std::optional<double>> {
    const auto seconds = limit.Seconds(work, true);
    const auto cpu_seconds = limit.Seconds(work, true, true);
    const double flop = work.train_steps * mlp.TrainStepProductFlop() + work.eval_examples * mlp.EvalExampleFlop();
    const double formula = work.train_steps * mlp.TrainStepFormulaFlop() + work.eval_examples * mlp.EvalExampleFlop();
    const auto share = [&](const std::optional<double>& limit_seconds) {
      return limit_seconds && wall > 0 ? std::optional<double>(*limit_seconds / wall) : std::nullopt;
    };
    const auto percent = [](const std::optional<double>& value) {
      return Cell(value ? std::optional<double>(100 * *value) : std::nullopt, "%.1f%%");
    };
    std::printf("  %-30s %-24s %11.0f %13.0f %7.2f %8s %9s %8.1f %11s %13s\n", name, cores.c_str(), work.train_steps,
                work.eval_examples, flop / 1e12, Cell(seconds, "%.1f").c_str(), Cell(cpu_seconds, "%.1f").c_str(), wall,
                percent(share(seconds)).c_str(), percent(share(cpu_seconds)).c_str());
    if (seconds && wall > 0 && flop > 0) {
      std::printf("  %-30s by the usual count (6 x batch x weights per step): %.2f TFLOP, %.1f%% of its limit\n", "",
                  formula / 1e12, 100 * *seconds * (formula / flop) / wall);
    }
    return {share(seconds), share(cpu_seconds)};
  };
  const auto dltune_share = side_row("dltune run", TrialCores(dir / "runs" / "quickstart", dir / "quickstart.out"),
                                     dltune_study.work, dltune_seconds);
  side_row("Optuna 3.1 + PyTorch (Python)", peer_core, peer_work, peer_seconds);
  if (!dltune_share.first) {
    std::printf("  goal: dltune >= %.0f%% of the machine's limit: not measured\n", 100 * kGoalLimitShare);
  } else if (idle) {
    std::printf("  goal: dltune >= %.0f%% of the machine's limit: %.1f%%, %s\n", 100 * kGoalLimitShare,
                100 * *dltune_share.first, Met(*dltune_share.first >= kGoalLimitShare).c_str());
  } else {
    std::printf(
        "  goal: dltune >= %.0f%% of the machine's limit: not judged: other load shared the cores (the sgemm processes "
        "had %.2f of a core each), so the measured limit is below the hardware's and dltune's %.1f%% of it an "
        "overstatement, while the sides were slowed by the same load (%s%% per CPU second); rerun on an idle "
        "machine\n",
        100 * kGoalLimitShare, cpu_share, 100 * *dltune_share.first,
        dltune_share.second ? Cell(100 * *dltune_share.second, "%.1f").c_str() : "-");
  }

  // dltune's time per trial beyond training and evaluation (store writes overlap the other phases).
  double overhead = 0;
  std::string phases;
  for (const auto& [phase, seconds] : dltune_study.phase) {
    if (phase == "train" || phase == "data_wait" || phase == "evaluation" || phase == "store") continue;
    overhead += seconds;
    char text[64];
    std::snprintf(text, sizeof text, "%s %.3f", phase.c_str(), seconds / std::max(1, dltune_study.trials));
    phases += (phases.empty() ? "" : ", ") + std::string(text);
  }
  const double per_trial = overhead / std::max(1, dltune_study.trials);
  const auto mean = [&](const char* phase) {
    const auto found = dltune_study.phase.find(phase);
    return found == dltune_study.phase.end() ? 0.0 : found->second / std::max(1, dltune_study.trials);
  };
  std::printf(
      "dltune's time per trial beyond training and evaluation (trials.time_split, %d trials): %.3f s (%s; training "
      "%.2f s, evaluation %.2f s, store writes %.3f s alongside); goal < %.1f s: %s\n",
      dltune_study.trials, per_trial, phases.c_str(), mean("train"), mean("evaluation"), mean("store"),
      kGoalTrialOverhead, Met(dltune_study.trials > 0 && per_trial < kGoalTrialOverhead).c_str());
  return 0;
}

// --fuse N: the quickstart with its trials fused in groups of at most N (training.fuse) against today's layout (each
// trial alone, the layout dltune measures), in one run, both on a fresh layout cache.
int Fused(const fs::path& dir, int members) {
  const fs::path spec = fs::path(DLTUNE_SOURCE_DIR) / "examples/quickstart.yaml";
  const fs::path fused_spec = dir / "quickstart_fused.yaml";
  {
    std::ifstream in(spec);
    std::ofstream out(fused_spec);
    out << in.rdbuf() << "training:\n  fuse: " << members << "\n";
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("fused: %s, %d cores; OpenBLAS kernels in this process: %s%s\n", dltune::CpuModelName().c_str(),
              dltune::AvailableCores(), dltune::OpenBlasCore().c_str(),
              coretype ? (std::string(" (OPENBLAS_CORETYPE=") + coretype + ")").c_str() : "");
  std::map<std::string, double> seconds;
  std::map<std::string, std::map<std::string, double>> best;
  for (const auto& [name, path] : {std::pair<std::string, fs::path>{"alone", spec}, {"fused", fused_spec}}) {
    std::printf("fused: dltune run %s (%s) ...\n", path.c_str(),
                name == "alone" ? "each trial alone, today's layout" : "training.fuse");
    std::fflush(stdout);
    const fs::path db = dir / (name + ".db");
    seconds[name] = Timed("cd " + dir.string() + " && DLTUNE_CACHE_DIR=" + (dir / ("cache_" + name)).string() + " " +
                          DLTUNE_CLI_PATH + " run " + path.string() + " --no-report --storage sqlite://" + db.string() +
                          " > " + (dir / (name + ".out")).string() + " 2>&1");
    if (seconds[name] < 0) return 1;
    best[name] = BestPerSubstudy(db, "quickstart");
  }
  std::printf("\n%-8s %10s %22s %22s\n", "run", "wall s", "best nesterov", "best adam");
  for (const std::string name : {"alone", "fused"}) {
    std::printf("%-8s %10.1f %22.4f %22.4f\n", name.c_str(), seconds[name], best[name]["nesterov"], best[name]["adam"]);
  }
  std::printf("fused (groups of at most %d) takes %.2fx the time of the trials alone\n", members,
              seconds["fused"] / seconds["alone"]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == dltune::bench::kSgemmWorkerFlag) {
    return dltune::bench::RunSgemmWorker(argc, argv);
  }
  bool overhead_only = false;
  bool cuda = false;
  bool peers = true;
  bool eager = true;
  int fuse = 0;
  int serial_peer_trials = 16;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--overhead-only") {
      overhead_only = true;
    } else if (arg == "--fuse" && i + 1 < argc && std::atoi(argv[i + 1]) >= 2) {
      fuse = std::atoi(argv[++i]);
    } else if (arg == "--device" && i + 1 < argc &&
               (std::string(argv[i + 1]) == "cuda" || std::string(argv[i + 1]) == "cpu")) {
      cuda = std::string(argv[++i]) == "cuda";
    } else if (arg == "--no-peers") {
      peers = false;
    } else if (arg == "--no-eager") {
      eager = false;
    } else if (arg == "--serial-peer-trials" && i + 1 < argc && std::atoi(argv[i + 1]) >= 1 &&
               std::atoi(argv[i + 1]) <= 16) {
      serial_peer_trials = std::atoi(argv[++i]);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--overhead-only | --fuse N (N >= 2) | --device cuda [--fuse N] [--no-peers] [--no-eager] "
          "[--serial-peer-trials N (1 to 16)]]\n",
          argv[0]);
      return 2;
    }
  }
  const fs::path dir = fs::temp_directory_path() / ("dltune_bench_runner_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  int status = 0;
  if (cuda) {
    status = dltune::bench::GpuQuickstart(dir, fuse > 0 ? fuse : 32, peers, eager, serial_peer_trials);
  } else {
    status = fuse > 0 ? Fused(dir, fuse) : Overhead(dir);
    if (status == 0 && !overhead_only && fuse == 0) status = Quickstart(dir);
  }
  if (status == 0)
    dltune::RemoveTree(dir);
  else
    std::fprintf(stderr, "outputs kept in %s\n", dir.c_str());
  return status;
}
