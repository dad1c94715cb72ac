// An array MLP: M members of one multilayer perceptron trained as one model (HFTA, Wang et al., MLSys 2021).
//
// Member m's dense layer l is weights_[l][m] ([in, out]) and biases_[l][m] ([out]); a forward pass takes each member
// its own batch, inputs [M, B, ...], and runs each layer as one batched product over the member dimension
// (torch::baddbmm), giving logits [M, B, classes]. The architecture is the built-in MLP's without its options: inputs
// flattened and optionally standardized inside the model, Linear + ReLU hidden layers, a Linear output.
//
// Members are built from lone models (Workload::BuildModel, each after seeding torch's generator with the member's
// init seed) and copy their parameters, so fused and lone training start from identical weights; CopyMemberInto
// writes a member back into a lone model (to save it as a lone trial's checkpoint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include <torch/torch.h>

#include "dltune/train/workload.h"

namespace dltune {

// (x - mean) / std applied to the flattened inputs first, as the Fashion-MNIST MLP does with its pixel statistics.
struct InputStandardization {
  double mean = 0;
  double std = 1;
};

class ArrayMlp : public torch::nn::Module {
 public:
  // Copies `members` (at least one), each a lone MLP whose parameters are, in order, the weight ([out, in]) and bias
  // ([out]) of each dense layer, every member of the same widths. Checks on a fixed probe batch that each member's
  // forward here gives the lone model's logits (in eval mode, without touching torch's generator). Throws Error for
  // another architecture (normalization layers, another activation, other widths, a standardization that differs).
  ArrayMlp(const std::vector<std::shared_ptr<Model>>& members, std::optional<InputStandardization> standardize);

  // inputs [M, B, ...] (float32; each member's batch flattened from dimension 2 on) to logits [M, B, classes].
  torch::Tensor Forward(const torch::Tensor& inputs);

  std::int64_t members() const { return members_; }
  // Each layer's weights ([M, in, out]) and biases ([M, out]), layer by layer: the order Optimizer and
  // ArrayOptimizer see, pairing member m's slices with a lone model's parameters() in order (weights transposed).
  std::vector<torch::Tensor> ArrayParameters() const;
  // Member m's slice of ArrayParameters()[index] (or of a tensor shaped like it) as the lone model lays it out.
  static torch::Tensor LoneLayout(std::size_t index, const torch::Tensor& slice);
  // Writes member m's weights into `model`, a lone model of the architecture the members were built from.
  void CopyMemberInto(std::int64_t member, Model& model) const;

 private:
  std::int64_t members_ = 0;
  std::optional<InputStandardization> standardize_;
  std::vector<torch::Tensor> weights_;  // [M, in, out] per layer
  std::vector<torch::Tensor> biases_;   // [M, out] per layer
};

}  // namespace dltune
