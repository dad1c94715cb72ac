#include "training_hyperparams.h"

#include <string>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

// `name`, or 1 - `one_minus_name` (how momentum-like params are usually searched, on a log scale).
double ReadMomentumLike(const HyperParams& params, const std::string& name, double fallback) {
  if (const auto complement = params.MaybeReal("one_minus_" + name)) return 1.0 - *complement;
  return params.Real(name, fallback);
}

}  // namespace

TrainingHyperParams ReadTrainingHyperParams(const HyperParams& params, std::int64_t max_train_steps) {
  TrainingHyperParams hp;
  hp.batch_size = params.Int("batch_size", 128);
  if (hp.batch_size < 1) throw Error(fmt::format("batch_size must be >= 1, not {}", hp.batch_size));
  hp.optimizer.kind = params.Text("optimizer", "sgd");
  hp.optimizer.momentum = ReadMomentumLike(params, "momentum", 0.9);
  hp.optimizer.rho = params.Real("rho", 0.9);
  hp.optimizer.beta1 = ReadMomentumLike(params, "beta1", 0.9);
  hp.optimizer.beta2 = ReadMomentumLike(params, "beta2", 0.999);
  hp.optimizer.epsilon = params.Real("epsilon", 1e-8);
  hp.optimizer.weight_decay = params.Real("weight_decay", 0.0);
  hp.optimizer.decoupled_weight_decay = params.Bool("decoupled_weight_decay", false);
  hp.optimizer.Validate();
  hp.schedule = ReadSchedule(params, max_train_steps);
  hp.grad_clip_norm = params.Real("grad_clip_norm", 0.0);
  if (hp.grad_clip_norm < 0) throw Error(fmt::format("grad_clip_norm must be >= 0, not {}", hp.grad_clip_norm));
  hp.label_smoothing = params.Real("label_smoothing", 0.0);
  if (!(hp.label_smoothing >= 0 && hp.label_smoothing < 1)) {
    throw Error(fmt::format("label_smoothing must be in [0, 1), not {}", hp.label_smoothing));
  }
  hp.ema_decay = params.Real("ema_decay", 0.0);
  if (!(hp.ema_decay >= 0 && hp.ema_decay < 1)) {
    throw Error(fmt::format("ema_decay must be in [0, 1) (0: no moving average), not {}", hp.ema_decay));
  }
  return hp;
}

}  // namespace dltune
