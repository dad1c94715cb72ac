// An array CNN (array_model.h): M members of the built-in CNN (workloads/cnn.cc) trained as one model.
//
// The dense layers are batched products over the member dimension (ArrayLinear) and dropout draws each member's
// mask from its own generator. The convolutions, batch norms (plain or ghost), ReLUs and max-pools run member by
// member on its contiguous slice [B, C, H, W] of the array's activations [M, B, C, H, W], and are stacked: on the CPU a
// grouped convolution runs group after group anyway, and a statistic over M x C channels at once (or a gradient
// reaching a member as a strided slice) sums in another order than a lone layer's. So each member's calls, forward and
// backward, are its lone model's, and a member trains bit for bit as its lone trial. (On a GPU those per-member calls
// are M kernel launches each, where one grouped convolution would be one.)
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "array_model.h"
#include "batch_norm.h"

namespace dltune {

class ArrayCnn : public ArrayModel {
 public:
  // Copies `members` (at least one), each a lone built-in CNN (children conv1, conv2, norm1..3, dense, output,
  // dropout) with ReLU and no normalization, batch norm or ghost batch norm, all of the same widths, normalization and
  // dropout rate. Checks on a fixed probe batch that each member's forward here gives the lone model's logits. Throws
  // Error otherwise (layer norm, another activation, widths that differ).
  ArrayCnn(const std::vector<std::shared_ptr<Model>>& members, std::optional<InputStandardization> standardize,
           const torch::Device& device = torch::kCPU);

  torch::Tensor ForwardStacked(const torch::Tensor& inputs) override;

 private:
  // How a lone CNN normalizes: one kind for its three norm layers.
  enum class Norm { kNone, kBatch, kGhost };
  struct NormLayer {
    std::string name;                   // the lone layer's: norm1, norm2, norm3
    std::vector<GhostBatchNorm> ghost;  // kGhost: each member's, on its slices of the array's tensors
    double momentum = 0, epsilon = 0;   // kBatch: torch's
  };

  // Member m's x ([B, C, ...]) through its slice of norm layer `layer`.
  torch::Tensor Normalize(NormLayer& layer, std::int64_t member, const torch::Tensor& x);

  std::optional<InputStandardization> standardize_;
  Norm norm_ = Norm::kNone;
  std::vector<NormLayer> norms_;
  double dropout_ = 0;
};

}  // namespace dltune
