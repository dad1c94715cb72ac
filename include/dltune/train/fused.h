// Fused trials' members and live reports, without LibTorch in the caller's includes: a sub-study's trials trained
// together as one array model (TrainFused in src/train/fused_training.h; TrainFusedTrials in
// dltune/workloads/train.h). Docs: docs/training.md, "Fused trials".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/hyperparams.h"
#include "dltune/train/trainer.h"

namespace dltune {

// One member: what its lone trial's TrainWorkload call would get beside the shared options.
struct FusedMember {
  HyperParams params;
  std::uint64_t init_seed = 0;
  std::uint64_t data_seed = 0;
  std::string checkpoint_dir;  // "": no checkpoints
  nlohmann::json checkpoint_owner;
};

// What a fused group reports as it trains, per member (its index in TrainFused's `members`), as a lone trial's
// TrainerCallbacks do: its steps (in batches, before each evaluation and at its end), evaluations, checkpoints (and
// those retention deleted), and its end: at once for a member that diverged, else when the group ends. Called on
// the training thread. Default implementations ignore it.
class FusedCallbacks {
 public:
  virtual ~FusedCallbacks() = default;
  virtual void OnTrainSteps(std::size_t /*member*/, const std::vector<StepMetrics>& /*steps*/) {}
  virtual void OnEvaluation(std::size_t /*member*/, std::int64_t /*step*/, const std::vector<EvalMetric>& /*metrics*/) {
  }
  virtual void OnCheckpoint(std::size_t /*member*/, const CheckpointEvent& /*event*/) {}
  virtual void OnEnd(std::size_t /*member*/, const TrainResult& /*result*/) {}
  // Polled after every step: true stops the group there, each member with a checkpoint (resumable alone).
  virtual bool ShouldStop(std::int64_t /*step*/) { return false; }
};

}  // namespace dltune
