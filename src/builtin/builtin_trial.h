// The process of a trial of a built-in workload (`dltune run-trial`): reads the trial's files that the worker wrote
// (DLTUNE_TRIAL), trains with the built-in trainer, and reports through the trial protocol like any external
// program (docs/trial-protocol.md).
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/value.h"
#include "dltune/train/trainer.h"

namespace dltune {

// What a trial.json (TrialDescription) says about training a built-in trial: the workload, its arguments, the
// params by name and the trainer's options (without a checkpoint directory: the caller names one).
struct BuiltinTrialRun {
  std::string workload;
  nlohmann::json args;
  std::map<std::string, Value> params;
  TrainerOptions options;
};
// Reads `trial` (trial.json's content; `where` names it in errors). Throws Error for a missing or mistyped field.
BuiltinTrialRun ReadBuiltinTrial(const nlohmann::json& trial, const std::string& where);
// Reads the trial.json at `path`. Throws IoError when it cannot be read, Error when it is not a trial description.
BuiltinTrialRun ReadBuiltinTrialFile(const std::string& path);
// The JSON of the trial.json at `path`. Throws IoError when it cannot be read, Error when it is not JSON.
nlohmann::json ReadTrialFile(const std::string& path);

// What the trainer reports (dltune/train/training_reports.h) as the trial protocol's lines: one adapter for the
// built-in trial, a fused group's members and `dltune train`'s metrics.jsonl alike.
// A step as a `train` line, with every field.
std::string TrainLineOf(const StepMetrics& step);
// An evaluation at `step` as report lines, one `eval` line per split.
std::vector<std::string> EvalLines(std::int64_t step, const std::vector<EvalMetric>& metrics);
// A checkpoint written or deleted as a `checkpoint` line.
std::string CheckpointLineOf(const CheckpointEvent& event);

// The value of the variable `name` that the worker sets for `dltune COMMAND`; throws Error, saying so, without it.
std::string RequireWorkerVariable(const char* name, const char* command);

// A trial server's preparation for the built-in trial whose environment is `environment`: decodes the data set of
// the workload its DLTUNE_TRIAL names (or, ahead of any trial, DLTUNE_WORKLOAD with DLTUNE_WORKLOAD_ARGS as JSON),
// once per workload and arguments (PreloadWorkloadData). Throws Error when the
// trial's files or data cannot be read (the trial then meets and reports the same error itself).
void PrepareBuiltinTrial(const std::map<std::string, std::string>& environment);

// Trains the trial described by $DLTUNE_TRIAL, writing report lines to $DLTUNE_REPORT; returns the exit status
// (0, or kExitStopped when `stop_requested` became true, set by the caller's SIGTERM handler). Throws
// Error for unusable trial files or params (the caller prints it to stderr, which the worker records).
int RunBuiltinTrial(const std::atomic<bool>& stop_requested);

// `dltune probe-speed`, the parallel layout's probe (parallel_layout.h): trains the built-in trial that $DLTUNE_TRIAL
// describes for $DLTUNE_PROBE_SECONDS seconds (1 when unset), without evaluating or checkpointing, and writes
// {"steps_per_second": N} to $DLTUNE_REPORT; with $DLTUNE_PROBE_MEMBERS = M > 1, a fused group of M copies of it
// (training.fuse: auto), N counting each member's steps. Returns the exit status; throws Error for unusable trial
// files.
int RunSpeedProbe();

}  // namespace dltune
