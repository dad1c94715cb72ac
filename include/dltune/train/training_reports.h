// What training reports to its callbacks (dltune/train/trainer.h): a step's training metrics, an evaluation's metrics,
// predictions and checkpoints. The lone trainer and fused groups report alike. Free of LibTorch types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace dltune {

// Training measurements of one step, pulled from the device at a log interval.
struct StepMetrics {
  std::int64_t step = 0;  // 1-based: the number of updates done
  double loss = 0;
  double learning_rate = 0;
  std::optional<double> grad_norm;  // global norm before clipping
  std::optional<bool> clipped;
  double step_time = 0;  // seconds (averaged over the log interval)
  double data_wait = 0;  // seconds spent waiting for input (averaged over the log interval)
  double examples_per_second = 0;
};

// One metric of one split at one step.
struct EvalMetric {
  std::string split;   // "train" (fixed subset), "valid", "valid_sample", "test"
  std::string metric;  // "loss", "error_rate", "accuracy", "correct_class_<k>"
  double value = 0;
  std::int64_t examples = 0;
};

// What the model predicted for one of the fixed debugging examples.
struct Prediction {
  std::int64_t example = 0;  // index in the validation split
  std::int64_t label = 0;
  std::int64_t predicted = 0;
  double confidence = 0;  // softmax probability of the predicted class
};

// A checkpoint written (or deleted by retention).
struct CheckpointEvent {
  std::int64_t step = 0;
  std::string path;
  std::optional<double> objective;
  std::string checksum;  // "sha256:<hex>" of the checkpoint's state.pt
  bool best = false;     // in the best pool
  bool deleted = false;  // removed by retention
};

}  // namespace dltune
