#include "builtin/builtin_trial.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "builtin/injected_faults.h"
#include "core/checkpoint_retention.h"
#include "dltune/core/error.h"
#include "dltune/core/objective.h"
#include "dltune/workloads/train.h"
#include "trial/trial_report.h"

namespace dltune {
namespace {

// This process's peak resident memory in MiB (VmHWM), or -1.
long PeakMemoryMiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6)) / 1024;
  }
  return -1;
}

// Writes each report line whole and flushed, so the worker sees progress as it happens.
class ReportingCallbacks final : public TrainerCallbacks {
 public:
  ReportingCallbacks(const std::string& report_path, const std::filesystem::path& trial_dir,
                     const std::atomic<bool>& stop_requested)
      : report_(std::fopen(report_path.c_str(), "a")),
        predictions_(trial_dir / "predictions.jsonl", std::ios::app),
        stop_requested_(stop_requested) {
    if (!report_) throw IoError(fmt::format("{}: cannot open the report channel", report_path));
  }
  ~ReportingCallbacks() override { std::fclose(report_); }
  ReportingCallbacks(const ReportingCallbacks&) = delete;
  ReportingCallbacks& operator=(const ReportingCallbacks&) = delete;

  void Write(const std::string& line) {
    std::fputs(line.c_str(), report_);
    std::fputc('\n', report_);
    std::fflush(report_);
  }

  void OnStart(std::int64_t step) override {
    if (step > 0) std::printf("resuming from the checkpoint of step %lld\n", static_cast<long long>(step));
    std::fflush(stdout);
    Write(RuntimeLine());  // LibTorch, BLAS and CUDA as this process has them loaded
    Write(StartLine(step, true));
  }

  void OnTrainMetrics(const std::vector<StepMetrics>& steps) override {
    std::string lines;
    for (const auto& s : steps) lines += TrainLineOf(s) + '\n';
    std::fputs(lines.c_str(), report_);
    std::fflush(report_);
  }

  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& metrics, std::int64_t, double) override {
    for (const std::string& line : EvalLines(step, metrics)) Write(line);
  }

  void OnPredictions(std::int64_t step, const std::vector<Prediction>& predictions) override {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : predictions) {
      list.push_back(
          {{"example", p.example}, {"label", p.label}, {"predicted", p.predicted}, {"confidence", p.confidence}});
    }
    predictions_ << nlohmann::json({{"step", step}, {"predictions", list}}).dump() << "\n";
    predictions_.flush();
  }

  void OnCheckpoint(const CheckpointEvent& event) override { Write(CheckpointLineOf(event)); }

  bool ShouldStop(std::int64_t step) override {
    faults_.AtStep(step);
    return stop_requested_.load();
  }

 private:
  std::FILE* report_;
  std::ofstream predictions_;
  const std::atomic<bool>& stop_requested_;
  InjectedFaults faults_;
};

// A data-parallel rank other than 0: it reports nothing (rank 0 reports for the trial) and only hears the stop
// request and the faults a test injects.
class QuietRankCallbacks final : public TrainerCallbacks {
 public:
  explicit QuietRankCallbacks(const std::atomic<bool>& stop_requested) : stop_requested_(stop_requested) {}
  bool ShouldStop(std::int64_t step) override {
    faults_.AtStep(step);
    return stop_requested_.load();
  }

 private:
  const std::atomic<bool>& stop_requested_;
  InjectedFaults faults_;
};

}  // namespace

BuiltinTrialRun ReadBuiltinTrial(const nlohmann::json& trial, const std::string& where) {
  try {
    BuiltinTrialRun run;
    const auto& workload = trial.at("workload");
    run.workload = workload.at("name").get<std::string>();
    run.args = workload.at("args");
    for (const auto& [name, value] : trial.at("params").items()) {
      if (auto scalar = ValueFromJson(value)) run.params[name] = *scalar;
    }
    run.options.max_train_steps = trial.at("max_train_steps").get<std::int64_t>();
    try {
      run.options.training = TrainingSettingsFromJson(trial.at("training"));
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
    try {
      run.options.objective = ObjectiveFromJson(trial.at("objective"));
    } catch (const Error& e) {
      throw Error(fmt::format("{}: {}", where, e.what()));
    }
    // The same seeds as `dltune train --seed`, so the reproduction command reproduces the trial exactly.
    run.options.init_seed = trial.at("seed").get<std::uint64_t>();
    run.options.data_seed = run.options.init_seed;
    if (const auto owner = trial.find("checkpoint_owner"); owner != trial.end()) run.options.checkpoint_owner = *owner;
    return run;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: missing or mistyped field: {}", where, e.what()));
  }
}

std::string TrainLineOf(const StepMetrics& s) {
  return TrainLine({.step = s.step,
                    .loss = s.loss,
                    .learning_rate = s.learning_rate,
                    .grad_norm = s.grad_norm,
                    .clipped = s.clipped,
                    .step_time = s.step_time,
                    .data_wait = s.data_wait,
                    .examples_per_second = s.examples_per_second});
}

std::string CheckpointLineOf(const CheckpointEvent& event) {
  return CheckpointLine({.step = event.step,
                         .path = event.path,
                         .objective = event.objective,
                         .checksum = event.checksum,
                         .best = event.best,
                         .deleted = event.deleted});
}

std::vector<std::string> EvalLines(std::int64_t step, const std::vector<EvalMetric>& metrics) {
  std::map<std::string, ReportEval> by_split;
  for (const auto& m : metrics) {
    ReportEval& eval = by_split[m.split];
    eval.step = step;
    eval.split = m.split;
    eval.metrics[m.metric] = m.value;
    eval.examples = m.examples;
  }
  std::vector<std::string> lines;
  lines.reserve(by_split.size());
  for (const auto& [split, eval] : by_split) lines.push_back(EvalLine(eval));
  return lines;
}

std::string RequireWorkerVariable(const char* name, const char* command) {
  const char* value = std::getenv(name);
  if (!value || !*value) {
    throw Error(
        fmt::format("${} is not set: dltune {} is started by a dltune worker (see "
                    "docs/trial-protocol.md); to train by hand, use dltune train",
                    name, command));
  }
  return value;
}

nlohmann::json ReadTrialFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw IoError(fmt::format("{}: cannot read the trial description", path));
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

BuiltinTrialRun ReadBuiltinTrialFile(const std::string& path) { return ReadBuiltinTrial(ReadTrialFile(path), path); }

void PrepareBuiltinTrial(const std::map<std::string, std::string>& environment) {
  static std::set<std::string> prepared;  // workload name and arguments
  std::string workload;
  nlohmann::json args;
  if (const auto trial_path = environment.find("DLTUNE_TRIAL"); trial_path != environment.end()) {
    const BuiltinTrialRun run = ReadBuiltinTrialFile(trial_path->second);
    workload = run.workload;
    args = run.args;
  } else if (const auto named = environment.find("DLTUNE_WORKLOAD"); named != environment.end()) {
    workload = named->second;  // TrialServer::Warm's, before any trial
    const auto named_args = environment.find("DLTUNE_WORKLOAD_ARGS");
    args = nlohmann::json::parse(named_args == environment.end() ? "{}" : named_args->second);
  } else {
    return;
  }
  const std::string key = workload + " " + args.dump();
  if (prepared.count(key)) return;
  PreloadWorkloadData(workload, args);
  prepared.insert(key);
}

int RunBuiltinTrial(const std::atomic<bool>& stop_requested) {
  const std::string trial_path = RequireWorkerVariable("DLTUNE_TRIAL", "run-trial");
  const std::filesystem::path trial_dir = std::filesystem::path(trial_path).parent_path();
  BuiltinTrialRun run = ReadBuiltinTrialFile(trial_path);
  run.options.checkpoint_dir = (trial_dir / "checkpoints").string();
  run.options.recorded_checkpoint_file = (trial_dir / kRecordedCheckpointFile).string();
  // Here, in the trial's own process: a trial server must not have touched CUDA before it forks.
  run.options.device = ResolveTrainingDevice(run.options.training);
  if (const char* limit = std::getenv("DLTUNE_RESUME_MAX_STEP"); limit && *limit) {
    run.options.max_resume_step = std::stoll(limit);
  }
  if (const char* server = std::getenv("DLTUNE_WARM_START")) {
    std::printf("started warm: forked by trial server %s\n", server);
    std::fflush(stdout);
  }
  if (run.options.training.processes > 1) {
    run.options.distributed = DistributedOptionsFromEnvironment(run.options.training);
    std::printf("data-parallel rank %d of %d\n", run.options.distributed.rank, run.options.distributed.world_size);
    std::fflush(stdout);
  }
  if (run.options.distributed.rank != 0) {
    QuietRankCallbacks quiet(stop_requested);
    const TrainResult result = Train(run.workload, run.args, HyperParams(run.args, run.params), run.options, quiet);
    std::printf("peak memory: %ld MiB\n", PeakMemoryMiB());
    return result.outcome == TrainOutcome::kStopped ? kExitStopped : 0;
  }
  const std::string report_path = RequireWorkerVariable("DLTUNE_REPORT", "run-trial");
  ReportingCallbacks callbacks(report_path, trial_dir, stop_requested);
  const TrainResult result = Train(run.workload, run.args, HyperParams(run.args, run.params), run.options, callbacks);
  std::printf("peak memory: %ld MiB\n", PeakMemoryMiB());
  callbacks.Write(TimingLine(result.seconds));
  switch (result.outcome) {
    case TrainOutcome::kCompleted: callbacks.Write(EndLine({})); return 0;
    case TrainOutcome::kInfeasible:
      callbacks.Write(EndLine({.state = EndState::kInfeasible, .reason = result.reason}));
      return 0;
    case TrainOutcome::kStopped: return kExitStopped;
  }
  return 0;
}

int RunSpeedProbe() {
  const std::string trial_path = RequireWorkerVariable("DLTUNE_TRIAL", "run-trial");
  const std::string report_path = RequireWorkerVariable("DLTUNE_REPORT", "run-trial");
  BuiltinTrialRun run = ReadBuiltinTrialFile(trial_path);
  run.options.device = ResolveTrainingDevice(run.options.training);
  double seconds = 1.0;
  if (const char* text = std::getenv("DLTUNE_PROBE_SECONDS"); text && *text) seconds = std::stod(text);
  // A probe measures speed, not learning: a loss that grows is no reason to stop it.
  run.options.training.divergence_factor = 1e300;
  // With $DLTUNE_PROBE_MEMBERS > 1 (training.fuse: auto), a fused group of that many copies of the trial, whose
  // steps count per member.
  std::size_t members = 1;
  if (const char* text = std::getenv("DLTUNE_PROBE_MEMBERS"); text && *text) members = std::stoul(text);
  const HyperParams params(run.args, run.params);
  const double steps_per_second =
      members > 1 ? MeasureFusedTrainingSpeed(run.workload, run.args, params, run.options, members, seconds)
                  : MeasureTrainingSpeed(run.workload, run.args, params, run.options, seconds);
  std::ofstream report(report_path);
  report << nlohmann::json{{"steps_per_second", steps_per_second}}.dump() << "\n";
  report.flush();
  return report && steps_per_second > 0 ? 0 : 1;
}

}  // namespace dltune
