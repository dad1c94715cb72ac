// Training a registered workload by name, without LibTorch in the caller's includes.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/train/trainer.h"

namespace dltune {

// Makes the workload registered as `workload_name` from `workload_args` (the spec's workload.args) and trains it
// (see TrainWorkload). Throws Error for an unknown workload, bad arguments, params or options.
TrainResult Train(const std::string& workload_name, const nlohmann::json& workload_args, const HyperParams& params,
                  const TrainerOptions& options, TrainerCallbacks& callbacks);

// Whether trials of workload `workload_name` can train fused (TrainFusedTrials): the workload made from
// `workload_args` offers an array model (Workload::Fusion). False for a name no workload is registered under.
bool FusibleWorkload(const std::string& workload_name, const nlohmann::json& workload_args = nlohmann::json::object());

// Trains `members` of workload `workload_name` together as one array model in this process (a fused group,
// dltune/train/trainer.h), with the max_train_steps, training settings and objective of `shared` (its seeds and
// checkpoint directory are each member's own), reporting through `callbacks`. Returns each member's result. Throws
// Error like Train, for a workload that offers no fusion (naming it), and for members that cannot train fused
// (docs/training.md, "Fused trials").
std::vector<TrainResult> TrainFusedTrials(const std::string& workload_name, const nlohmann::json& workload_args,
                                          const std::vector<FusedMember>& members, const TrainerOptions& shared,
                                          MemberCallbacks& callbacks);

// Evaluates a stored checkpoint of a run of workload `workload_name` on `split`, and exports it as TorchScript when
// `export_path` is given (see EvaluateCheckpoint in dltune/train/trainer.h).
CheckpointMetrics EvaluateWorkloadCheckpoint(const std::string& workload_name, const nlohmann::json& workload_args,
                                             const HyperParams& params, const TrainerOptions& options,
                                             const std::string& checkpoint_path, const std::string& split,
                                             const std::string& export_path = "");

// Throws the Error a trial of workload `workload_name` with these params would fail with before training (see
// CheckTrialParams): a param the workload and the trainer do not read, a value they refuse or one they need.
void CheckWorkloadParams(const std::string& workload_name, const nlohmann::json& workload_args,
                         const HyperParams& params, std::int64_t max_train_steps);

// The examples shared by the splits of workload `workload_name` (CheckSplitOverlap), its data loaded.
SplitOverlap CheckWorkloadSplits(const std::string& workload_name, const nlohmann::json& workload_args);

// Loads the data set of workload `workload_name` into this process's memory on one thread, and keeps it there so
// that processes forked from this one start with it decoded (a trial server's preparation, trial_server.h). Leaves
// LibTorch on one intra-op thread and never starts a thread pool. Throws Error like the workload's own loading.
void PreloadWorkloadData(const std::string& workload_name, const nlohmann::json& workload_args);

// Training steps per second of workload `workload_name` with these params and options (its threads, its batch
// size), timed over about `seconds` of training after a few warm-up steps: the median step. Evaluates nothing and
// writes no checkpoint. Throws Error like Train.
double MeasureTrainingSpeed(const std::string& workload_name, const nlohmann::json& workload_args,
                            const HyperParams& params, TrainerOptions options, double seconds);

// Training steps per second of `members` trials of these params trained as one fused group (TrainFusedTrials; each
// member its own seeds), counted per member (a group of 4 at 100 steps/s: 400), timed as MeasureTrainingSpeed times
// a lone trial. Throws Error like TrainFusedTrials.
double MeasureFusedTrainingSpeed(const std::string& workload_name, const nlohmann::json& workload_args,
                                 const HyperParams& params, TrainerOptions options, std::size_t members,
                                 double seconds);

// Every registered workload's name, sorted; the built-in ones included.
std::vector<std::string> WorkloadNames();

}  // namespace dltune
