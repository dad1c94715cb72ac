// One training step's kernels captured once as a CUDA graph and replayed (training.cuda_graph): a small model's step
// on a GPU is bound by launching its kernels, and a replay launches them all at once.
//
// The step must be one a graph can hold: every tensor it reads or writes at the same address at each replay (inputs
// copied into tensors made before the capture, outputs copied out after each replay), no copy from the host, no
// synchronization with it, no shape that changes, no random draws. Built against a LibTorch with CUDA
// (DLTUNE_CUDA_GRAPHS, CMakeLists.txt); elsewhere Available() is false and Capture throws.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include <torch/torch.h>

namespace dltune {

class StepGraph {
 public:
  StepGraph();
  ~StepGraph();
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Whether this build can capture CUDA graphs and the process sees a CUDA device.
  static bool Available();
  // Runs `step` `warmups` times on a side stream (the libraries behind its kernels set themselves up there; the
  // step must leave the training as it was, e.g. with every member masked), then captures one more run of it on that
  // stream, without running it. Throws Error when not Available() or the capture fails.
  void Capture(const std::function<void()>& step, int warmups = 3);
  // Launches the captured kernels on the current stream.
  void Replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Copies of the tensors the runs of a capture change (weights, batch-norm averages, optimizer state), to put them
// back as they were once the step is captured (or its capture failed).
class KeptTensors {
 public:
  explicit KeptTensors(std::vector<torch::Tensor> tensors);
  // Copies the kept values back into the tensors.
  void Restore() const;

 private:
  std::vector<torch::Tensor> tensors_, copies_;
};

}  // namespace dltune
