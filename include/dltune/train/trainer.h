// The trainer every built-in trial runs: the playbook's training loop.
//
// One call trains one workload with one set of hyperparameters for exactly max_train_steps steps, evaluating at
// step intervals (never time intervals), keeping the latest and the best checkpoints, and reporting everything
// through TrainerCallbacks — it knows nothing of the store. It resumes from the newest valid checkpoint in its
// checkpoint directory, restoring model, optimizer, step, random generator states and data position, so an
// interrupted trial continues exactly where it stopped.
//
// This header is free of LibTorch types, so the runner and the CLI can use it without compiling torch headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/hyperparams.h"
#include "dltune/core/objective.h"
#include "dltune/core/training_settings.h"
#include "dltune/train/training_process.h"
#include "dltune/train/training_reports.h"

namespace dltune {

// How to train, apart from the hyperparameters (which come in a HyperParams). Documented value struct;
// Validate() throws Error naming a bad value.
struct TrainerOptions {
  std::int64_t max_train_steps = 0;  // required, > 0; the same for every trial of a study
  // Evaluation schedule and sets, divergence, checkpoint pools, threads: the settings a spec's `training:` block and
  // `dltune train`'s flags give (dltune/core/training_settings.h). An evaluation batch smaller than the training
  // batch is an error.
  TrainingSettings training;
  Objective objective;         // what picks the best checkpoint (retrospective selection): valid/error_rate, minimized
  std::string checkpoint_dir;  // "" = no checkpoints (and no resume)
  // Where training.profile_steps's trace goes; "": ProfileTracePath(checkpoint_dir), beside the checkpoint directory
  // (training with a window and neither is an Error).
  std::string profile_path;
  // Whose checkpoints they are (CheckpointOptions::owner): a directory holding another owner's checkpoints is refused
  // (Error) rather than resumed from or pruned. null: any owner.
  nlohmann::json checkpoint_owner;
  // Resume only from a checkpoint at or before this step (the newest whose measurements the caller has recorded; a
  // newer one on disk is ignored and later replaced); -1: from the newest checkpoint.
  std::int64_t max_resume_step = -1;
  // A file where the caller writes the step of the newest checkpoint it has recorded (the worker does,
  // docs/trial-protocol.md): retention keeps that checkpoint and the newer ones too, so a resume within
  // max_resume_step finds one. "": none.
  std::string recorded_checkpoint_file;
  std::uint64_t init_seed = 0;  // model initialization (shared across hosts)
  std::uint64_t data_seed = 0;  // data order and dropout (differs across hosts)
  // A torch device string: "cpu", "cuda", "cuda:0", ...; ResolveTrainingDevice(training) gives the one
  // training.device names. On CUDA the trainer turns on LibTorch's deterministic algorithms.
  std::string device = "cpu";
  // This process's rank among training.processes data-parallel ranks (world_size must equal that setting). Every rank
  // trains its shard of each global batch; only rank 0 calls the callbacks other than ShouldStop and writes
  // checkpoints and traces, and checkpoint_dir is read by rank 0 alone (it sends the others the state to resume).
  DistributedOptions distributed;

  void Validate() const;
};

enum class TrainOutcome { kCompleted, kInfeasible, kStopped };

struct TrainResult {
  TrainOutcome outcome = TrainOutcome::kCompleted;
  std::string reason;                  // why infeasible or stopped
  std::int64_t steps = 0;              // steps done in all (including before a resume)
  std::int64_t resumed_from_step = 0;  // 0 when it started fresh
  std::optional<std::int64_t> best_step;
  std::optional<double> best_value;
  std::optional<double> final_value;  // objective at the last evaluation
  // Where this run's time went, in seconds: data_load, train (of which data_wait), evaluation, checkpoint.
  std::map<std::string, double> seconds;
  // The profile trace this run wrote (training.profile_steps), "" when none: a run resumed after its window, or
  // inside it when the run before wrote its part, writes none.
  std::string profile_trace;
  // The threads it trained with: training.threads, or with auto the cores other processes left idle when it started
  // (IdleCores), kept by a resumed run from the run it resumes, so that resuming stays bit-exact.
  int threads = 0;
};

// Receives everything training measures, on the training thread; default implementations ignore it. One interface
// for both trainers: TrainerCallbacks (TrainingCallbacks<>) hears a lone trial (TrainWorkload); MemberCallbacks
// (TrainingCallbacks<std::size_t>) hears a fused group (TrainFused), each call but ShouldStop naming the member, its
// index in the group's members, first. A member hears what its lone trial would, in batches: its steps before each
// evaluation and at its end rather than at each log interval.
template <typename... Member>
class TrainingCallbacks {
 public:
  virtual ~TrainingCallbacks() = default;
  // Before the first step: `step` is 0 for a fresh start, or the step of the checkpoint training resumed from.
  virtual void OnStart(Member..., std::int64_t step) { (void)step; }
  // Training metrics of the steps since the last call (every log interval), timings included.
  virtual void OnTrainMetrics(Member..., const std::vector<StepMetrics>& steps) { (void)steps; }
  // An evaluation at `step`, with the best objective so far (retrospective checkpoint selection; 0 and NaN before a
  // finite one).
  virtual void OnEvaluation(Member..., std::int64_t step, const std::vector<EvalMetric>& metrics,
                            std::int64_t best_step, double best_value) {
    (void)step, (void)metrics, (void)best_step, (void)best_value;
  }
  // The fixed debugging examples' predictions at an evaluation (a lone trial's; fused groups make none).
  virtual void OnPredictions(Member..., std::int64_t step, const std::vector<Prediction>& predictions) {
    (void)step, (void)predictions;
  }
  // A checkpoint committed, or removed by retention.
  virtual void OnCheckpoint(Member..., const CheckpointEvent& event) { (void)event; }
  // Training ended, with what TrainWorkload returns (a fused member's TrainResult): once, when it ends; a fused member
  // that diverged at once, while its mates train on.
  virtual void OnEnd(Member..., const TrainResult& result) { (void)result; }
  // Checked after every step (`step` updates done): true stops training after writing a latest checkpoint (Ctrl-C,
  // SIGTERM, the end of a time-limited job); a fused group stops every member there.
  virtual bool ShouldStop(std::int64_t step) {
    (void)step;
    return false;
  }
};
using TrainerCallbacks = TrainingCallbacks<>;
using MemberCallbacks = TrainingCallbacks<std::size_t>;

class Workload;

// Trains `workload` with `params`. Training hyperparameters it reads:
// optimizer (sgd | momentum | nesterov | rmsprop | adam | nadam), learning_rate, momentum or one_minus_momentum,
// rho, beta1 or one_minus_beta1, beta2 or one_minus_beta2, epsilon, weight_decay, decoupled_weight_decay,
// schedule (constant | linear | cosine | inverse_sqrt), warmup_steps, decay_steps, final_lr_fraction, batch_size,
// grad_clip_norm, label_smoothing (the training loss's targets smoothed; evaluations report the plain loss), ema_decay
// (Polyak averaging: evaluations, checkpoints' evaluations and exports use the moving average of the weights, which
// checkpoints keep beside them); the workload reads its own (e.g. hidden_sizes, dropout). A param neither reads is an
// Error.
// Throws Error for bad options or params and for unreadable data; divergence is a result, not an exception.
TrainResult TrainWorkload(Workload& workload, const HyperParams& params, const TrainerOptions& options,
                          TrainerCallbacks& callbacks);

// What one evaluation of a stored checkpoint measured.
struct CheckpointMetrics {
  std::int64_t step = 0;            // the checkpoint's step
  std::vector<EvalMetric> metrics;  // of the one split, as an evaluation during training reports them
};

// Evaluates the model saved in the checkpoint directory `checkpoint_path` (a step directory, docs/checkpoint-layout.md)
// of a run of `workload` with `params` and `options` on `split` (train: the fixed training subset; valid,
// valid_sample, test), exactly as the trainer's evaluation at that step did or would have: the same batches, the same
// zero-weight padding, the same metrics. With `export_path`, also writes the model as a TorchScript file that Python
// loads with torch.jit.load (forward: a batch of inputs, as the workload's dataset holds them, to logits). Throws
// Error for an unknown split, CorruptError-like errors from LibTorch for an unreadable checkpoint, IoError when the
// export cannot be written.
CheckpointMetrics EvaluateCheckpoint(Workload& workload, const HyperParams& params, const TrainerOptions& options,
                                     const std::string& checkpoint_path, const std::string& split,
                                     const std::string& export_path = "");

// Examples that two splits of a workload share: the playbook warns that periodic validation curves "can indicate
// implementation bugs such as test data having overlap with training data". Examples are compared by their inputs
// (every byte of the input tensor's row).
struct SplitOverlap {
  std::int64_t train = 0, valid = 0, test = 0;  // examples per split
  // Examples of the second split whose input is also in the first.
  std::int64_t valid_in_train = 0, test_in_train = 0, test_in_valid = 0;
  // Of those, how many carry another label there (the same input labelled twice differently).
  std::int64_t relabelled = 0;

  bool any() const { return valid_in_train + test_in_train + test_in_valid > 0; }
};
// Loads the workload's data and compares its splits.
SplitOverlap CheckSplitOverlap(Workload& workload);

// Reads `params` as TrainWorkload would (the training hyperparameters, then the workload's model, built on the CPU
// without touching data) and throws the Error a trial with them would fail with: a bad value, a value the workload
// needs and lacks, or a param nobody reads.
void CheckTrialParams(Workload& workload, const HyperParams& params, std::int64_t max_train_steps);

// Fused trials (a study's trials trained together as one array model: TrainFused in
// src/train/fused_training.h, TrainFusedTrials in dltune/workloads/train.h; docs/training.md, "Fused trials").
// One member: what its lone trial's TrainWorkload call would get beside the shared options.
struct FusedMember {
  HyperParams params;
  std::uint64_t init_seed = 0;
  std::uint64_t data_seed = 0;
  std::string checkpoint_dir;  // "": no checkpoints
  nlohmann::json checkpoint_owner;
  // Resume only from a checkpoint at or before this step (its worker recorded the measurements before it, as a lone
  // trial's max_resume_step); -1: from any.
  std::int64_t max_resume_step = -1;
};

}  // namespace dltune
