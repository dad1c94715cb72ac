// Array models: M members of one network trained as one model (HFTA, Wang et al., MLSys 2021), each member
// a lone model's parameters and buffers side by side.
//
// An array model is built from lone models (Workload::BuildModel, each after seeding torch's generator with the
// member's init seed), as the workload's Fusion describes them, and copies their parameters and buffers, so fused and
// lone training start from identical weights. Each lone tensor of name n and shape S becomes one array tensor [M,
// S...], member m's slice holding its lone tensor in the same layout; the array parameters come in the order of a lone
// model's parameters(), so the array optimizer's state of member m is the lone optimizer's. CopyMemberInto writes a
// member back into a lone model (to save it as a lone trial's checkpoint) and CopyMemberFrom reads one (to resume a
// group from its checkpoints).
//
// Dropout draws each member's mask from a generator of its own, seeded as its lone trial seeds torch's global one, in
// the shape the lone model draws it: a member's masks are its lone trial's.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "dltune/train/workload.h"

namespace dltune {

class ArrayModel : public torch::nn::Module {
 public:
  // Logits [M, B, classes] from the members' batches stacked: inputs [M, B, ...] (float32, on the model's device),
  // member m's batch at m.
  virtual torch::Tensor ForwardStacked(const torch::Tensor& inputs) = 0;
  // The same from one batch [B, ...] that every member takes (an evaluation of a split they share): each member's
  // arithmetic is ForwardStacked's on that batch repeated, with the batch not copied M times (ForwardStacked of a view
  // of it expanded; a model may do what depends only on the inputs, such as standardization, once).
  virtual torch::Tensor ForwardShared(const torch::Tensor& inputs);

  std::int64_t members() const { return members_; }
  // The array parameters ([M, lone shape...] each) in the order of a lone model's parameters().
  const std::vector<torch::Tensor>& ArrayParameters() const { return parameters_; }
  // Writes member m's parameters and buffers into `model`, a lone model of the members' architecture.
  void CopyMemberInto(std::int64_t member, Model& model) const;
  // Reads member m's parameters and buffers from `model`.
  void CopyMemberFrom(std::int64_t member, Model& model);
  // Member m's dropout generator: seed it as the lone trainer seeds torch's; its state is the lone generator's.
  at::Generator& DropoutGenerator(std::int64_t member) { return dropout_.at(static_cast<std::size_t>(member)); }

 protected:
  // Copies the members' named parameters and buffers (at least one member; all of the same names and shapes, float32
  // parameters; Error otherwise) into array tensors on `device`. `what` names the architecture in errors.
  ArrayModel(const std::vector<std::shared_ptr<Model>>& members, std::string what, const torch::Device& device);

  // The array tensor of the lone tensor named `name`, [M, ...]; Error when the members have none of that name.
  const torch::Tensor& Array(const std::string& name) const;
  bool Has(const std::string& name) const { return arrays_.count(name) > 0; }
  // The names of the lone parameters, in order.
  const std::vector<std::string>& ParameterNames() const { return parameter_names_; }
  // In training mode with p > 0, x [M, B, ...] with each member's slice through dropout of rate p, its mask drawn
  // from its generator as torch::dropout draws it on the CPU (on a device: drawn on the CPU, then copied); else x.
  torch::Tensor MemberDropout(const torch::Tensor& x, double p);
  // Throws Error unless this model's logits on `probe` (one CPU batch, given to every member) are each lone model's
  // (in eval mode, drawing from no generator): a check that the array model computes the lone network.
  void CheckAgainstLoneModels(const std::vector<std::shared_ptr<Model>>& members, const torch::Tensor& probe);
  const std::string& what() const { return what_; }

 private:
  std::int64_t members_ = 0;
  std::string what_;
  std::vector<std::string> parameter_names_;
  std::map<std::string, torch::Tensor> arrays_;  // by lone name: parameters and buffers
  std::vector<torch::Tensor> parameters_;        // in parameter_names_ order
  std::vector<at::Generator> dropout_;
};

// x [M, B, in] to x W^T + b [M, B, out] for weights [M, out, in] and biases [M, out] (a lone Linear's layout), with
// each member's products, forward and backward, the very BLAS calls of its lone Linear: on the CPU a member's outputs
// and gradients are bit-identical to its lone layer's.
torch::Tensor ArrayLinear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// The lone models' dropout rate: their child module "dropout" (0 without one). Error when members differ.
double DropoutOf(const std::vector<std::shared_ptr<Model>>& members);

}  // namespace dltune
