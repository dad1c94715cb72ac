// Internal: the networks of the built-in workloads.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "dltune/train/workload.h"
#include "train/standardize.h"

namespace dltune::internal {

// Pixel statistics of Fashion-MNIST's training images, for standardizing inputs inside the models.
inline constexpr double kFashionMnistMean = 0.2860;
inline constexpr double kFashionMnistStd = 0.3530;
inline constexpr InputStandardization kFashionMnistStandardization{kFashionMnistMean, kFashionMnistStd};

// The activation named `name` (relu, gelu, tanh, sigmoid, silu, leaky_relu) applied to `x`; Error for other names.
torch::Tensor Activate(const std::string& name, const torch::Tensor& x);
// Throws Error unless `name` is an activation Activate knows.
void CheckActivation(const std::string& name);

struct MlpOptions {
  std::int64_t inputs = 784;
  std::vector<std::int64_t> hidden_sizes = {256};
  std::int64_t outputs = 10;
  std::string activation = "relu";
  double dropout = 0.0;
  std::string normalization = "none";  // none | batch | layer, after each hidden layer (before the activation)
  std::optional<InputStandardization> standardize;  // applied to the flattened inputs first
};

// A multilayer perceptron on flattened inputs.
std::shared_ptr<Model> MakeMlp(const MlpOptions& options);

struct CnnOptions {
  std::vector<std::int64_t> conv_channels = {32, 64};  // two conv blocks: conv 3x3 -> norm -> activation -> max-pool 2
  std::int64_t dense_size = 128;
  std::int64_t outputs = 10;
  std::string normalization = "none";    // none | batch | ghost | layer
  std::int64_t virtual_batch_size = 32;  // ghost batch norm
  std::string activation = "relu";
  double dropout = 0.0;                                                            // before the last dense layer
  std::optional<InputStandardization> standardize = kFashionMnistStandardization;  // applied to the images first
};

// Two conv blocks and two dense layers on [N, 1, 28, 28] images.
std::shared_ptr<Model> MakeCnn(const CnnOptions& options);

}  // namespace dltune::internal
