// An array MLP: M members of one multilayer perceptron trained as one model (HFTA, Wang et al., MLSys 2021).
//
// Member m's dense layer l is weights_[l][m] ([out, in], as a lone Linear holds it) and biases_[l][m] ([out]); a
// forward pass takes each member its own batch, inputs [M, B, ...], and runs each layer as one batched product over
// the member dimension (torch::baddbmm with the weights' [M, in, out] transposed view), giving logits [M, B, classes].
// Keeping the lone layout makes each member's products the very BLAS calls of its lone model (the same operands, the
// same transposition flags; LibTorch's CPU baddbmm runs one addmm per member), forward and backward, so a member's
// logits and gradients are bit-identical to the lone model's; contiguous [M, in, out] weights would call the BLAS
// without the transposition, whose kernels round differently at some widths (10 outputs on OpenBLAS's SkylakeX
// kernels). The architecture is the built-in MLP's without its options: inputs
// flattened and optionally standardized inside the model, Linear + ReLU hidden layers, a Linear output.
//
// Members are built from lone models (Workload::BuildModel, each after seeding torch's generator with the member's
// init seed) and copy their parameters, so fused and lone training start from identical weights; CopyMemberInto
// writes a member back into a lone model (to save it as a lone trial's checkpoint).
#pragma once

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
  // The same from each member's own batch ([B, ...], M of them, possibly the same tensor): each is flattened and
  // standardized straight into its slice of the array's input, a pass over one member's batch at a time (stacking
  // them first would be another pass over all of them).
  torch::Tensor Forward(const std::vector<torch::Tensor>& member_inputs);

  std::int64_t members() const { return members_; }
  // Each layer's weights ([M, out, in]) and biases ([M, out]), layer by layer: member m's slices are a lone model's
  // parameters() in order, shape and memory layout.
  std::vector<torch::Tensor> ArrayParameters() const;
  // Writes member m's weights into `model`, a lone model of the architecture the members were built from.
  void CopyMemberInto(std::int64_t member, Model& model) const;

 private:
  // The dense layers on flattened, standardized inputs [M, B, in].
  torch::Tensor Layers(torch::Tensor x);

  std::int64_t members_ = 0;
  std::optional<InputStandardization> standardize_;
  std::vector<torch::Tensor> weights_;  // [M, out, in] per layer
  std::vector<torch::Tensor> biases_;   // [M, out] per layer
};

}  // namespace dltune
