// Ghost batch norm (Hoffer et al. 2017, https://arxiv.org/abs/1705.08741): batch norm whose training statistics come
// from "ghost" batches of a fixed virtual size rather than from the whole batch, so that the number of examples behind
// each normalization does not change when the batch size (a hyperparameter the playbook tunes) does.
//
// Training forward, for an input of N examples and virtual batch size V (N must be a multiple of V):
//   - the batch is split, in order, into N/V ghost batches of V consecutive examples; each is normalized with its own
//     mean and biased variance over the examples (and, for 4-D input, H and W). A per-device batch larger than V is
//     thus subsampled into disjoint ghost batches of exactly V examples, as the playbook requires, instead of being
//     normalized with statistics of all N examples;
//   - the running averages are updated once per forward call, with the average over the ghost batches of their means
//     and of their unbiased variances:
//       running_mean = momentum * running_mean + (1 - momentum) * mean_g(mean of ghost batch g)
//       running_var  = momentum * running_var  + (1 - momentum) * mean_g(unbiased variance of ghost batch g)
//     Because a moving average is linear, this equals keeping one average per ghost batch and averaging them (what
//     the playbook calls synchronizing the EMAs), and unlike calling torch::nn::BatchNorm once per ghost batch it
//     advances the averages by one step per training step whatever N/V is.
// Eval forward normalizes with the running averages (any batch size).
//
// `momentum` follows the TensorFlow/Keras/Flax convention used by the playbook: it is the decay of the moving
// averages (default 0.99; the weight kept from the old value). torch::nn::BatchNorm's momentum is the weight of the new
// value: torch_momentum = 1 - momentum. With V == N this module computes what torch::nn::BatchNorm with that momentum
// computes (outputs, running_mean, running_var).
#pragma once

#include <cstdint>
#include <vector>

#include <torch/nn/cloneable.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

namespace dltune {

// Options of GhostBatchNorm; validated by its constructor (which throws Error naming a bad value).
struct GhostBatchNormOptions {
  // Channels C of the [N, C] or [N, C, H, W] input. Must be >= 1.
  std::int64_t num_features = 0;
  // Examples per ghost batch V (the playbook reports ~64 working well). Must be >= 0; 0 means "the whole batch",
  // i.e. ordinary batch norm.
  std::int64_t virtual_batch_size = 64;
  // Decay of the running averages (TF/Flax convention; torch's momentum is 1 - this). Must be in [0, 1).
  double momentum = 0.99;
  // Added to the variance before the square root. Must be > 0.
  double epsilon = 1e-5;
  // Learn a per-channel scale `weight` (init 1) and shift `bias` (init 0).
  bool affine = true;
};

// The module; use it through the GhostBatchNorm holder. Buffers `running_mean` (init 0) and `running_var` (init 1),
// and with `affine` the parameters `weight` and `bias`, are registered under those names (as torch::nn::BatchNorm
// does), so torch::save / torch::load of the module or of a model containing it include them.
// Not thread-safe: a training forward updates the buffers.
class GhostBatchNormImpl : public torch::nn::Cloneable<GhostBatchNormImpl> {
 public:
  explicit GhostBatchNormImpl(GhostBatchNormOptions options);

  // Normalizes `input` ([N, C] or [N, C, H, W], C == num_features) as described at the top of this file, in training
  // or eval mode as the module is set. Throws Error on a wrong rank or channel count, on N not a multiple of
  // virtual_batch_size in training, or on a ghost batch with a single value per channel in training.
  torch::Tensor forward(const torch::Tensor& input);

  // (Re)creates the parameters and buffers; called by the constructor and by clone().
  void reset() override;
  // Sets running_mean to 0 and running_var to 1.
  void ResetRunningStats();

  const GhostBatchNormOptions& options() const { return options_; }

  torch::Tensor running_mean;
  torch::Tensor running_var;
  // Undefined when !options().affine.
  torch::Tensor weight;
  torch::Tensor bias;

 private:
  GhostBatchNormOptions options_;
};

TORCH_MODULE(GhostBatchNorm);

// Replaces the running averages of every replica (one per device of a data-parallel model) by their mean, so that
// all replicas, and the checkpoint written from any of them, hold the same statistics. The playbook warns that
// implementations saving only the first device's averages lose the others. Throws Error when `replicas` is empty or
// their num_features differ.
void SynchronizeRunningStats(const std::vector<GhostBatchNorm>& replicas);

}  // namespace dltune
