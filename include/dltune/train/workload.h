// The workload interface: the playbook's "model + data + loss + metrics".
//
// A workload supplies the data splits, builds a model from a trial's hyperparameters and defines the per-example
// loss. The trainer trains any Workload; the workloads module registers built-in ones by name, and a user's own is
// registered with RegisterWorkload (include/dltune/workloads/registry.h; examples/custom_workload/ shows how). A
// workload may also offer fusion: several of its trials trained together as one array model (Fusion below).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
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

// (x - mean) / std applied to a model's inputs before its first layer.
struct InputStandardization {
  double mean = 0;
  double std = 1;
};

// How a workload's model becomes an array model: the network its BuildModel builds, as dltune's array builders know
// it (docs/training.md, "Fused trials"). The array model copies the members' lone models and checks on a fixed probe
// batch that each member computes its lone model's logits, so a description that does not fit the model is refused
// before any step, never trained wrong.
struct ArrayNetwork {
  enum class Kind {
    // A chain of dense layers: the lone model's parameters are, in order, each layer's weight [out, in] and bias [out]
    // (torch::nn::Linear's); its Forward flattens the inputs, standardizes them (`standardize`), and runs every layer
    // but the last as Linear, ReLU, then dropout at the rate of its child module "dropout" (none without one).
    kMlp,
    // The built-in CNN of fashion_mnist_cnn: [N, 1, 28, 28] images standardized, two conv blocks, a dense layer and
    // the output layer (children conv1, conv2, norm1..norm3, dense, output, dropout), with ReLU and no norm, batch
    // norm or ghost batch norm.
    kCnn,
  };
  Kind kind = Kind::kMlp;
  // The standardization the lone model applies to its inputs, which the array model repeats; none: it applies none.
  std::optional<InputStandardization> standardize;
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
  // Whether and how this workload's trials train fused (training.fuse, TrainFusedTrials): its model as an array
  // model. Default: they cannot (a study trains them apart, TrainFusedTrials refuses them naming the workload).
  virtual std::optional<ArrayNetwork> Fusion() const { return std::nullopt; }
};

}  // namespace dltune
