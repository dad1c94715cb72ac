// `dltune train`: one workload trained once with given hyperparameters, outside any study, into a directory of its own
// (docs/training.md): every measurement to DIR/metrics.jsonl, checkpoints to DIR/checkpoints/ (resumed from when the
// same training runs again), and with training.processes > 1 the other data-parallel ranks started on this machine
// (docs/data-parallel.md).
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/objective.h"
#include "dltune/core/training_settings.h"
#include "dltune/core/value.h"
#include "dltune/train/trainer.h"

namespace dltune {

// What rank 0 tells its caller as it trains, e.g. to print it: the trainer's OnTrainMetrics and OnEvaluation (each
// once metrics.jsonl holds it), and the start of the other ranks. Its ShouldStop is not asked.
class TrainByHandProgress : public TrainerCallbacks {
 public:
  // Ranks 1 to `processes` - 1 were started on this machine, each writing its output to `out`/rank_<r>.log.
  virtual void OnLocalRanksStarted(int processes, const std::filesystem::path& out) { (void)processes, (void)out; }
};

struct TrainByHandRequest {
  std::string workload;
  nlohmann::json workload_args = nlohmann::json::object();  // lists and mappings, e.g. hidden_sizes
  std::map<std::string, Value> params;
  std::int64_t max_train_steps = 0;
  std::uint64_t seed = 0;  // initialization and data order
  TrainingSettings training;
  Objective objective;
  std::filesystem::path out;      // made when missing
  std::int64_t stop_at_step = 0;  // stop after this step with a checkpoint, as if interrupted; 0: not before the end
  // The words of this command after the program's path: ranks 1 to N - 1 of training.processes N started by hand
  // run the same command.
  std::vector<std::string> command_words;
  const std::atomic<bool>* stop_requested = nullptr;  // once true (Ctrl-C, SIGTERM), stop after a checkpoint
  TrainByHandProgress* progress = nullptr;            // rank 0's; may be null
};

struct TrainByHandResult {
  TrainResult result;
  // The trainer's options as this process trained: the threads worked out for data-parallel ranks (0: auto), the rank
  // among them and the checkpoint directory.
  TrainerOptions options;
};

// Trains `request` into request.out: its checkpoints belong to this workload, seed and hyperparameters
// (TrainByHandCheckpointOwner), so a directory trained with others is refused rather than resumed. With
// training.processes > 1 a data-parallel rank trains: with RANK or SLURM_PROCID in the environment the one a launcher
// made of this process; without, this process becomes rank 0 and starts the others on this machine as copies of the
// command, waiting for them after training. Rank 0 writes the metrics and checkpoints; another rank writes nothing.
// Throws Error when the training cannot start or fails.
TrainByHandResult TrainByHand(const TrainByHandRequest& request);

}  // namespace dltune
