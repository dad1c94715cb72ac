#include <ATen/Parallel.h>
#include <torch/csrc/jit/frontend/tracer.h>

#include "standardize.h"

namespace dltune {
namespace {

// (x - mean) / std element by element, in float as LibTorch computes it with float scalars, so the result is
// bit-identical to the two tensor operations; no -ffast-math here, so the division stays a division.
[[gnu::target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")]] void StandardizeFloats(const float* __restrict in,
                                                                                             float* __restrict out,
                                                                                             std::int64_t n, float mean,
                                                                                             float std) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = (in[i] - mean) / std;
}

}  // namespace

torch::Tensor Standardize(const torch::Tensor& x, double mean, double std) {
  // A traced forward (a model exported as TorchScript) must record the operations: the loop below is invisible to
  // the tracer, which would keep its output as a constant.
  if (torch::jit::tracer::isTracing() || x.scalar_type() != torch::kFloat || !x.is_contiguous() ||
      !x.device().is_cpu() || x.requires_grad()) {
    return (x - mean) / std;
  }
  torch::Tensor out = torch::empty_like(x);
  const float* in = x.data_ptr<float>();
  float* result = out.data_ptr<float>();
  // Slices of at least 32 Ki elements per thread, as LibTorch's own element-wise kernels take.
  at::parallel_for(0, x.numel(), 32768, [&](std::int64_t begin, std::int64_t end) {
    StandardizeFloats(in + begin, result + begin, end - begin, static_cast<float>(mean), static_cast<float>(std));
  });
  return out;
}

}  // namespace dltune
