// Learning-rate schedules: the learning rate eta_t as a pure function of the step t (counting from 0; update t
// uses LearningRate(options, t)). No torch; cheap enough to call every step.
//
// With base = base_learning_rate, W = warmup_steps, M = max_train_steps, f = final_fraction:
//   warmup (any kind, W > 0)  t < W:  eta_t = base * t / W
//       A linear ramp from exactly 0 (the playbook's "ramp up from 0 to base_learning_rate over warmup_steps", and
//       optax.linear_schedule(0, base, W) as the playbook authors' init2winit / AlgoPerf code prepends it): the first
//       update has learning rate 0 (it only fills optimizer state) and eta_W = base.
//   constant      t >= W:  eta_t = base
//   linear        t >= W:  eta_t = base                                   for t < S
//                          eta_t = base * (f + (1 - f) * (1 - p))          for t >= S, p = min(t - S, D) / D
//   cosine        t >= W:  eta_t = base                                   for t < S
//                          eta_t = base * (f + (1 - f) * (1 + cos(pi * p)) / 2)
//       D = decay_steps, or M - W when decay_steps = 0; S = M - D (the decay takes the last D steps and reaches
//       base * f at t = M, one past the last update; steps between W and S hold base).
//   inverse_sqrt  t >= W:  eta_t = base * sqrt(W' / max(t, W')),  W' = max(W, 1)
//       (eta_W = base, then 1/sqrt(t) decay, independent of M; decay_steps and final_fraction are not used)
// Steps at or after M give the value at M.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dltune/core/hyperparams.h"

namespace dltune {

// A learning-rate schedule (formulas in the file comment). All fields are validated whatever the kind.
struct ScheduleOptions {
  std::string kind = "constant";     // constant | linear | cosine | inverse_sqrt
  double base_learning_rate = 0.0;   // the peak learning rate; finite, > 0
  std::int64_t warmup_steps = 0;     // W; 0 <= W < max_train_steps
  std::int64_t decay_steps = 0;      // D of linear/cosine; 0 = max_train_steps - warmup_steps; W + D <= M
  double final_fraction = 0.0;       // linear/cosine end at base * final_fraction; in [0, 1]
  std::int64_t max_train_steps = 0;  // M; > 0

  // Throws Error naming the first bad field and its value, e.g. "schedule: warmup_steps must be in [0, 100), not 100".
  void Validate() const;
};

// The hyperparameters a schedule is read from, and their defaults: schedule (constant), learning_rate (0.01),
// warmup_steps (0), decay_steps (0), final_lr_fraction (0).
struct ScheduleParamNames {
  static constexpr const char* kKind = "schedule";
  static constexpr const char* kLearningRate = "learning_rate";
  static constexpr const char* kWarmupSteps = "warmup_steps";
  static constexpr const char* kDecaySteps = "decay_steps";
  static constexpr const char* kFinalFraction = "final_lr_fraction";
};
// The schedule of a trial with `params`, as the trainer reads it; throws Error for a bad value.
ScheduleOptions ReadSchedule(const HyperParams& params, std::int64_t max_train_steps);

// The schedule kinds.
const std::vector<std::string>& ScheduleKinds();

// eta_t for update `step` (from 0). Throws Error if the options are invalid or step < 0.
double LearningRate(const ScheduleOptions& options, std::int64_t step);

// The playbook's round-2 schedule ("Deciding how long to train when training is compute-bound" > Round 2): the
// extra steps extend the time at a high learning rate. Warmup, base learning rate and final fraction are kept;
//   constant: only max_train_steps changes;
//   linear:   the decay keeps its length D (decay_steps becomes explicit) and the constant part before it grows, so
//             the decay starts new - old steps later;
//   cosine:   the decay is stretched to end at the new max_train_steps (as in the Chinchilla paper); an explicit
//             decay_steps grows by new - old, so a constant hold before the decay keeps its length.
// Throws Error for inverse_sqrt (the playbook warns that extending it trains the extra steps at too small a learning
// rate, and gives no rule), for invalid `round1`, or when new_max_train_steps < round1.max_train_steps.
ScheduleOptions ExtendForRound2(const ScheduleOptions& round1, std::int64_t new_max_train_steps);

}  // namespace dltune
