// The optimizers of the playbook's FAQ "What are the update rules for all the popular optimization algorithms?",
// implemented exactly as written there (initial states, where epsilon and the learning rate sit, bias correction).
//
// Notation: theta the parameter, g = grad l(theta_t) (plus wd * theta_t with coupled weight decay), eta_t the
// learning rate of this step (passed to Step; the trainer computes it from the schedule), t the number of updates
// this parameter has received including this one (t = 1 on its first update). All operations are element-wise.
//
//   sgd       theta <- theta - eta_t * g                                       (== torch::optim::SGD)
//   momentum  v_0 = 0;  v <- gamma * v + g;  theta <- theta - eta_t * v        (== torch::optim::SGD, momentum,
//                                                                                  dampening 0)
//   nesterov  v_0 = 0;  v <- gamma * v + g;  theta <- theta - eta_t * (gamma * v + g)
//                                                                             (== torch::optim::SGD, nesterov)
//   rmsprop   v_0 = 1, m_0 = 0;  v <- rho * v + (1 - rho) * g^2;
//             m <- gamma * m + eta_t * g / sqrt(v + epsilon);  theta <- theta - m
//             (LibTorch's RMSprop differs: v_0 = 0, epsilon outside the sqrt, and eta applied outside the momentum
//             buffer, so a change of eta_t acts at once there but through m here)
//   adam      m_0 = 0, v_0 = 0;  m <- beta1 * m + (1 - beta1) * g;  v <- beta2 * v + (1 - beta2) * g^2;
//             b_t = sqrt(1 - beta2^t) / (1 - beta1^t);  theta <- theta - eta_t * b_t * m / (sqrt(v) + epsilon)
//             (LibTorch's Adam adds epsilon to sqrt(v / (1 - beta2^t)), i.e. after bias-correcting v; the two agree
//             only when epsilon = 0: this rule is LibTorch's with epsilon / sqrt(1 - beta2^t), larger early on)
//   nadam     m, v and b_t as adam;  theta <- theta - eta_t * b_t * (beta1 * m + (1 - beta1) * g) / (sqrt(v) + epsilon)
//             (LibTorch 1.13 has no NAdam; this is the playbook's form, without Dozat's momentum-decay schedule)
//
// Weight decay (weight_decay = wd > 0):
//   coupled (L2, default):  g <- grad + wd * theta_t before the update above, so it goes through the momentum and
//                           the adaptive normalisation (LibTorch's `weight_decay` option behaves the same way).
//   decoupled:              theta_{t+1} <- (update above) - eta_t * wd * theta_t, i.e. AdamW's form: decoupled from
//                           the gradient statistics but multiplied by the schedule's learning rate eta_t, as
//                           torch.optim.AdamW does (Loshchilov & Hutter's paper multiplies by eta_t / base learning
//                           rate instead, so wd values differ by that factor). For sgd the two forms coincide.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "one_pass_update.h"

namespace dltune {

// Hyperparameters of an Optimizer. Fields a kind does not use are ignored (but still validated).
struct OptimizerOptions {
  std::string kind = "sgd";             // sgd | momentum | nesterov | rmsprop | adam | nadam
  double momentum = 0.9;                // gamma of momentum, nesterov and rmsprop; in [0, 1)
  double rho = 0.9;                     // rmsprop's decay of v; in [0, 1)
  double beta1 = 0.9;                   // adam/nadam; in [0, 1)
  double beta2 = 0.999;                 // adam/nadam; in [0, 1)
  double epsilon = 1e-8;                // rmsprop (inside the sqrt), adam/nadam (outside); finite, >= 0
  double weight_decay = 0.0;            // wd; finite, >= 0
  bool decoupled_weight_decay = false;  // see the file comment

  // Throws Error naming the first bad field and its value, e.g. "optimizer: momentum must be in [0, 1), not 1".
  void Validate() const;
};

// The scalars of a step of `rule` with `options` at learning rate `eta` (the one-pass update's and the tensor ops').
UpdateCoefficients CoefficientsOf(UpdateRule rule, const OptimizerOptions& options, double eta);

// The rows of a step's coefficient table: one column of them per parameter of an Optimizer on a device, or per
// member of an ArrayOptimizer. A step on a device reads its coefficients from such a table, moved there, rather than
// taking them as numbers: a step captured once in a CUDA graph (cuda_graph.h) is then replayed with each step's.
namespace coefficient {
enum Row : std::int64_t {
  kEta,            // eta_t
  kEtaGamma,       // eta_t * gamma (nesterov)
  kCoupledWd,      // wd under coupled decay, else 0
  kDecay,          // 1 - eta_t * wd where theta decays in place, else 1
  kGamma,          // momentum, nesterov, rmsprop
  kRho,            // rmsprop
  kOneMinusRho,    //
  kBeta1,          // adam, nadam
  kOneMinusBeta1,  //
  kBeta2,          //
  kOneMinusBeta2,  //
  kEpsilon,        // rmsprop, adam, nadam
  kStepSize,       // adam, nadam: -eta_t * b_t (nadam: * beta1), the step along m / (sqrt(v) + epsilon)
  kGradientStep,   // nadam: -eta_t * b_t * (1 - beta1), the step along g / (sqrt(v) + epsilon)
  kMask,           // 1: updated; 0: kept as it is (a masked member)
  kRows
};
}  // namespace coefficient

// Writes `c`'s coefficients, with the bias correction of update count `t`, into column `column` of `table` (a
// [coefficient::kRows, columns] float64 CPU tensor), mask 1, when `active`; otherwise the coefficients that leave a
// parameter and its state as they are, given a zero gradient (finite ones: no step, every average all its old value,
// epsilon 1), mask 0.
void SetCoefficientColumn(const UpdateCoefficients& c, double t, bool active, torch::Tensor& table,
                          std::int64_t column);

// OnePassUpdate's rules as LibTorch operations, on any device: what Optimizer runs off the CPU. Each coefficient is an
// element of `coefficients` (a table column, coefficient::Row order, on the parameter's device and in its dtype; or
// [rows, k, 1], k columns, for parameters whose k rows each take their own: ArrayOptimizer's members), so that the
// kernels launched do not depend on them; `coupled` and `decays` (whether theta decays in place at all)
// depend on the options only. Each operation is a kernel of its own, in place where it can be, so their rounding may
// differ from the one-pass loop's in the last bit (fused multiply-adds). Updates `param` and `buffers` (the rule's
// state, in Optimizer::BufferNames() order) in place.
void UpdateWithTensorOps(UpdateRule rule, bool coupled, bool decays, const torch::Tensor& coefficients,
                         torch::Tensor& param, const torch::Tensor& grad, std::vector<torch::Tensor>& buffers);

// The optimizer kinds, in the playbook's order.
const std::vector<std::string>& OptimizerKinds();
// The update rule of kind `kind` (one of OptimizerKinds()).
UpdateRule RuleOfKind(const std::string& kind);
// The names a rule's state buffers are saved under, in their order ("v"; "v", "m"; "m", "v"; none for sgd).
const std::vector<std::string>& StateBufferNames(UpdateRule rule);

// An optimizer's state as a checkpoint holds it (Optimizer::Save writes it, Optimizer::Load reads it): its kind and
// step count, and per parameter its update count and state buffers in StateBufferNames() order. A fused member's
// state is one of these too (ArrayOptimizer::CopyMember), so that a lone optimizer loads it.
struct OptimizerState {
  std::string kind;
  std::int64_t steps = 0;
  std::vector<std::int64_t> param_steps;            // per parameter
  std::vector<std::vector<torch::Tensor>> buffers;  // per parameter
  // Writes it into `archive`; give it an archive of its own (the keys are short: kind, steps, param_count,
  // param_<i>).
  void Save(torch::serialize::OutputArchive& archive) const;
};

// Updates a fixed list of parameter tensors in place from their .grad(), with the rules in the file comment.
// Keeps its state (moments, per-parameter update counts) beside each parameter, in its dtype. Each Step is one pass
// over each parameter's memory (one_pass_update.h), split across LibTorch's intra-op threads. Parameters whose grad is
// undefined at Step are skipped (state and t untouched). Not thread-safe; the parameters are shared with the caller
// (the model), not copied.
class Optimizer {
 public:
  // `params`: defined, contiguous float32 or float64 tensors on one device (typically model->parameters()). On the
  // CPU each Step is the one pass; on another device (CUDA) the same rules run as LibTorch operations, whose
  // rounding may differ in the last bit. Throws Error on invalid options or any other parameter.
  //
  // On a device (or on the CPU with `flat`, to test it there), parameters of one dtype take the flat layout: their
  // data moved into one tensor, each parameter a view of its range (the same tensor objects, the values kept), and
  // each state buffer likewise, so that a step updates every parameter in the kernels of one, bit for bit as
  // parameter by parameter. A parameter whose storage is replaced afterwards (Module::load sets it) is moved back in
  // at the next step.
  Optimizer(std::vector<torch::Tensor> params, OptimizerOptions options, bool flat = false);

  // Makes every parameter's grad undefined (cheaper than zeroing; the next backward allocates it).
  void ZeroGrad();
  // Applies one update with learning rate eta_t = `learning_rate` to every parameter that has a grad, and returns
  // the global L2 norm of those grads (as they were before the update, without weight decay), summed in double
  // precision in the update's own pass. Throws Error if the learning rate is negative or not finite, or a grad is
  // sparse; nothing is changed then.
  double Step(double learning_rate);
  // Step, with the norm as a 0-dim float64 tensor on the parameters' device: on a device it is not read to the host
  // (no synchronization per step); on the CPU it is the same value as Step's.
  torch::Tensor StepDeferred(double learning_rate);
  // Number of Step calls so far (restored by Load).
  std::int64_t steps() const { return steps_; }

  // Writes the state (kind, step counts, copies of the moment tensors) into `archive`; give it an archive of its
  // own (the keys are short: kind, steps, param_count, param_<i>). The tensors are copies, so the archive may be
  // serialized later while training continues.
  void Save(torch::serialize::OutputArchive& archive) const;
  // Restores what Save wrote, exactly: continuing then is bit-identical to never having stopped. Hyperparameters
  // other than kind are this optimizer's own (not read from the archive). Throws Error, leaving the state
  // unchanged, when the archive holds another kind, another number of parameters, a shape that differs, or is
  // incomplete.
  void Load(torch::serialize::InputArchive& archive);

  // The scalars of a step with this learning rate (all but the per-parameter bias, which depends on its t).
  UpdateCoefficients Coefficients(double learning_rate) const;

  // The device's step in its two halves, for a step captured in a CUDA graph (cuda_graph.h): the host's half runs
  // before each replay, the device's is captured. StepDeferred on a device is ApplyTable(CoefficientTable(eta)) moved
  // there, so a captured step and an eager one launch the same kernels with the same coefficients.
  //
  // The host's: this step's coefficients, one column per parameter ([coefficient::kRows, params] float64, CPU), the
  // step counted for each parameter that has a gradient now. Without `advance`, nothing is counted and every
  // parameter's column is that of its next update (the table a step's capture runs with). Throws Error for a bad
  // learning rate or a sparse gradient, as Step does.
  torch::Tensor CoefficientTable(double learning_rate, bool advance = true);
  // The device's: every parameter that has a gradient updated with its column of `table` (on the parameters'
  // device), in tensor operations with no host copy or synchronization; returns the gradients' global L2 norm as
  // StepDeferred does. Runs on the CPU too (the tensor form, not the one pass).
  torch::Tensor ApplyTable(const torch::Tensor& table);

  const OptimizerOptions& options() const { return options_; }
  const std::vector<torch::Tensor>& params() const { return params_; }
  // Parameter i's state buffers (the moments), in the order of Save's names.
  const std::vector<torch::Tensor>& Buffers(std::size_t param) const { return states_.at(param).buffers; }

 private:
  // Per-parameter state: the playbook's v (and m) tensors, as many as the kind needs, and t.
  struct ParamState {
    std::vector<torch::Tensor> buffers;
    std::int64_t steps = 0;
  };

  // Names of the state buffers of this kind, in ParamState::buffers order.
  const std::vector<std::string>& BufferNames() const { return StateBufferNames(kind_); }
  // Throws Error, before anything changes, for a bad learning rate or a sparse gradient.
  void CheckStep(double learning_rate) const;
  // One step on CPU parameters (the one pass), returning the gradient norm.
  double StepOnCpu(UpdateCoefficients c);
  // The flat layout: moves every parameter's data into flat_ (each one a view of its range, its values kept).
  void Flatten();
  // Whether every parameter is still its view of flat_.
  bool Flat() const;

  OptimizerOptions options_;
  UpdateRule kind_;
  bool coupled_ = false;  // the gradient carries wd * theta (coupled decay, not sgd)
  bool decays_ = false;   // theta decays in place (decoupled decay, or sgd's or nesterov's coupled one)
  std::vector<torch::Tensor> params_;
  std::vector<ParamState> states_;
  std::int64_t steps_ = 0;
  // The flat layout's (undefined otherwise): every parameter's data, each state buffer's, and where each parameter
  // starts in them.
  torch::Tensor flat_;
  std::vector<torch::Tensor> flat_buffers_;
  std::vector<std::int64_t> offsets_;
  bool on_cpu_ = true;  // the parameters are CPU tensors (none: CPU)
};

}  // namespace dltune
