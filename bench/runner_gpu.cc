// dltune_bench_runner --device cuda [--fuse N] [--no-peers] [--no-eager] [--serial-peer-trials N]: the quickstart
// study (32 trials of the Fashion-MNIST MLP, 2000 steps each, batch 128, evaluation every 200 steps) on one GPU, in
// one run:
//   - the GPU (bench/peers/gpu_info.py: its name, driver, CUDA, torch, and its measured fp32 matrix-product rate);
//   - `dltune run` of the quickstart as written (training.fuse left out: on CUDA, fused groups chosen by a probe), and
//     again from the fusion that probe measured (its cache), as the next study of it runs;
//   - `dltune run` of the quickstart with training.device: cuda (the built-in trainer; the runner places and packs the
//     trials on the GPU by measurement; training.cuda_graph auto, the default: each trial replays its step from a CUDA
//     graph where that is faster) and with training.fuse: N (default 32: the whole study, both optimizers, one group);
//     both again with --mps (the trials sharing the GPU as clients of an MPS daemon the run starts: their kernels
//     side by side rather than taking turns), and unfused with --mps once more from the packing the first measured
//     (each run has a cache directory of its own, so the others measure their packing afresh); after the peers, both
//     again with training.cuda_graph: false (every step launched eagerly), for the graphs' speed-up, unless --no-eager;
//   - the peer as its users run it on a GPU: bench/peers/optuna_quickstart.py --device cuda with n_jobs=1, and with 8
//     processes sharing the GPU (--jobs 8 --parallel-mode processes); --no-peers leaves them out. With
//     --serial-peer-trials N the n_jobs=1 peer runs N trials per optimizer, not 16 (its trials run one after another
//     at a steady rate, and it takes the longest of all): the ratios against it then compare trials per second, its
//     own from its studies' seconds (data loading in, the interpreter's start out: in its favour), and the best
//     valid errors are compared with its 8 processes' full study instead.
// Prints each side's wall time (dltune's also after start-up: its first trial's start to its last one's end, from the
// store), its best valid error per optimizer, the study's FLOPs at the MLP's formula and the seconds they need at the
// measured rate, and the ratios against the goals: unfused >= 20x the peer's n_jobs=1 and >= 3x its 8 processes
// (issue: the built-in trainer on CUDA), fused under 2 s after start-up (after the group process's own start-up)
// and >= 30x n_jobs=1 (fused trials); best valid errors within 0.5 points; and each CUDA graph's speed-up over its
// eager run. For each dltune run, where a
// trial's time went (start-up, data, training, evaluation, checkpoints: the trials' own records) and how many trials
// ran at once, beside whether NVIDIA's MPS runs. The goals are printed met or not; the exit status says only whether
// everything ran: a run that fails is reported, with the end of its output, and the others still run.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "runner_common.h"
#include "trial/trial_process.h"

namespace dltune::bench {
namespace {

namespace fs = std::filesystem;

constexpr double kGoalOverSerialPeer = 20;     // unfused dltune against Optuna n_jobs=1
constexpr double kGoalOverParallelPeer = 3;    // unfused dltune against Optuna's 8 processes
constexpr double kGoalFusedSeconds = 2;        // fused, after start-up
constexpr double kGoalFusedOverSerial = 30;    // fused against Optuna n_jobs=1
constexpr double kGoalAsWrittenSeconds = 3.5;  // the quickstart as written, its whole wall time
constexpr int kPeerProcesses = 8;
constexpr int kTrialsPerOptimizer = 16;  // the quickstart's

std::string Met(bool met) { return met ? "met" : "NOT met"; }

struct Side {
  std::string name;
  double wall = -1;
  int trials = 0;
  double rate_seconds = -1;  // the seconds its trials per second are measured over: its wall time, or the peer's own
  std::optional<double> after_start;        // dltune's: the trials' span
  std::optional<StudyRecordSummary> study;  // dltune's: its trials' records
  std::map<std::string, double> best;
  MlpWork work;
  std::string graphs;  // dltune's: what training.cuda_graph did in its trials, from their stderr
};

double BestOverall(const Side& side) {
  double best = 1;
  for (const auto& [optimizer, value] : side.best) best = std::min(best, value);
  return best;
}

// A run's name as a file name: its letters and digits, '_' for the rest ("unfused, CUDA graph" -> unfused__CUDA_graph).
std::string FileName(const std::string& name) {
  std::string file = name;
  for (char& c : file) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return file;
}

// The last lines of a failed run's output, into this benchmark's own (the run's directory may be gone with the
// machine it ran on).
void PrintTail(const fs::path& output) {
  std::printf("gpu: the end of %s:\n", output.c_str());
  std::istringstream tail(TailOfFile(output, 15));
  for (std::string line; std::getline(tail, line);) std::printf("  %s\n", line.c_str());
  std::fflush(stdout);
}

// What training.cuda_graph did in the trial processes under `run_dir` (the lines it wrote to their stderr.log):
// "30 replayed their step from a CUDA graph, 2 trained eagerly (the first said: ...)", or "".
std::string GraphsOfTrials(const fs::path& run_dir) {
  constexpr std::string_view kSaid = "training.cuda_graph: ";
  int replayed = 0, eager = 0;
  std::string example;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(run_dir, error); !error && it != fs::end(it); it.increment(error)) {
    if (it->path().filename() != "stderr.log") continue;
    std::ifstream in(it->path());
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find(kSaid);
      if (at == std::string::npos) continue;
      ++(line.find("replays its step from a CUDA graph") != std::string::npos ? replayed : eager);
      if (example.empty()) example = line.substr(at + kSaid.size());
    }
  }
  if (example.empty()) return "";
  return fmt::format("{} replayed their step from a CUDA graph, {} trained eagerly (the first said: {})", replayed,
                     eager, example);
}

// What `dltune run` said about its GPUs, its layout and its packing (its output's lines that say so), as it said it.
void PrintPlacement(const fs::path& output) {
  std::ifstream in(output);
  for (std::string line; std::getline(in, line);) {
    for (const char* said : {"GPUs: ", "GPU packing: ", "parallel layout: ", "training.fuse ", "MPS: ", "--mps: "}) {
      if (line.find(said) != std::string::npos) {
        std::printf("gpu:   %s\n", line.c_str());
        break;
      }
    }
  }
}

// A dltune run of the quickstart takes seconds on a GPU; one that has not ended by then is stopped and reported, so
// that it leaves the benchmark's other runs their time.
constexpr int kDltuneRunLimitSeconds = 150;

// `dltune run` of the quickstart with `training` as its training: block, and `options` (" --mps") on its command line.
// Its cache directory (the GPU packings measured before, docs/parallel-layout.md) is its own, fresh, or the one of
// the run named `cache_of`.
std::optional<Side> RunDltune(const fs::path& dir, const std::string& name, const std::string& training,
                              const std::string& options = "", const std::string& cache_of = "") {
  const std::string file = FileName(name);
  const fs::path cache = dir / ("cache_" + FileName(cache_of.empty() ? name : cache_of));
  const fs::path spec = dir / (file + ".yaml");
  {
    std::ifstream in(fs::path(DLTUNE_SOURCE_DIR) / "examples/quickstart.yaml");
    std::ofstream out(spec);
    out << in.rdbuf() << "run_dir: " << file << "_runs\ntraining:\n" << training;
  }
  const fs::path db = dir / (file + ".db");
  const fs::path output = dir / (file + ".out");
  std::printf("gpu: dltune run (%s) ...\n", name.c_str());
  std::fflush(stdout);
  Side side{.name = "dltune run, " + name};
  side.wall = Timed("cd " + ShellQuote(dir.string()) + " && DLTUNE_CACHE_DIR=" + ShellQuote(cache.string()) +
                    " timeout --kill-after=10 " + std::to_string(kDltuneRunLimitSeconds) + " " + DLTUNE_CLI_PATH +
                    " run " + ShellQuote(spec.string()) + " --no-report" + options + " --storage " +
                    ShellQuote("sqlite://" + db.string()) + " > " + ShellQuote(output.string()) + " 2>&1");
  if (side.wall < 0) {
    std::printf("gpu: dltune run (%s) failed or ran past %d s; the end of its output:\n", name.c_str(),
                kDltuneRunLimitSeconds);
    PrintTail(output);
    PrintPlacement(output);
    return std::nullopt;
  }
  PrintPlacement(output);
  const StudyRecordSummary study = ReadStudy(db, "quickstart");
  side.after_start = study.trials_seconds;
  side.study = study;
  side.trials = study.trials;
  side.rate_seconds = side.wall;
  side.work = study.work;
  side.best = BestPerSubstudy(db, "quickstart");
  side.graphs = GraphsOfTrials(dir / (file + "_runs"));
  return side;
}

// The peer on the GPU with `arguments` (--jobs J [--parallel-mode processes]).
// `partial`: a part of the study, whose trials per second count (measured over the peer's own study seconds).
std::optional<Side> RunPeer(const fs::path& dir, const std::string& name, const std::string& arguments,
                            bool partial = false) {
  const std::string file = FileName(name);
  const fs::path json = dir / (file + ".json");
  const fs::path output = dir / (file + ".out");
  std::printf("gpu: Optuna + PyTorch (%s) ...\n", arguments.c_str());
  std::fflush(stdout);
  Side side{.name = "Optuna 3.1 + PyTorch, " + name};
  side.wall = Timed(Python() + " " + DLTUNE_SOURCE_DIR + "/bench/peers/optuna_quickstart.py --device cuda " +
                    arguments + " --out " + ShellQuote(json.string()) + " > " + ShellQuote(output.string()) + " 2>&1");
  if (side.wall < 0) {
    PrintTail(output);
    return std::nullopt;
  }
  std::ifstream in(json);
  const nlohmann::json peer = nlohmann::json::parse(in);
  for (const auto& [optimizer, value] : peer.at("best_valid_error").items()) side.best[optimizer] = value.get<double>();
  side.trials = peer.value("trials", 0);
  side.rate_seconds = partial ? peer.value("wall_seconds", side.wall) : side.wall;
  side.work = {peer.value("train_steps", 0.0), peer.value("eval_examples", 0.0)};
  return side;
}

}  // namespace

int GpuQuickstart(const fs::path& dir, int fuse, bool peers, bool eager_runs, int serial_peer_trials) {
  const fs::path info_file = dir / "gpu.json";
  if (Timed(Python() + " " + DLTUNE_SOURCE_DIR + "/bench/peers/gpu_info.py > " + ShellQuote(info_file.string())) < 0) {
    std::ifstream said(info_file);
    std::stringstream text;
    text << said.rdbuf();
    std::fprintf(stderr, "no GPU to benchmark on (bench/peers/gpu_info.py with %s): %s\n", Python().c_str(),
                 text.str().c_str());
    return 1;
  }
  std::ifstream info_in(info_file);
  const nlohmann::json info = nlohmann::json::parse(info_in);
  const double tflops = info.at("fp32_tflops").get<double>();
  std::printf("gpu: %s, driver %s, CUDA %s, torch %s; fp32 matrix products measured at %.1f TFLOP/s\n",
              info.at("gpu").get<std::string>().c_str(), info.value("driver", "-").c_str(),
              info.value("cuda", "-").c_str(), info.value("torch", "-").c_str(), tflops);

  // Every run, one after another; a run that fails is reported (with the end of its output) and the others still run.
  std::map<std::string, Side> sides;  // by run
  std::vector<std::string> order, failed;
  const auto run = [&](const std::string& key, std::optional<Side> side) {
    if (!side) {
      failed.push_back(key);
      std::printf("gpu: %s FAILED\n", key.c_str());
      return;
    }
    // Its figures as soon as it ends: a benchmark cut short still says what it measured.
    std::string best;
    for (const auto& [optimizer, value] : side->best) best += fmt::format(", best {} {:.4f}", optimizer, value);
    std::printf("gpu: %s done: %d trials in %.1f s%s%s\n", key.c_str(), side->trials, side->wall,
                side->after_start ? fmt::format(" ({:.1f} s after start-up)", *side->after_start).c_str() : "",
                best.c_str());
    if (!side->graphs.empty()) std::printf("gpu: %s: its trial processes: %s\n", key.c_str(), side->graphs.c_str());
    std::fflush(stdout);
    order.push_back(key);
    sides.emplace(key, std::move(*side));
  };
  const std::string fused_training = "  device: cuda\n  fuse: " + std::to_string(fuse) + "\n";
  // Unfused says so: training.fuse left out would be measured on CUDA, and fused where that wins.
  const std::string unfused_training = "  device: cuda\n  fuse: off\n";
  // The goals' runs first (training.cuda_graph: auto, the default), then the peers, then the eager runs. The
  // quickstart as written (training.fuse left out: measured on CUDA), and again as the next study of it on this GPU
  // runs, from the fusion measured by the first (kept in its cache).
  const std::string as_written = "  device: auto\n";  // the default: the spec says nothing more than the example
  run("as written", RunDltune(dir, "as written", as_written));
  run("as written again", RunDltune(dir, "as written, fusion measured before", as_written, "", "as written"));
  run("unfused", RunDltune(dir, "unfused", unfused_training));
  run("fused", RunDltune(dir, "fused in groups of " + std::to_string(fuse), fused_training));
  // The same with --mps: the trials sharing the GPU as clients of an MPS daemon of the run's own, their kernels side
  // by side.
  run("unfused MPS", RunDltune(dir, "unfused, --mps", unfused_training, " --mps"));
  run("fused MPS", RunDltune(dir, "fused, --mps", fused_training, " --mps"));
  // Unfused with --mps again, as the next study of this training on this GPU runs: from the packing the first measured
  // (kept in its cache), its trials sharing the GPU from the first.
  run("unfused MPS again",
      RunDltune(dir, "unfused, --mps, packing measured before", unfused_training, " --mps", "unfused, --mps"));
  const bool partial = serial_peer_trials < kTrialsPerOptimizer;
  if (peers) {
    const std::string serial_name =
        partial ? fmt::format("n_jobs=1, {} of {} trials each", serial_peer_trials, kTrialsPerOptimizer) : "n_jobs=1";
    run("serial",
        RunPeer(dir, serial_name, fmt::format("--jobs 1 --trials-per-optimizer {}", serial_peer_trials), partial));
    run("parallel", RunPeer(dir, std::to_string(kPeerProcesses) + " processes",
                            fmt::format("--jobs {} --parallel-mode processes", kPeerProcesses)));
  }
  if (eager_runs) {
    run("unfused eager", RunDltune(dir, "unfused, eager", unfused_training + "  cuda_graph: false\n"));
    run("fused eager", RunDltune(dir, "fused, eager", fused_training + "  cuda_graph: false\n"));
  }
  const auto find = [&](const std::string& key) -> const Side* {
    const auto found = sides.find(key);
    return found == sides.end() ? nullptr : &found->second;
  };

  const Mlp mlp;
  std::printf("\n%-52s %9s %14s %12s %10s %10s %8s\n", "quickstart on the GPU (32 trials x 2000 steps)", "wall s",
              "after start s", "TFLOP", "at rate s", "nesterov", "adam");
  for (const std::string& key : order) {
    const Side& side = sides.at(key);
    const double flop =
        side.work.train_steps * mlp.TrainStepFormulaFlop() + side.work.eval_examples * mlp.EvalExampleFlop();
    char after_start[32] = "-";
    if (side.after_start) std::snprintf(after_start, sizeof after_start, "%.2f", *side.after_start);
    std::printf("%-52s %9.1f %14s %12.1f %10.3f %10.4f %8.4f\n", side.name.c_str(), side.wall, after_start, flop / 1e12,
                flop / (tflops * 1e12), side.best.count("nesterov") ? side.best.at("nesterov") : 1.0,
                side.best.count("adam") ? side.best.at("adam") : 1.0);
  }
  for (const std::string& key : failed) std::printf("%-52s FAILED (its output's end is above)\n", key.c_str());

  // Where each dltune run's time went: a trial's phases (the trial's own records) and how many trials ran at once.
  // Without MPS, trials in processes of their own take turns on the GPU: their kernels never overlap, so packing
  // unfused trials cannot go below their summed GPU time; a fused group is one process and one stream of kernels.
  std::printf("\nper trial, mean of the study's trials (a fused member's are its group's; a system MPS %s):\n",
              info.value("mps", false) ? "running: processes' kernels may overlap" : "not running");
  for (const std::string& key : order) {
    const Side& side = sides.at(key);
    if (!side.study || side.study->trials == 0) continue;
    const StudyRecordSummary& study = *side.study;
    const auto mean = [&](const char* phase) {
      const auto found = study.phase.find(phase);
      return found == study.phase.end() ? 0.0 : found->second / study.trials;
    };
    std::printf(
        "  %-50s start-up %.3f s, data %.3f s, train %.3f s, evaluation %.3f s, checkpoints %.3f s; %.1f "
        "trials at once\n",
        side.name.c_str(), mean("startup"), mean("data_load"), mean("train"), mean("evaluation"), mean("checkpoint"),
        study.trials_seconds > 0 ? study.trial_seconds_summed / study.trials_seconds : 0.0);
  }
  std::printf("\n");
  for (const char* key : {"as written", "as written again"}) {
    if (const Side* side = find(key)) {
      std::printf("%s: wall %.2f s (goal <= %.1f s: %s)\n", side->name.c_str(), side->wall, kGoalAsWrittenSeconds,
                  Met(side->wall <= kGoalAsWrittenSeconds).c_str());
    }
  }
  for (const char* key : {"as written", "as written again", "fused", "fused MPS", "fused eager"}) {
    if (const Side* side = find(key)) {
      // The goal holds the span after the group's start-up: the trials' whole span, less its process's own start-up
      // (LibTorch, CUDA's context, until its first step; with the study in one group, the members' start-up). The
      // issue's PyTorch figures (32 trials fused in 2.18 s) are likewise those of a process already started.
      std::optional<double> startup;
      if (side->study && side->study->trials > 0) {
        if (const auto it = side->study->phase.find("startup"); it != side->study->phase.end()) {
          startup = it->second / side->study->trials;
        }
      }
      const double after = *side->after_start - startup.value_or(0.0);
      std::printf(
          "%s after start-up: %.2f s, %s (goal < %.0f s: %s)\n", side->name.c_str(), *side->after_start,
          startup ? fmt::format("of which its group's process start-up {:.2f} s: {:.2f} s after it", *startup, after)
                        .c_str()
                  : "its group's process start-up unknown",
          kGoalFusedSeconds, Met(startup && after < kGoalFusedSeconds).c_str());
    }
  }
  for (const auto& [graphed, eager] : {std::pair{"unfused", "unfused eager"}, std::pair{"fused", "fused eager"}}) {
    if (find(eager) && find(graphed)) {
      std::printf("training.cuda_graph auto against eager, %s (wall time): %.2fx\n", graphed,
                  find(eager)->wall / find(graphed)->wall);
    }
  }

  const Side* serial = find("serial");
  const Side* parallel = find("parallel");
  // Trials per second against trials per second: the wall times' ratio where both ran the whole study.
  const auto ratio = [](const Side& slow, const Side& fast) {
    return (fast.trials / fast.rate_seconds) / (slow.trials / slow.rate_seconds);
  };
  const auto within = [](const Side& a, const Side& b) { return BestOverall(a) <= BestOverall(b) + 0.005; };
  // The peer's best valid error: its n_jobs=1 study's, or its 8 processes' where n_jobs=1 ran a part of it.
  const Side* peer_best = partial ? parallel : serial;
  if (serial && partial) {
    std::printf("%s: %d trials in %.1f s of its own studies' time; best valid errors compared with its %d processes\n",
                serial->name.c_str(), serial->trials, serial->rate_seconds, kPeerProcesses);
  }
  // "SIDE: 12.3x PEER (goal >= 20x: met)" and "SIDE: best valid error 0.1138 vs REFERENCE's 0.1144 (...)".
  const auto print_ratio = [&](const Side& side, const Side* slow, const std::string& slow_name, double goal) {
    if (!slow) return;
    const double over = ratio(*slow, side);
    std::printf("%s: %.1fx %s (goal >= %.0fx: %s)\n", side.name.c_str(), over, slow_name.c_str(), goal,
                Met(over >= goal).c_str());
  };
  const auto print_best = [&](const Side& side, const Side* reference, const char* reference_name) {
    if (!reference) return;
    std::printf("%s: best valid error %.4f vs %s %.4f (goal within 0.5 points: %s)\n", side.name.c_str(),
                BestOverall(side), reference_name, BestOverall(*reference), Met(within(side, *reference)).c_str());
  };
  const std::string processes = fmt::format("Optuna's {} processes", kPeerProcesses);
  for (const char* key : {"unfused", "unfused MPS", "unfused MPS again", "unfused eager"}) {
    if (const Side* side = find(key)) {
      print_ratio(*side, serial, "Optuna n_jobs=1", kGoalOverSerialPeer);
      print_ratio(*side, parallel, processes, kGoalOverParallelPeer);
      print_best(*side, peer_best, "the peer's");
    }
  }
  for (const char* key : {"as written", "as written again", "fused", "fused MPS", "fused eager"}) {
    if (const Side* side = find(key)) {
      print_ratio(*side, serial, "Optuna n_jobs=1", kGoalFusedOverSerial);
      print_best(*side, find("unfused"), "unfused");
    }
  }
  return failed.empty() ? 0 : 1;
}

}  // namespace dltune::bench
