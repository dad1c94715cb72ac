// The workload interface: the playbook's "model + data + loss + metrics".
//
// A workload supplies the data splits, builds a model from a trial's hyperparameters and defines the per-example
// loss. The trainer trains any Workload; the workloads module registers built-in ones by name, and a user's own is
// registered with RegisterWorkload (include/dltune/workloads/registry.h; examples/custom_workload/ shows how).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/nn/module.h>
#include <torch/types.h>

#include "dltune/core/hyperparams.h"

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

// A model: a module with one forward function from a batch of inputs to a batch of outputs (logits).
class Model : public torch::nn::Module {
 public:
  virtual torch::Tensor Forward(const torch::Tensor& inputs) = 0;
};

// The splits of a workload: train, valid (for tuning) and test (only when asked).
struct WorkloadData {
  Dataset train;
  Dataset valid;
  Dataset test;
};

// Not thread-safe; one per trial process.
class Workload {
 public:
  virtual ~Workload() = default;

  virtual std::string name() const = 0;
  // Number of classes of the classification problem.
  virtual std::int64_t num_classes() const = 0;
  // The splits, loaded on first use. Throws Error when the data cannot be read (naming the package to install).
  virtual const WorkloadData& Data() = 0;
  // Builds a model for these hyperparameters, reading what it needs from `params` (e.g. hidden_sizes, dropout).
  // Parameter initialization draws from torch's global generator: seed it (the init seed) before calling.
  virtual std::shared_ptr<Model> BuildModel(const HyperParams& params) = 0;
  // Loss of each example (default: cross-entropy of logits against class labels), shape [N].
  virtual torch::Tensor PerExampleLoss(const torch::Tensor& outputs, const torch::Tensor& labels) const;
  // A default search space for this workload, as the YAML of a spec's `space:` mapping; "" when it has none.
  virtual std::string DefaultSpace() const { return ""; }
  // The workload.args its factory reads itself (where its data is, how much of it), beside the hyperparameters
  // BuildModel and the trainer read through HyperParams. Any other argument of a spec is refused as a mistake.
  virtual std::vector<std::string> ArgumentNames() const { return {}; }
};

}  // namespace dltune
