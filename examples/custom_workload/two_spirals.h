// A user's own workload: the two-spirals problem with a small ReLU MLP, registered under a name and trained by the
// playbook trainer (evaluation at step intervals, checkpoints, resume), alone or several trials fused into one array
// model (Fusion below) — no change to dltune needed. two_spirals.cc trains it; dltune's tests train it too.
#pragma once

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dltune/core/error.h"
#include "dltune/train/workload.h"
#include "dltune/workloads/registry.h"

namespace two_spirals {

// The spread of the points' coordinates, which the model standardizes its inputs with.
inline constexpr double kInputMean = 0.0;
inline constexpr double kInputStd = 0.42;

// Points on two interleaved spirals, labelled by spiral, with a little noise. Drawn from a generator of their own:
// loading the data leaves torch's global generator, which the trainer seeds for initialization and dropout, alone.
inline dltune::Dataset Spirals(std::int64_t count, std::uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  const torch::Tensor t = torch::rand({count}, generator) * 3 * M_PI + 0.5;
  const torch::Tensor label = torch::randint(0, 2, {count}, generator, torch::kLong);
  const torch::Tensor sign = label.to(torch::kFloat) * 2 - 1;
  const torch::Tensor x = sign * t * torch::cos(t) / 10 + torch::randn({count}, generator) * 0.02;
  const torch::Tensor y = sign * t * torch::sin(t) / 10 + torch::randn({count}, generator) * 0.02;
  return {torch::stack({x, y}, 1), label};
}

// `depth` hidden layers of `width` units (Linear, ReLU, dropout) and an output layer, on standardized coordinates.
// Its parameters are each dense layer's weight and bias in order and its dropout a child module "dropout": the
// network ArrayNetwork::Kind::kMlp describes, so that its trials can fuse.
class SpiralNet : public dltune::Model {
 public:
  SpiralNet(std::int64_t width, std::int64_t depth, double dropout) : dropout_rate_(dropout) {
    std::int64_t inputs = 2;
    for (std::int64_t i = 0; i < depth; ++i) {
      hidden_.push_back(register_module("hidden" + std::to_string(i), torch::nn::Linear(inputs, width)));
      inputs = width;
    }
    output_ = register_module("output", torch::nn::Linear(inputs, 2));
    dropout_ = register_module("dropout", torch::nn::Dropout(dropout));
  }

  torch::Tensor Forward(const torch::Tensor& inputs) override {
    torch::Tensor x = (inputs.flatten(1) - kInputMean) / kInputStd;
    for (auto& layer : hidden_) {
      x = torch::relu(layer->forward(x));
      if (dropout_rate_ > 0) x = dropout_->forward(x);
    }
    return output_->forward(x);
  }

 private:
  double dropout_rate_;
  std::vector<torch::nn::Linear> hidden_;
  torch::nn::Linear output_{nullptr};
  torch::nn::Dropout dropout_{nullptr};
};

class TwoSpirals : public dltune::Workload {
 public:
  std::string name() const override { return "two_spirals"; }
  std::int64_t num_classes() const override { return 2; }
  const dltune::WorkloadData& Data() override {
    if (!data_) data_ = dltune::WorkloadData{Spirals(4000, 1), Spirals(1000, 2), Spirals(1000, 3)};
    return *data_;
  }
  // Reads its own hyperparameters: `width` and `depth` of the hidden layers, `dropout`.
  std::shared_ptr<dltune::Model> BuildModel(const dltune::HyperParams& params) override {
    const std::int64_t width = params.Int("width", 64);
    const std::int64_t depth = params.Int("depth", 2);
    const double dropout = params.Real("dropout", 0.0);
    if (width < 1 || depth < 1) throw dltune::Error("two_spirals: width and depth must be at least 1");
    if (!(dropout >= 0 && dropout < 1)) throw dltune::Error("two_spirals: dropout must be in [0, 1)");
    return std::make_shared<SpiralNet>(width, depth, dropout);
  }
  // Its trials can train fused: the model is a chain of dense ReLU layers that standardizes its inputs so.
  std::optional<dltune::ArrayNetwork> Fusion() const override {
    return dltune::ArrayNetwork{.kind = dltune::ArrayNetwork::Kind::kMlp,
                                .standardize = dltune::InputStandardization{kInputMean, kInputStd}};
  }

 private:
  std::optional<dltune::WorkloadData> data_;
};

// Registers TwoSpirals as "two_spirals".
inline void Register() {
  dltune::RegisterWorkload("two_spirals", [](const nlohmann::json&) { return std::make_unique<TwoSpirals>(); });
}

}  // namespace two_spirals
