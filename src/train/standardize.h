// Input standardization, (x - mean) / std, as the built-in models and their array versions apply it.
#pragma once

#include <torch/torch.h>

namespace dltune {

// (x - mean) / std in one pass over x, bit-identical to those two tensor operations (which it falls back to for
// anything but a contiguous float32 CPU tensor that needs no gradient, i.e. for anything but a batch of inputs, and
// while a forward is traced for export).
torch::Tensor Standardize(const torch::Tensor& x, double mean, double std);

}  // namespace dltune
