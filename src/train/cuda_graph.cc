#include "cuda_graph.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "core/clock.h"
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

double StepGraph::SecondsPerRun(const std::function<void()>& run, int runs) {
  if (!Available()) throw Error("CUDA graphs: this process sees no CUDA device");
  double fastest = std::numeric_limits<double>::infinity();
  for (int round = 0; round < 2; ++round) {
    c10::cuda::device_synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i) run();
    c10::cuda::device_synchronize();
    fastest = std::min(fastest, Seconds(std::chrono::steady_clock::now() - start));
  }
  return fastest / std::max(1, runs);
}

#else

struct StepGraph::Impl {};

bool StepGraph::Available() { return false; }

void StepGraph::Capture(const std::function<void()>& /*step*/, int /*warmups*/) {
  throw Error("CUDA graphs: this dltune was built against a LibTorch without CUDA");
}

void StepGraph::Replay() { throw Error("CUDA graphs: this dltune was built against a LibTorch without CUDA"); }

double StepGraph::SecondsPerRun(const std::function<void()>& /*run*/, int /*runs*/) {
  throw Error("CUDA graphs: this dltune was built against a LibTorch without CUDA");
}

#endif

std::string GraphTiming::Text() const {
  return fmt::format(
      "a replay took {:.3f} ms a step, the step launched eagerly {:.3f} ms (timed and captured in "
      "{:.3f} s)",
      replay_seconds * 1e3, eager_seconds * 1e3, capture_seconds);
}

CapturedStep CaptureStepGraph(const std::function<void()>& step, bool timed) {
  const auto began = std::chrono::steady_clock::now();
  CapturedStep captured;
  // Timed before the capture: after it, an eager run would leave the gradients outside the graph's memory.
  const double eager = timed ? StepGraph::SecondsPerRun(step) : 0;
  captured.graph = std::make_unique<StepGraph>();
  captured.graph->Capture(step);
  if (!timed) return captured;
  StepGraph& graph = *captured.graph;
  captured.timing =
      GraphTiming{.eager_seconds = eager, .replay_seconds = StepGraph::SecondsPerRun([&graph] { graph.Replay(); })};
  captured.timing->capture_seconds = Seconds(std::chrono::steady_clock::now() - began);
  if (!captured.timing->ReplayWins()) captured.graph.reset();
  return captured;
}

std::string WhyTheStepIsNotCaptured(const char* who, const torch::Device& device, const StepGraphObstacles& obstacles) {
  if (!device.is_cuda()) return fmt::format("the {} trains on {}", who, device.str());
  if (!StepGraph::Available()) return "this dltune was built without CUDA graphs";
  if (obstacles.data_parallel) return "data-parallel ranks exchange their gradients through the host";
  if (obstacles.moving_average) return "the moving average's decay (ema_decay) changes on the host";
  if (obstacles.host_dropout) return "dropout draws its masks on the host";
  if (obstacles.profiled) return "training.profile_steps records the eager step's operators";
  return "";
}

void CaptureUnlessRefused(const char* who, const std::string& setting, const torch::Device& device,
                          const StepGraphObstacles& obstacles,
                          const std::function<std::string(bool timed, std::optional<GraphTiming>& timing)>& capture) {
  const bool timed = setting == "auto";
  std::string why_not = WhyTheStepIsNotCaptured(who, device, obstacles);
  if (!why_not.empty()) {
    if (!timed) SayHowTheStepTrains(who, why_not, std::nullopt);
    return;
  }
  std::optional<GraphTiming> timing;
  why_not = capture(timed, timing);
  SayHowTheStepTrains(who, why_not, timing);
}

void SayHowTheStepTrains(const char* who, const std::string& why_not, const std::optional<GraphTiming>& timing) {
  if (!why_not.empty()) {
    std::fprintf(stderr, "dltune: training.cuda_graph: the %s trains eagerly: %s\n", who, why_not.c_str());
  } else if (timing) {
    std::fprintf(stderr, "dltune: training.cuda_graph: the %s replays its step from a CUDA graph: auto: %s\n", who,
                 timing->Text().c_str());
  }
}

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
