#include "cuda_graph.h"

#include <utility>

#include <fmt/format.h>

#include "dltune/core/error.h"

#ifdef DLTUNE_CUDA_GRAPHS
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#endif

namespace dltune {

#ifdef DLTUNE_CUDA_GRAPHS

struct StepGraph::Impl {
  at::cuda::CUDAGraph graph;
};

bool StepGraph::Available() { return torch::cuda::is_available(); }

void StepGraph::Capture(const std::function<void()>& step, int warmups) {
  if (!Available()) throw Error("CUDA graphs: this process sees no CUDA device");
  auto impl = std::make_unique<Impl>();
  try {
    c10::cuda::device_synchronize();
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    {
      const c10::cuda::CUDAStreamGuard guard(side);
      for (int i = 0; i < warmups; ++i) step();
      side.synchronize();
      impl->graph.capture_begin();
      step();
      impl->graph.capture_end();
    }
    c10::cuda::device_synchronize();
  } catch (const std::exception& e) {
    throw Error(fmt::format("CUDA graphs: the step could not be captured: {}", e.what()));
  }
  impl_ = std::move(impl);
}

void StepGraph::Replay() {
  if (!impl_) throw Error("CUDA graphs: nothing captured");
  impl_->graph.replay();
}

#else

struct StepGraph::Impl {};

bool StepGraph::Available() { return false; }

void StepGraph::Capture(const std::function<void()>& /*step*/, int /*warmups*/) {
  throw Error("CUDA graphs: this dltune was built against a LibTorch without CUDA");
}

void StepGraph::Replay() { throw Error("CUDA graphs: this dltune was built against a LibTorch without CUDA"); }

#endif

KeptTensors::KeptTensors(std::vector<torch::Tensor> tensors) : tensors_(std::move(tensors)) {
  torch::NoGradGuard no_grad;
  for (const torch::Tensor& tensor : tensors_) copies_.push_back(tensor.detach().clone());
}

void KeptTensors::Restore() const {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < tensors_.size(); ++i) tensors_[i].detach().copy_(copies_[i]);
}

StepGraph::StepGraph() = default;
StepGraph::~StepGraph() = default;

}  // namespace dltune
