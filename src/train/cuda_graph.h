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
#include <optional>
#include <string>
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
  // Seconds a run of `run` takes on the device: `runs` runs between two synchronizations with it, the faster of two
  // rounds (a neighbour's burst on a shared GPU reaches at most one). Throws Error when not Available().
  static double SecondsPerRun(const std::function<void()>& run, int runs = 10);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// training.cuda_graph: auto's measurement, a step launched eagerly against its replay.
struct GraphTiming {
  double eager_seconds = 0;
  double replay_seconds = 0;
  double capture_seconds = 0;  // the timing and the capture together

  bool ReplayWins() const { return replay_seconds < eager_seconds; }
  // "a replay took 0.152 ms a step, the step launched eagerly 0.811 ms (timed and captured in 0.041 s)"
  std::string Text() const;
};

// A step captured for training.cuda_graph: the graph, or null where auto timed it and the eager step was as fast.
struct CapturedStep {
  std::unique_ptr<StepGraph> graph;
  std::optional<GraphTiming> timing;  // auto's
};

// Captures `step` (StepGraph::Capture). With `timed` (training.cuda_graph: auto) it first times `step` launched
// eagerly and, once captured, its replay, and keeps the graph only where replays are faster. `step` runs about 25 times
// in all and must leave the training as it was (the caller puts its tensors back). Throws Error as Capture does.
CapturedStep CaptureStepGraph(const std::function<void()>& step, bool timed);

// What keeps a step from being captured, known before trying.
struct StepGraphObstacles {
  bool data_parallel = false;   // ranks exchange their gradients through the host
  bool moving_average = false;  // ema_decay's decay changes on the host
  bool host_dropout = false;    // dropout masks drawn on the host (a fused group's)
  bool profiled = false;        // a profile window records the eager step's operators
};

// When a step is refused a CUDA graph: why the step of a `who` ("trial", "group") training on `device` is not
// captured, checked in this order: not on CUDA, a build without CUDA graphs, then `obstacles`; "" when it may be (its
// capture may still fail, or find random draws).
std::string WhyTheStepIsNotCaptured(const char* who, const torch::Device& device, const StepGraphObstacles& obstacles);

// training.cuda_graph (`setting`: auto or true) for both trainers: unless WhyTheStepIsNotCaptured refuses, `capture`
// tries (it returns why it did not capture, "" when it did, and sets auto's timing); then says how the step trains
// (SayHowTheStepTrains), a refusal only where the setting asked for a graph: auto says nothing where there was
// nothing to choose.
void CaptureUnlessRefused(const char* who, const std::string& setting, const torch::Device& device,
                          const StepGraphObstacles& obstacles,
                          const std::function<std::string(bool timed, std::optional<GraphTiming>& timing)>& capture);

// Says on stderr how a `who` ("trial", "group") trains its step: eagerly and why (`why_not`), or replaying its graph,
// with auto's `timing` when it has one; nothing when there is neither a reason nor a timing.
void SayHowTheStepTrains(const char* who, const std::string& why_not, const std::optional<GraphTiming>& timing);

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
