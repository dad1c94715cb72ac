// Fused trials: M trials of one MLP workload that differ only in their training hyperparameters (and seeds), trained
// together as one array model (array_mlp.h) with one array optimizer (array_optimizer.h) in one process.
//
// Each member follows its lone trial (TrainWorkload with the member's params, init seed and data seed) step for step:
// the same initial weights (the workload's model built after seeding with the init seed, copied in), the same
// batches (its own BatchPipeline on its data seed), the same learning-rate schedule, the same evaluations (its own
// fixed training subset and validation sample, the same splits at the same steps) and the same divergence rule. A
// member whose training loss diverges is masked out at that step (its updates stop) and reported infeasible with the
// lone trainer's reason, while the others train on. At each evaluation (and when stopped) a member with a checkpoint
// directory gets a checkpoint there in the lone trainer's format, from which a lone trial resumes.
//
// A group whose members all hold checkpoints (a group stopped together) resumes from the newest step they share, each
// member as its lone trial would resume from its checkpoint.
//
// The models: the built-in MLP without normalization layers (array_mlp.h) and the built-in CNN with no norm, batch
// norm or ghost batch norm (array_cnn.h), with dropout. What a lone trial has and a member has not: gradient
// clipping, label smoothing, a moving average of the weights, layer norm, data-parallel ranks, predictions: a member
// asking for one is refused (Error). A profile window (training.profile_steps) records one trace of the group's steps,
// written beside the first member's checkpoints and linked from each other member's directory. Docs:
// docs/training.md, "Fused trials".
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "array_model.h"
#include "dltune/core/hyperparams.h"
#include "dltune/core/objective.h"
#include "dltune/core/training_settings.h"
#include "dltune/train/trainer.h"
#include "dltune/train/workload.h"

namespace dltune {

// What the members share: TrainerOptions's fields of the same names (the input standardization is the workload's,
// Workload::Fusion).
struct FusedOptions {
  std::int64_t max_train_steps = 0;
  // > 0: stop after this step, as a lone trial stopped then (ShouldStop) does, with a checkpoint.
  std::int64_t stop_after_step = 0;
  TrainingSettings training;
  Objective objective;
  // Where the group trains: "cpu", or a CUDA device ("cuda", "cuda:1"): the array model, the data and the
  // optimizer's state there (its tensor form), deterministic kernels on; checkpoints are written from the CPU copy of
  // each member's lone model, as on the CPU.
  std::string device = "cpu";
  // How a device trains, on the CPU too (to test it there): the optimizer's tensor form (on the CPU the fused loop),
  // the step captured as a CUDA graph where it can be, and each step's losses and gradient norms left where they are
  // until the next log point (training.log_every_steps) or evaluation, where they are read and the divergence rule
  // applied to each of those steps. Always so on a device.
  bool deferred = false;
  MemberCallbacks* callbacks = nullptr;  // null: none; must outlive TrainFused
};

// What a member's lone trial would have reported.
struct FusedMemberResult {
  TrainResult result;  // outcome, reason, steps, best step and value, final value
  // Every step's loss, learning rate and gradient norm, and its timings as a lone trial's: its share of the group's
  // time between two reads of the steps (step_time, of which data_wait gathering the batches) and the member's
  // examples per second at that step time.
  std::vector<StepMetrics> steps;
  std::vector<std::pair<std::int64_t, std::vector<EvalMetric>>> evaluations;  // by step
  std::vector<std::string> checkpoints;                                       // the directories written
};

// Trains `members` (at least one) of `workload` together. Throws Error for bad options or params, members that
// differ in batch size or model widths, and anything fused trials do not do (see above). Members may differ in
// optimizer kind: those of one kind next to each other update together (array_optimizer.h).
std::vector<FusedMemberResult> TrainFused(Workload& workload, const std::vector<FusedMember>& members,
                                          const FusedOptions& options);

}  // namespace dltune
