#include "array_optimizer.h"

#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

UpdateRule RuleOf(const std::string& kind) {
  if (kind == "momentum") return UpdateRule::kMomentum;
  if (kind == "nesterov") return UpdateRule::kNesterov;
  if (kind == "rmsprop") return UpdateRule::kRmsProp;
  if (kind == "adam") return UpdateRule::kAdam;
  if (kind == "nadam") return UpdateRule::kNadam;
  return UpdateRule::kSgd;
}

// Optimizer::BufferNames() of each rule: the names a lone optimizer's checkpoint holds its state under.
std::vector<std::string> BufferNames(UpdateRule rule) {
  switch (rule) {
    case UpdateRule::kSgd: return {};
    case UpdateRule::kMomentum:
    case UpdateRule::kNesterov: return {"v"};
    case UpdateRule::kRmsProp: return {"v", "m"};
    case UpdateRule::kAdam:
    case UpdateRule::kNadam: return {"m", "v"};
  }
  return {};
}

void CheckParameter(const torch::Tensor& p, std::size_t index, std::int64_t members) {
  if (!p.defined()) throw Error(fmt::format("array optimizer: parameter {} is undefined", index));
  if (p.scalar_type() != torch::kFloat && p.scalar_type() != torch::kDouble) {
    throw Error(fmt::format("array optimizer: parameter {} is not float32 or float64", index));
  }
  if (!p.device().is_cpu() || !p.is_contiguous()) {
    throw Error(fmt::format("array optimizer: parameter {} is not a contiguous CPU tensor", index));
  }
  if (p.dim() == 0 || p.size(0) != members) {
    throw Error(
        fmt::format("array optimizer: parameter {} does not hold {} members along dimension 0", index, members));
  }
}

}  // namespace

ArrayOptimizer::ArrayOptimizer(std::vector<torch::Tensor> params, std::vector<OptimizerOptions> members)
    : members_(std::move(members)), params_(std::move(params)), steps_(members_.size(), 0) {
  if (members_.empty()) throw Error("array optimizer: no members");
  for (const OptimizerOptions& options : members_) {
    options.Validate();
    if (options.kind != members_.front().kind) {
      throw Error(fmt::format("array optimizer: members of one array share a kind, not {} and {}",
                              members_.front().kind, options.kind));
    }
  }
  rule_ = RuleOf(members_.front().kind);
  buffer_names_ = BufferNames(rule_);
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    CheckParameter(params_[i], i, this->members());
    std::vector<torch::Tensor> buffers;
    for (const std::string& name : buffer_names_) {
      // RMSProp's v starts at 1 (the playbook's v_0 = 1); every other buffer at 0.
      const bool starts_at_one = rule_ == UpdateRule::kRmsProp && name == "v";
      buffers.push_back(starts_at_one ? torch::ones_like(params_[i]) : torch::zeros_like(params_[i]));
    }
    buffers_.push_back(std::move(buffers));
  }
}

void ArrayOptimizer::ZeroGrad() {
  for (torch::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

// As Optimizer::Step, with member m's options.
UpdateCoefficients ArrayOptimizer::Coefficients(std::int64_t member, double eta) const {
  const OptimizerOptions& options = members_[static_cast<std::size_t>(member)];
  UpdateCoefficients c;
  c.rule = rule_;
  c.eta = eta;
  c.weight_decay = options.weight_decay;
  c.coupled = c.weight_decay != 0.0 && !options.decoupled_weight_decay;
  c.decay_factor = 1.0 - c.eta * c.weight_decay;
  c.decay_in_place = c.weight_decay != 0.0 && c.eta != 0.0 &&
                     (!c.coupled || rule_ == UpdateRule::kSgd || rule_ == UpdateRule::kNesterov);
  c.coupled = c.coupled && rule_ != UpdateRule::kSgd;
  c.momentum = options.momentum;
  c.rho = options.rho;
  c.beta1 = options.beta1;
  c.beta2 = options.beta2;
  c.epsilon = options.epsilon;
  return c;
}

double ArrayOptimizer::UpdateMember(std::int64_t member, double eta) {
  UpdateCoefficients c = Coefficients(member, eta);
  const auto t = static_cast<double>(++steps_[static_cast<std::size_t>(member)]);
  c.bias = std::sqrt(1.0 - std::pow(c.beta2, t)) / (1.0 - std::pow(c.beta1, t));
  double squares = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    const torch::Tensor grad = p.grad().to(p.scalar_type()).contiguous();
    const std::int64_t size = p.numel() / members();  // of one member's slice
    const std::int64_t offset = member * size;
    const std::vector<torch::Tensor>& buffers = buffers_[i];
    // The lone optimizer's slices across threads, so that the norm's sums come in the same order.
    constexpr std::int64_t kGrain = 32768;
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "dltune_array_optimizer_step", [&] {
      auto* param = p.data_ptr<scalar_t>() + offset;
      const auto* gradient = grad.data_ptr<scalar_t>() + offset;
      auto* first = buffers.empty() ? nullptr : buffers[0].data_ptr<scalar_t>() + offset;
      auto* second = buffers.size() < 2 ? nullptr : buffers[1].data_ptr<scalar_t>() + offset;
      squares += at::parallel_reduce(
          0, size, kGrain, 0.0,
          [&](std::int64_t begin, std::int64_t end, double) {
            return FusedUpdate(c,
                               UpdateSlice<scalar_t>{param + begin, gradient + begin, first ? first + begin : nullptr,
                                                     second ? second + begin : nullptr, end - begin});
          },
          std::plus<double>());
    });
  }
  return squares;
}

std::vector<double> ArrayOptimizer::Step(const std::vector<double>& learning_rates, const std::vector<bool>& active) {
  const auto count = members_.size();
  if (learning_rates.size() != count || active.size() != count) {
    throw Error(fmt::format("array optimizer: {} learning rates and {} masks for {} members", learning_rates.size(),
                            active.size(), count));
  }
  for (const double eta : learning_rates) {
    if (!(std::isfinite(eta) && eta >= 0.0)) {
      throw Error(fmt::format("array optimizer: the learning rate must be finite and >= 0, not {}", eta));
    }
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& grad = params_[i].grad();
    if (!grad.defined() || grad.is_sparse()) {
      throw Error(fmt::format("array optimizer: parameter {} has no dense gradient", i));
    }
  }
  torch::NoGradGuard no_grad;
  std::vector<double> norms(count, 0.0);
  for (std::size_t m = 0; m < count; ++m) {
    if (active[m]) norms[m] = std::sqrt(UpdateMember(static_cast<std::int64_t>(m), learning_rates[m]));
  }
  return norms;
}

void ArrayOptimizer::SaveMember(std::int64_t member, torch::serialize::OutputArchive& archive) const {
  const std::int64_t steps = steps_.at(static_cast<std::size_t>(member));
  archive.write("kind", c10::IValue(members_.front().kind));
  archive.write("steps", c10::IValue(steps));
  archive.write("param_count", c10::IValue(static_cast<std::int64_t>(params_.size())));
  for (std::size_t i = 0; i < params_.size(); ++i) {
    torch::serialize::OutputArchive param_archive;
    param_archive.write("steps", c10::IValue(steps));
    for (std::size_t b = 0; b < buffer_names_.size(); ++b) {
      param_archive.write(buffer_names_[b], buffers_[i][b][member].clone(), /*is_buffer=*/true);
    }
    archive.write(fmt::format("param_{}", i), param_archive);
  }
}

}  // namespace dltune
