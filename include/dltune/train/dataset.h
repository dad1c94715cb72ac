// A data split held in memory as two tensors.
#pragma once

#include <cstdint>

#include <torch/torch.h>

namespace dltune {

// Examples of one split: inputs (float32, [N, ...]) and labels (int64, [N]). Tensors share storage when sliced.
struct Dataset {
  torch::Tensor inputs;
  torch::Tensor labels;

  std::int64_t size() const { return labels.defined() ? labels.size(0) : 0; }
  // Examples [begin, end) as views of this split.
  Dataset Slice(std::int64_t begin, std::int64_t end) const {
    return {inputs.slice(0, begin, end), labels.slice(0, begin, end)};
  }
};

}  // namespace dltune
