// The training hyperparameters a trial's params give the trainer, read the same way by the lone trainer and by fused
// trials (fused_training.h).
#pragma once

#include <cstdint>

#include "core/schedule.h"
#include "dltune/core/hyperparams.h"
#include "optimizer.h"

namespace dltune {

// The training hyperparameters, read from the trial's params.
struct TrainingHyperParams {
  std::int64_t batch_size = 128;
  OptimizerOptions optimizer;
  ScheduleOptions schedule;
  double grad_clip_norm = 0;   // 0: no clipping
  double label_smoothing = 0;  // the training loss's targets: 1 - e on the label, e spread over every class
  double ema_decay = 0;        // 0: no moving average of the weights; else evaluated and exported with it
};

// Reads and validates them; throws Error naming a bad value.
TrainingHyperParams ReadTrainingHyperParams(const HyperParams& params, std::int64_t max_train_steps);

// The stream of MixSeed(data_seed, ·) that seeds the global generator (dropout) once the model is built.
inline constexpr std::uint64_t kDropoutStream = 0xD209;

}  // namespace dltune
