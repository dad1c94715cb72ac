#include "core/schedule.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

constexpr double kPi = 3.14159265358979323846;

// D of linear/cosine: the explicit decay_steps or everything after warmup.
std::int64_t DecayLength(const ScheduleOptions& options) {
  return options.decay_steps > 0 ? options.decay_steps : options.max_train_steps - options.warmup_steps;
}

}  // namespace

const std::vector<std::string>& ScheduleKinds() {
  static const std::vector<std::string> kKinds = {"constant", "linear", "cosine", "inverse_sqrt"};
  return kKinds;
}

void ScheduleOptions::Validate() const {
  const auto& kinds = ScheduleKinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    throw Error(fmt::format("schedule: unknown kind '{}'; kinds: {}", kind, fmt::join(kinds, ", ")));
  }
  if (!(std::isfinite(base_learning_rate) && base_learning_rate > 0.0)) {
    throw Error(fmt::format("schedule: base_learning_rate must be finite and > 0, not {}", base_learning_rate));
  }
  if (max_train_steps <= 0) throw Error(fmt::format("schedule: max_train_steps must be > 0, not {}", max_train_steps));
  if (warmup_steps < 0 || warmup_steps >= max_train_steps) {
    throw Error(fmt::format("schedule: warmup_steps must be in [0, max_train_steps = {}), not {}", max_train_steps,
                            warmup_steps));
  }
  if (decay_steps < 0 || decay_steps > max_train_steps - warmup_steps) {
    throw Error(fmt::format("schedule: decay_steps must be in [0, max_train_steps - warmup_steps = {}], not {}",
                            max_train_steps - warmup_steps, decay_steps));
  }
  if (!(final_fraction >= 0.0 && final_fraction <= 1.0)) {
    throw Error(fmt::format("schedule: final_fraction must be in [0, 1], not {}", final_fraction));
  }
}

ScheduleOptions ReadSchedule(const HyperParams& params, std::int64_t max_train_steps) {
  using Names = ScheduleParamNames;
  ScheduleOptions schedule;
  schedule.kind = params.Text(Names::kKind, "constant");
  schedule.base_learning_rate = params.Real(Names::kLearningRate, 0.01);
  schedule.warmup_steps = params.Int(Names::kWarmupSteps, 0);
  schedule.decay_steps = params.Int(Names::kDecaySteps, 0);
  schedule.final_fraction = params.Real(Names::kFinalFraction, 0.0);
  schedule.max_train_steps = max_train_steps;
  schedule.Validate();
  return schedule;
}

double LearningRate(const ScheduleOptions& options, std::int64_t step) {
  options.Validate();
  if (step < 0) throw Error(fmt::format("schedule: step must be >= 0, not {}", step));
  const double base = options.base_learning_rate;
  const std::int64_t t = std::min(step, options.max_train_steps);
  const std::int64_t warmup = options.warmup_steps;
  if (t < warmup) return base * static_cast<double>(t) / static_cast<double>(warmup);

  if (options.kind == "constant") return base;
  if (options.kind == "inverse_sqrt") {
    const auto scale = static_cast<double>(std::max<std::int64_t>(warmup, 1));
    return base * std::sqrt(scale / std::max(static_cast<double>(t), scale));
  }
  // linear or cosine
  const std::int64_t decay = DecayLength(options);
  const std::int64_t start = options.max_train_steps - decay;
  if (t < start) return base;
  const double f = options.final_fraction;
  // 1 - p as one division of integers: exact where it can be (step 99 of 100 gives exactly 0.01).
  const double remaining = static_cast<double>(decay - (t - start)) / static_cast<double>(decay);
  if (options.kind == "linear") return base * (f + (1.0 - f) * remaining);
  const double progress = static_cast<double>(t - start) / static_cast<double>(decay);
  return base * (f + (1.0 - f) * 0.5 * (1.0 + std::cos(kPi * progress)));
}

ScheduleOptions ExtendForRound2(const ScheduleOptions& round1, std::int64_t new_max_train_steps) {
  round1.Validate();
  if (new_max_train_steps < round1.max_train_steps) {
    throw Error(fmt::format("schedule: round 2 max_train_steps {} is below round 1's {}", new_max_train_steps,
                            round1.max_train_steps));
  }
  if (round1.kind == "inverse_sqrt") {
    throw Error(
        "schedule: inverse_sqrt has no round-2 extension: its extra steps would all run at an overly small learning "
        "rate (playbook, Round 1); use linear or cosine, or set max_train_steps yourself");
  }
  ScheduleOptions round2 = round1;
  round2.max_train_steps = new_max_train_steps;
  const std::int64_t extra = new_max_train_steps - round1.max_train_steps;
  if (round1.kind == "linear") round2.decay_steps = DecayLength(round1);
  if (round1.kind == "cosine" && round1.decay_steps > 0) round2.decay_steps = round1.decay_steps + extra;
  round2.Validate();
  return round2;
}

}  // namespace dltune
