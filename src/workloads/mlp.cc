#include <fmt/format.h>
#include <torch/torch.h>

#include "dltune/core/error.h"
#include "models.h"

namespace dltune::internal {

torch::Tensor Activate(const std::string& name, const torch::Tensor& x) {
  if (name == "relu") return torch::relu(x);
  if (name == "gelu") return torch::gelu(x);
  if (name == "tanh") return torch::tanh(x);
  if (name == "sigmoid") return torch::sigmoid(x);
  if (name == "silu") return torch::silu(x);
  if (name == "leaky_relu") return torch::leaky_relu(x, 0.01);
  throw Error(fmt::format("activation '{}' is not one of relu, gelu, tanh, sigmoid, silu, leaky_relu", name));
}

void CheckActivation(const std::string& name) { Activate(name, torch::zeros({1})); }

namespace {

class Mlp final : public Model {
 public:
  explicit Mlp(const MlpOptions& options) : options_(options) {
    std::int64_t width = options.inputs;
    for (std::size_t i = 0; i < options.hidden_sizes.size(); ++i) {
      layers_.push_back(register_module(fmt::format("dense{}", i), torch::nn::Linear(width, options.hidden_sizes[i])));
      width = options.hidden_sizes[i];
      if (options.normalization == "batch") {
        norms_.emplace_back(register_module(fmt::format("norm{}", i), torch::nn::BatchNorm1d(width)));
      } else if (options.normalization == "layer") {
        norms_.emplace_back(
            register_module(fmt::format("norm{}", i), torch::nn::LayerNorm(torch::nn::LayerNormOptions({width}))));
      }
    }
    output_ = register_module("output", torch::nn::Linear(width, options.outputs));
    dropout_ = register_module("dropout", torch::nn::Dropout(options.dropout));
  }

  torch::Tensor Forward(const torch::Tensor& inputs) override {
    torch::Tensor x = inputs.flatten(1);
    if (options_.standardize) x = Standardize(x, options_.standardize->mean, options_.standardize->std);
    for (std::size_t i = 0; i < layers_.size(); ++i) {
      x = layers_[i]->forward(x);
      if (!norms_.empty()) x = norms_[i].forward(x);
      x = Activate(options_.activation, x);
      if (options_.dropout > 0) x = dropout_->forward(x);
    }
    return output_->forward(x);
  }

 private:
  MlpOptions options_;
  std::vector<torch::nn::Linear> layers_;
  std::vector<torch::nn::AnyModule> norms_;
  torch::nn::Linear output_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

}  // namespace

std::shared_ptr<Model> MakeMlp(const MlpOptions& options) {
  if (options.hidden_sizes.empty()) throw Error("hidden_sizes must list at least one layer width");
  for (const auto size : options.hidden_sizes) {
    if (size < 1) throw Error(fmt::format("hidden_sizes must be positive, not {}", size));
  }
  if (!(options.dropout >= 0.0 && options.dropout < 1.0)) {
    throw Error(fmt::format("dropout must be in [0, 1), not {}", options.dropout));
  }
  CheckActivation(options.activation);
  if (options.normalization != "none" && options.normalization != "batch" && options.normalization != "layer") {
    throw Error(fmt::format("normalization '{}' is not one of none, batch, layer", options.normalization));
  }
  return std::make_shared<Mlp>(options);
}

}  // namespace dltune::internal
