// The rules of training that the lone trainer (trainer.cc) and a fused group (fused_training.cc) both follow, each
// defined once: a fused member is its lone trial because both loops call these. Two more live beside what they rule:
// the checkpoint's archive (checkpoint_state.h, WriteTrainingState / ReadTrainingState) and when a step is not
// captured as a CUDA graph (cuda_graph.h, WhyTheStepIsNotCaptured). docs/training.md describes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dltune/core/objective.h"
#include "dltune/core/training_settings.h"
#include "dltune/train/training_reports.h"

namespace dltune {

// Divergence: a training loss that is not finite, or above `factor` (training.divergence_factor) times the run's
// first loss (floored at 1e-12, so that a first loss of 0 still compares), diverged. `first_loss` is the run's first
// loss, set to `loss` when unset (this is the first step). Returns the reason the run ends infeasible with, or nullopt.
// The Python client's rule (python/dltune/_trial.py, divergence_reason) is the same, and both are tested on the cases
// of src/train/testdata/divergence_cases.json.
std::optional<std::string> Divergence(std::optional<double>& first_loss, double loss, std::int64_t step, double factor);

// The timings of an interval's steps: each step's share of the interval's `seconds` and of its `data_wait` (seconds
// spent waiting for input), and the examples per second of a `batch_size` at that step time.
void ShareIntervalTime(std::vector<StepMetrics>& steps, double seconds, double data_wait, std::int64_t batch_size);

// An evaluated split's sums over its examples, each weighted by its example's weight (0 for the padding of a last
// partial batch).
struct SplitSums {
  double loss = 0;
  double correct = 0;
  double weight = 0;                  // the number of real examples
  std::vector<double> class_correct;  // by class
};

// Appends the metrics of `split` that `sums` give: loss, error_rate, accuracy and correct_class_<k>.
void AddMetricsFromSums(const std::string& split, const SplitSums& sums, std::vector<EvalMetric>& metrics);

// The splits an evaluation takes, in order: the fixed training subset ("train"); with a validation sample
// (valid_sample_examples > 0) "valid_sample", and "valid" at the last step only, else "valid"; "test" at the last
// step when test_at_end.
std::vector<std::string> SplitsToEvaluate(const TrainingSettings& settings, bool last);

// The objective's value among an evaluation's metrics: its split's metric, or its periodic sample's
// (`<split>_sample`) when the whole split was not evaluated; nullopt when neither was.
std::optional<double> ObjectiveValue(const Objective& objective, const std::vector<EvalMetric>& metrics);

// Retrospective checkpoint selection: the best objective value so far and its step, and the last evaluation's.
struct BestObjective {
  std::optional<std::int64_t> step;
  std::optional<double> value;
  std::optional<double> last;

  // Records the objective of the evaluation at `step` (nullopt: it had none): the last value, and the best when it
  // is finite and better than the best so far (the first finite one is).
  void Record(std::int64_t at, std::optional<double> objective, Direction direction);
};

}  // namespace dltune
