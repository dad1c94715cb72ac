#include <fmt/format.h>
#include <torch/torch.h>

#include "dltune/core/error.h"
#include "models.h"
#include "train/batch_norm.h"

namespace dltune::internal {
namespace {

// A normalization layer over `channels` features of a [N, C, H, W] (spatial) or [N, C] input.
torch::nn::AnyModule MakeNorm(const CnnOptions& options, std::int64_t channels, std::vector<std::int64_t> shape,
                              bool spatial) {
  if (options.normalization == "batch") {
    if (spatial) return torch::nn::AnyModule(torch::nn::BatchNorm2d(channels));
    return torch::nn::AnyModule(torch::nn::BatchNorm1d(channels));
  }
  if (options.normalization == "ghost") {
    return torch::nn::AnyModule(GhostBatchNorm(
        GhostBatchNormOptions{.num_features = channels, .virtual_batch_size = options.virtual_batch_size}));
  }
  if (options.normalization == "layer")
    return torch::nn::AnyModule(torch::nn::LayerNorm(torch::nn::LayerNormOptions(shape)));
  return torch::nn::AnyModule(torch::nn::Identity());
}

class Cnn final : public Model {
 public:
  explicit Cnn(const CnnOptions& options) : options_(options) {
    const std::int64_t c1 = options.conv_channels[0];
    const std::int64_t c2 = options.conv_channels[1];
    conv1_ = register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, c1, 3).padding(1)));
    conv2_ = register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(c1, c2, 3).padding(1)));
    norm1_ = MakeNorm(options, c1, {c1, 28, 28}, true);
    norm2_ = MakeNorm(options, c2, {c2, 14, 14}, true);
    norm3_ = MakeNorm(options, options.dense_size, {options.dense_size}, false);
    register_module("norm1", norm1_.ptr());
    register_module("norm2", norm2_.ptr());
    register_module("norm3", norm3_.ptr());
    dense_ = register_module("dense", torch::nn::Linear(c2 * 7 * 7, options.dense_size));
    output_ = register_module("output", torch::nn::Linear(options.dense_size, options.outputs));
    dropout_ = register_module("dropout", torch::nn::Dropout(options.dropout));
  }

  torch::Tensor Forward(const torch::Tensor& inputs) override {
    torch::Tensor x = inputs.view({-1, 1, 28, 28});
    if (options_.standardize) x = Standardize(x, options_.standardize->mean, options_.standardize->std);
    x = torch::max_pool2d(Activate(options_.activation, norm1_.forward(conv1_->forward(x))), 2);
    x = torch::max_pool2d(Activate(options_.activation, norm2_.forward(conv2_->forward(x))), 2);
    x = Activate(options_.activation, norm3_.forward(dense_->forward(x.flatten(1))));
    if (options_.dropout > 0) x = dropout_->forward(x);
    return output_->forward(x);
  }

 private:
  CnnOptions options_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::Conv2d conv2_{nullptr};
  torch::nn::AnyModule norm1_;
  torch::nn::AnyModule norm2_;
  torch::nn::AnyModule norm3_;
  torch::nn::Linear dense_{nullptr};
  torch::nn::Linear output_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace

std::shared_ptr<Model> MakeCnn(const CnnOptions& options) {
  if (options.conv_channels.size() != 2) throw Error("conv_channels must list two channel counts, e.g. [32, 64]");
  for (const auto c : options.conv_channels) {
    if (c < 1) throw Error(fmt::format("conv_channels must be positive, not {}", c));
  }
  if (options.dense_size < 1) throw Error("dense_size must be positive");
  const std::vector<std::string> norms = {"none", "batch", "ghost", "layer"};
  if (std::find(norms.begin(), norms.end(), options.normalization) == norms.end()) {
    throw Error(fmt::format("normalization '{}' is not one of none, batch, ghost, layer", options.normalization));
  }
  if (options.normalization == "ghost" && options.virtual_batch_size < 1)
    throw Error("virtual_batch_size must be >= 1");
  if (!(options.dropout >= 0.0 && options.dropout < 1.0)) throw Error("dropout must be in [0, 1)");
  CheckActivation(options.activation);
  return std::make_shared<Cnn>(options);
}

}  // namespace dltune::internal
