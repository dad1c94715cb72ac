// An array MLP (array_model.h): M members of one multilayer perceptron trained as one model.
//
// Member m's dense layer l is its lone Linear's weight ([out, in]) and bias ([out]) at slice m of the array tensors;
// a forward pass takes each member its own batch, inputs [M, B, ...], and runs each layer as one batched product over
// the member dimension (ArrayLinear), giving logits [M, B, classes]. Each member's products are the very BLAS calls of
// its lone model (the same operands, the same transposition flags; LibTorch's CPU baddbmm runs one addmm per member),
// forward and backward, so a member's logits and gradients are bit-identical to the lone model's. The architecture is
// ArrayNetwork::Kind::kMlp's (dltune/train/workload.h), the built-in MLP's without normalization layers: inputs
// flattened and optionally standardized inside the model, Linear + ReLU (+ dropout) hidden layers, a Linear output.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "array_model.h"

namespace dltune {

class ArrayMlp : public ArrayModel {
 public:
  // Copies `members` (at least one), each a lone MLP whose parameters are, in order, the weight ([out, in]) and bias
  // ([out]) of each dense layer, every member of the same widths and dropout rate. Checks on a fixed probe batch that
  // each member's forward here gives the lone model's logits. Throws Error for another architecture (normalization
  // layers, another activation, other widths, a standardization that differs).
  ArrayMlp(const std::vector<std::shared_ptr<Model>>& members, std::optional<InputStandardization> standardize,
           const torch::Device& device = torch::kCPU);

  torch::Tensor ForwardStacked(const torch::Tensor& inputs) override;
  // Standardizes the batch once, then every member's layers on it.
  torch::Tensor ForwardShared(const torch::Tensor& inputs) override;

 private:
  // x [..., features], flattened inputs: standardized as the lone model does, when it does.
  torch::Tensor Standardized(torch::Tensor x) const;
  // The dense layers on x [M, B, features]: logits [M, B, classes].
  torch::Tensor Layers(torch::Tensor x);

  std::optional<InputStandardization> standardize_;
  double dropout_ = 0;
  std::vector<torch::Tensor> weights_;  // [M, out, in] per layer
  std::vector<torch::Tensor> biases_;   // [M, out] per layer
};

}  // namespace dltune
