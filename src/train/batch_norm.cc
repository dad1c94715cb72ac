#include "train/batch_norm.h"

#include <cmath>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <torch/torch.h>

#include "dltune/core/error.h"

namespace dltune {

GhostBatchNormImpl::GhostBatchNormImpl(GhostBatchNormOptions options) : options_(std::move(options)) {
  if (options_.num_features < 1) {
    throw Error(fmt::format("ghost batch norm: num_features must be >= 1, got {}", options_.num_features));
  }
  if (options_.virtual_batch_size < 0) {
    throw Error(fmt::format("ghost batch norm: virtual_batch_size must be >= 0 (0 = the whole batch), got {}",
                            options_.virtual_batch_size));
  }
  if (!(options_.momentum >= 0.0 && options_.momentum < 1.0)) {
    throw Error(fmt::format("ghost batch norm: momentum (the decay of the running averages) must be in [0, 1), got {}",
                            options_.momentum));
  }
  if (!(options_.epsilon > 0.0 && std::isfinite(options_.epsilon))) {
    throw Error(fmt::format("ghost batch norm: epsilon must be > 0, got {}", options_.epsilon));
  }
  reset();
}

void GhostBatchNormImpl::reset() {
  const std::int64_t channels = options_.num_features;
  if (options_.affine) {
    weight = register_parameter("weight", torch::ones({channels}));
    bias = register_parameter("bias", torch::zeros({channels}));
  } else {
    weight = torch::Tensor();
    bias = torch::Tensor();
  }
  running_mean = register_buffer("running_mean", torch::zeros({channels}));
  running_var = register_buffer("running_var", torch::ones({channels}));
}

void GhostBatchNormImpl::ResetRunningStats() {
  torch::NoGradGuard no_grad;
  running_mean.zero_();
  running_var.fill_(1.0);
}

torch::Tensor GhostBatchNormImpl::forward(const torch::Tensor& input) {
  const std::int64_t rank = input.dim();
  if (rank != 2 && rank != 4) {
    throw Error(fmt::format("ghost batch norm: input must be [N, C] or [N, C, H, W], got {} dimensions", rank));
  }
  const std::int64_t channels = options_.num_features;
  if (input.size(1) != channels) {
    throw Error(
        fmt::format("ghost batch norm: input has {} channels, the layer has num_features {}", input.size(1), channels));
  }
  // Per-channel values broadcast against the input: [1, C] or [1, C, 1, 1].
  std::vector<std::int64_t> channel_shape(static_cast<std::size_t>(rank), 1);
  channel_shape[1] = channels;
  const auto apply_affine = [&](torch::Tensor normalized) {
    if (!options_.affine) return normalized;
    return normalized * weight.view(channel_shape) + bias.view(channel_shape);
  };

  if (!is_training()) {
    const torch::Tensor scale = torch::rsqrt(running_var.view(channel_shape) + options_.epsilon);
    return apply_affine((input - running_mean.view(channel_shape)) * scale);
  }

  const std::int64_t batch = input.size(0);
  const std::int64_t virtual_size = options_.virtual_batch_size == 0 ? batch : options_.virtual_batch_size;
  if (batch == 0 || batch % virtual_size != 0) {
    throw Error(
        fmt::format("ghost batch norm: batch size {} is not a multiple of virtual_batch_size {}", batch, virtual_size));
  }
  const std::int64_t per_channel = virtual_size * (rank == 4 ? input.size(2) * input.size(3) : 1);
  if (per_channel < 2) {
    throw Error(
        fmt::format("ghost batch norm: a ghost batch of {} example(s) of shape {} has a single value per "
                    "channel; its variance is undefined",
                    virtual_size, fmt::join(input.sizes().slice(1), "x")));
  }

  // [G, V, C, ...]: ghost batch g holds examples g*V .. g*V+V-1.
  std::vector<std::int64_t> ghost_shape = {batch / virtual_size, virtual_size};
  for (std::int64_t d = 1; d < rank; ++d) ghost_shape.push_back(input.size(d));
  const torch::Tensor ghosts = input.reshape(ghost_shape);
  std::vector<std::int64_t> reduce_dims = {1};
  if (rank == 4) reduce_dims.insert(reduce_dims.end(), {3, 4});
  const auto [variance, mean] = torch::var_mean(ghosts, reduce_dims, /*unbiased=*/false, /*keepdim=*/true);
  const torch::Tensor normalized = ((ghosts - mean) * torch::rsqrt(variance + options_.epsilon)).reshape(input.sizes());

  {
    // One update per step with the ghost batches' averaged statistics (unbiased variance, as torch's BatchNorm).
    torch::NoGradGuard no_grad;
    const double bessel = static_cast<double>(per_channel) / static_cast<double>(per_channel - 1);
    const torch::Tensor step_mean = mean.mean(0).reshape({channels}).to(running_mean.dtype());
    const torch::Tensor step_var = (variance.mean(0).reshape({channels}) * bessel).to(running_var.dtype());
    running_mean.mul_(options_.momentum).add_(step_mean, 1.0 - options_.momentum);
    running_var.mul_(options_.momentum).add_(step_var, 1.0 - options_.momentum);
  }
  return apply_affine(normalized);
}

void SynchronizeRunningStats(const std::vector<GhostBatchNorm>& replicas) {
  if (replicas.empty()) throw Error("ghost batch norm: no replicas to synchronize");
  const std::int64_t channels = replicas.front()->options().num_features;
  std::vector<torch::Tensor> means;
  std::vector<torch::Tensor> vars;
  const torch::Device device = replicas.front()->running_mean.device();
  for (const GhostBatchNorm& replica : replicas) {
    if (replica->options().num_features != channels) {
      throw Error(fmt::format("ghost batch norm: cannot synchronize replicas with num_features {} and {}", channels,
                              replica->options().num_features));
    }
    means.push_back(replica->running_mean.to(device));
    vars.push_back(replica->running_var.to(device));
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor mean = torch::stack(means).mean(0);
  const torch::Tensor var = torch::stack(vars).mean(0);
  for (const GhostBatchNorm& replica : replicas) {
    replica->running_mean.copy_(mean);
    replica->running_var.copy_(var);
  }
}

}  // namespace dltune
