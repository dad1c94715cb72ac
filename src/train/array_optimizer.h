// The optimizers of optimizer.h over the parameters of an array model (array_mlp.h): each parameter holds M members
// along its first dimension, and each member has its own kind (nesterov, adam, ...), hyperparameters (learning rate,
// momentum, rho, betas, epsilon, weight decay) and update count t. Members of one kind next to each other form a run,
// whose state buffers are held together: members sorted by kind make the fewest runs (on a device, a run's update is
// a few kernels).
//
// Each member's slice of a parameter is contiguous, so a step updates it with OnePassUpdate (one_pass_update.h) and the
// member's coefficients: one pass over each parameter's memory, and for each member the arithmetic of a lone
// Optimizer on the member's own parameters (the same coefficients rounded the same way, the same slices across
// threads, the same order of the gradient norm's sums): a member's weights, state and gradient norm are bit-identical
// to a lone optimizer's given the same gradients. A member masked out (diverged) is skipped: its weights, state and
// t stay as they are.
//
// Parameters on another device (a GPU) take the tensor form instead: the same rules as element-wise tensor operations,
// each member's coefficients an [M] tensor broadcast over its row. The form moves every parameter's data into one
// [M, P] tensor (each parameter a view of its columns: the same tensor objects, with new strides), and a run's state
// likewise, so that a step is a few kernels for all members and all parameters at once (the gradients gathered in
// one, the update of a run in the lone optimizer's tensor operations, about ten), whatever the number of parameters.
// A masked member's gradient is zeroed and its coefficients are those that leave its weights and state as they are
// (where they are finite: a diverged member's may turn NaN, which no other member's row sees). It rounds as such a
// sequence of kernels does, not bit for bit as the fused loop.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "optimizer.h"

namespace dltune {

class ArrayOptimizer {
 public:
  enum class Form {
    kAuto,    // the fused loop on the CPU, the tensor form elsewhere
    kTensor,  // the tensor form on any device (to compare the two on the CPU)
  };

  // `params`: defined float32 or float64 tensors of at least one dimension on one device, each of size
  // M = members.size() along dimension 0: contiguous for the fused loop, of one type for the tensor form (which
  // gives them its own layout, see above). `members`: each member's options. Throws Error on invalid options or any
  // other parameter.
  ArrayOptimizer(std::vector<torch::Tensor> params, std::vector<OptimizerOptions> members, Form form = Form::kAuto);

  // Makes every parameter's grad undefined.
  void ZeroGrad();
  // Updates each member m with active[m] by learning rate learning_rates[m], and returns each member's gradient norm
  // (as Optimizer::Step does; 0 for a member skipped). Throws Error, changing nothing, for a learning rate that is
  // negative or not finite, a sparse gradient, or vectors of another size than M.
  std::vector<double> Step(const std::vector<double>& learning_rates, const std::vector<bool>& active);
  // Step, with the norms as an [M] float64 tensor on the parameters' device: on a device it is not read to the host
  // (no synchronization per step); on the CPU it holds Step's values.
  torch::Tensor StepDeferred(const std::vector<double>& learning_rates, const std::vector<bool>& active);

  std::int64_t members() const { return static_cast<std::int64_t>(members_.size()); }
  // Step calls that updated member m.
  std::int64_t steps(std::int64_t member) const { return steps_.at(static_cast<std::size_t>(member)); }
  const std::vector<torch::Tensor>& params() const { return params_; }

  // Member m's state, copied now (writing it is the slow part, and may wait), as that of a lone optimizer whose
  // parameters are the member's slices: a lone Optimizer of that kind Loads what it Saves and continues as the member
  // would have.
  OptimizerState CopyMember(std::int64_t member) const;
  // Restores member m's state from what CopyMember saves (or a lone Optimizer of the member's kind and shapes) wrote:
  // the member then continues as its lone optimizer would. Throws Error, changing nothing, as Optimizer::Load does.
  void LoadMember(std::int64_t member, torch::serialize::InputArchive& archive);

  // The tensor form's step in its two halves, for a step captured in a CUDA graph (cuda_graph.h), where the host's
  // half runs before each replay and the device's is captured. The host's: this step's coefficients of every member
  // (a [rows, M] float64 CPU table), the step counted for each active member. Throws Error as Step does (but for the
  // gradients, which a captured step has only once replayed).
  torch::Tensor CoefficientTable(const std::vector<double>& learning_rates, const std::vector<bool>& active);
  // The device's: every member of every parameter updated with `table` (CoefficientTable's, on the parameters'
  // device), in element-wise operations with no host copy or synchronization; returns each member's gradient norm
  // ([M] float64 on the device; 0 for a masked member). A member masked in `table` keeps its weights and state
  // (where finite).
  torch::Tensor ApplyTable(const torch::Tensor& table);

 private:
  // The coefficients of member m's update at learning rate `eta`, but the bias correction (per update count).
  UpdateCoefficients Coefficients(std::int64_t member, double eta) const;
  // Updates member m's slice of every parameter; returns the sum of its gradients' squares.
  double UpdateMember(std::int64_t member, double eta);
  // Throws Error, before anything changes, for what Step refuses (without `gradients`, but for the gradients).
  void CheckStep(const std::vector<double>& learning_rates, const std::vector<bool>& active,
                 bool gradients = true) const;
  // The tensor form of a step: CoefficientTable moved to the device, then ApplyTable.
  torch::Tensor TensorStep(const std::vector<double>& learning_rates, const std::vector<bool>& active);

  // Members [begin, end) of one kind, and their state.
  struct Run {
    std::int64_t begin = 0;
    std::int64_t end = 0;
    UpdateRule rule = UpdateRule::kSgd;
    // Whether any member has coupled weight decay, or decays theta in place (the tensor form's update skips what
    // none has).
    bool coupled = false;
    bool decays = false;
    // Per parameter, the rule's state buffers in Optimizer::BufferNames() order, each shaped as the parameter's
    // slice of these members (in the tensor form, views of flat_buffers).
    std::vector<std::vector<torch::Tensor>> buffers;
    std::vector<torch::Tensor> flat_buffers;  // the tensor form's: each buffer of every parameter, [count, P]
  };
  const Run& RunOf(std::int64_t member) const { return runs_[run_of_.at(static_cast<std::size_t>(member))]; }
  // The tensor form's layout: every parameter's data moved into flat_, each one a view of its columns.
  void FlattenParameters();

  std::vector<OptimizerOptions> members_;
  std::vector<Run> runs_;
  std::vector<std::size_t> run_of_;  // per member, its run's index
  std::vector<torch::Tensor> params_;
  std::vector<std::int64_t> steps_;  // per member: its t (every parameter has a grad at each step)
  bool tensor_form_ = false;
  torch::Tensor flat_;                 // the tensor form's: every member's parameters, [M, P]
  std::vector<std::int64_t> offsets_;  // the tensor form's: parameter i's first column in flat_
};

}  // namespace dltune
