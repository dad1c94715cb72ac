// What a trial's state.pt holds, written and read here alone for the lone trainer and a fused group, so that a fused
// member's checkpoint is a lone trial's (docs/training.md, "Checkpoints").
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

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

// A trial's state.pt, as both trainers write it: the model's archive under "model", the optimizer's (written by
// `save_optimizer`) under "optimizer", the progress and threads (WriteProgress), then whatever `more` adds (the lone
// trainer's CUDA generator, moving averages, ranks' generators). Returns its bytes.
std::string WriteTrainingState(const torch::nn::Module& model,
                               const std::function<void(torch::serialize::OutputArchive&)>& save_optimizer,
                               const TrainingProgress& progress, std::int64_t threads,
                               const std::function<void(torch::serialize::OutputArchive&)>& more = nullptr);
// Reads state.pt's `bytes` into `archive` (its tensors onto `device`; without one, where they were saved): the model's
// archive into `model`, the optimizer's through `load_optimizer`. Returns the progress; the other keys stay in
// `archive` for the caller.
TrainingProgress ReadTrainingState(const std::string& bytes, c10::optional<torch::Device> device,
                                   torch::nn::Module& model,
                                   const std::function<void(torch::serialize::InputArchive&)>& load_optimizer,
                                   torch::serialize::InputArchive& archive);

}  // namespace dltune
