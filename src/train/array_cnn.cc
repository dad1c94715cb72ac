#include "array_cnn.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dltune/core/error.h"
#include "standardize.h"

namespace dltune {
namespace {

// The lone model's child module `name`; Error when it has none.
const torch::nn::Module& Child(const Model& model, const std::string& name) {
  for (const auto& child : model.named_children()) {
    if (child.key() == name) return *child.value();
  }
  throw Error(fmt::format("array CNN: the lone model has no module {} (not the built-in CNN)", name));
}

// A fixed batch of 4 images in [0, 1): a probe that needs no random generator.
torch::Tensor ProbeImages() { return torch::sin(torch::arange(4 * 784, torch::kFloat).reshape({4, 784})).abs(); }

}  // namespace

ArrayCnn::ArrayCnn(const std::vector<std::shared_ptr<Model>>& members, std::optional<InputStandardization> standardize,
                   const torch::Device& device)
    : ArrayModel(members, "array CNN", device), standardize_(standardize), dropout_(DropoutOf(members)) {
  for (const char* name : {"conv1.weight", "conv2.weight", "dense.weight", "output.weight"}) Array(name);
  const Model& first = *members.front();
  for (const std::string name : {"norm1", "norm2", "norm3"}) {
    const torch::nn::Module& lone = Child(first, name);
    NormLayer layer{.name = name};
    Norm kind = Norm::kNone;
    if (const auto* batch2d = dynamic_cast<const torch::nn::BatchNorm2dImpl*>(&lone)) {
      kind = Norm::kBatch;
      layer.momentum = batch2d->options.momentum().value_or(0.1);
      layer.epsilon = batch2d->options.eps();
    } else if (const auto* batch1d = dynamic_cast<const torch::nn::BatchNorm1dImpl*>(&lone)) {
      kind = Norm::kBatch;
      layer.momentum = batch1d->options.momentum().value_or(0.1);
      layer.epsilon = batch1d->options.eps();
    } else if (const auto* ghost = dynamic_cast<const GhostBatchNormImpl*>(&lone)) {
      kind = Norm::kGhost;
      for (std::int64_t m = 0; m < this->members(); ++m) {
        // Member m's layer normalizes with, and updates, its slice of the array's running averages.
        GhostBatchNorm member(ghost->options());
        member->running_mean = Array(name + ".running_mean")[m];
        member->running_var = Array(name + ".running_var")[m];
        layer.ghost.push_back(member);
      }
    } else if (dynamic_cast<const torch::nn::IdentityImpl*>(&lone) == nullptr) {
      throw Error(
          fmt::format("array CNN: {} is neither batch norm nor ghost batch norm (layer norm does not fuse)", name));
    }
    if (name != "norm1" && kind != norm_) throw Error("array CNN: the lone model's norm layers differ in kind");
    norm_ = kind;
    norms_.push_back(std::move(layer));
  }
  for (const NormLayer& layer : norms_) {
    // The built-in CNN's norm layers scale and shift (torch's and GhostBatchNorm's default).
    if (norm_ != Norm::kNone && !Has(layer.name + ".weight")) {
      throw Error("array CNN: batch norm without scale and shift does not fuse");
    }
  }
  CheckAgainstLoneModels(members, ProbeImages());
}

torch::Tensor ArrayCnn::Normalize(NormLayer& layer, std::int64_t member, const torch::Tensor& x) {
  if (norm_ == Norm::kNone) return x;
  const torch::Tensor weight = Array(layer.name + ".weight")[member];  // views: the gradients reach the array's
  const torch::Tensor bias = Array(layer.name + ".bias")[member];
  if (norm_ == Norm::kGhost) {
    GhostBatchNorm& ghost = layer.ghost[static_cast<std::size_t>(member)];
    ghost->train(is_training());
    ghost->weight = weight;
    ghost->bias = bias;
    return ghost->forward(x);
  }
  if (is_training()) {
    torch::NoGradGuard no_grad;
    Array(layer.name + ".num_batches_tracked")[member].add_(1);
  }
  return torch::batch_norm(x, weight, bias, Array(layer.name + ".running_mean")[member],
                           Array(layer.name + ".running_var")[member], is_training(), layer.momentum, layer.epsilon,
                           at::globalContext().userEnabledCuDNN());
}

torch::Tensor ArrayCnn::ForwardStacked(const torch::Tensor& inputs) {
  const std::int64_t members = this->members();
  if (inputs.dim() < 3 || inputs.size(0) != members) {
    throw Error(fmt::format("array CNN: inputs of shape [{}] are not [{}, batch, ...]", fmt::join(inputs.sizes(), ", "),
                            members));
  }
  torch::Tensor x = inputs.reshape({members, inputs.size(1), 1, 28, 28});
  // The lone model's own standardization (one pass on the CPU, its two element-wise operations elsewhere).
  if (standardize_) x = Standardize(x, standardize_->mean, standardize_->std);
  // Conv, norm, ReLU and max-pool, member by member on its own contiguous slice [B, C, H, W], stacked: each
  // member's calls, forward and backward (a stack's gradient is contiguous slices), are its lone model's.
  const auto conv_block = [&](const torch::Tensor& input, const std::string& conv, NormLayer& norm) {
    const torch::Tensor& weight = Array(conv + ".weight");
    const torch::Tensor& bias = Array(conv + ".bias");
    std::vector<torch::Tensor> outputs;
    for (std::int64_t m = 0; m < members; ++m) {
      const torch::Tensor y = Normalize(norm, m, torch::conv2d(input[m], weight[m], bias[m], 1, 1));
      outputs.push_back(torch::max_pool2d(torch::relu(y), 2));
    }
    return torch::stack(outputs);
  };
  x = conv_block(x, "conv1", norms_[0]);
  x = conv_block(x, "conv2", norms_[1]).flatten(2);                // [M, B, C x 7 x 7], as each lone flatten(1)
  x = ArrayLinear(x, Array("dense.weight"), Array("dense.bias"));  // [M, B, D]
  if (norm_ != Norm::kNone) {
    std::vector<torch::Tensor> outputs;
    for (std::int64_t m = 0; m < members; ++m) outputs.push_back(Normalize(norms_[2], m, x[m]));
    x = torch::stack(outputs);
  }
  x = MemberDropout(torch::relu(x), dropout_);
  return ArrayLinear(x, Array("output.weight"), Array("output.bias"));
}

}  // namespace dltune
