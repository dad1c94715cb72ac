// What a trial's state.pt holds beside its model's and optimizer's archives: the keys the lone trainer and a fused
// group both write and read, so that a fused member's checkpoint is a lone trial's (docs/training.md, "Checkpoints").
#pragma once

#include <cstdint>
#include <optional>

#include <torch/torch.h>

namespace dltune {

struct TrainingProgress {
  std::int64_t step = 0;
  std::optional<std::int64_t> best_step;
  std::optional<double> best_value;
  std::optional<double> initial_loss;
  torch::Tensor cpu_generator;  // the state of the generator dropout draws from on the CPU
};

// Writes `progress` ("step", "best_step", "best_value", "initial_loss", "cpu_generator"; an unset optional as -1 or
// NaN) and "threads", the intra-op thread count, which a resumed run with threads left to it takes again (sums over
// other threads round differently).
void WriteProgress(torch::serialize::OutputArchive& archive, const TrainingProgress& progress, std::int64_t threads);
// Reads what WriteProgress wrote (but the threads), its tensors on the CPU.
TrainingProgress ReadProgress(torch::serialize::InputArchive& archive);

}  // namespace dltune
