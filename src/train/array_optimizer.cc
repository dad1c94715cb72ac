#include "array_optimizer.h"

#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "device.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

void CheckParameter(const torch::Tensor& p, std::size_t index, std::int64_t members) {
  if (!p.defined()) throw Error(fmt::format("array optimizer: parameter {} is undefined", index));
  if (p.scalar_type() != torch::kFloat && p.scalar_type() != torch::kDouble) {
    throw Error(fmt::format("array optimizer: parameter {} is not float32 or float64", index));
  }
  if (p.dim() == 0 || p.size(0) != members) {
    throw Error(
        fmt::format("array optimizer: parameter {} does not hold {} members along dimension 0", index, members));
  }
}

}  // namespace

ArrayOptimizer::ArrayOptimizer(std::vector<torch::Tensor> params, std::vector<OptimizerOptions> members, Form form)
    : members_(std::move(members)), params_(std::move(params)), steps_(members_.size(), 0) {
  if (members_.empty()) throw Error("array optimizer: no members");
  for (const OptimizerOptions& options : members_) options.Validate();
  tensor_form_ = form == Form::kTensor || (!params_.empty() && !params_.front().device().is_cpu());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    CheckParameter(params_[i], i, this->members());
    if (params_[i].device() != params_.front().device()) {
      throw Error(fmt::format("array optimizer: parameter {} is on another device than parameter 0", i));
    }
    // The fused loop walks each member's slice by pointer; the tensor form gives the parameters a layout of its own.
    if (!tensor_form_ && !params_[i].is_contiguous()) {
      throw Error(fmt::format("array optimizer: parameter {} is not contiguous", i));
    }
    if (tensor_form_ && params_[i].scalar_type() != params_.front().scalar_type()) {
      throw Error(fmt::format("array optimizer: parameter {} is of another type than parameter 0", i));
    }
  }
  torch::NoGradGuard no_grad;
  for (std::int64_t m = 0; m < this->members(); ++m) {
    const UpdateRule rule = RuleOfKind(members_[static_cast<std::size_t>(m)].kind);
    if (runs_.empty() || runs_.back().rule != rule) runs_.push_back({.begin = m, .rule = rule});
    runs_.back().end = m + 1;
    run_of_.push_back(runs_.size() - 1);
  }
  if (tensor_form_) FlattenParameters();
  for (Run& run : runs_) {
    for (std::int64_t m = run.begin; m < run.end; ++m) {
      // As CoefficientsOf decides them, for any learning rate but 0 (as Optimizer's constructor asks).
      const UpdateCoefficients c = CoefficientsOf(run.rule, members_[static_cast<std::size_t>(m)], 1.0);
      run.coupled = run.coupled || c.coupled;
      run.decays = run.decays || c.decay_in_place;
    }
    const std::int64_t count = run.end - run.begin;
    const std::vector<std::string>& names = StateBufferNames(run.rule);
    // RMSProp's v starts at 1 (the playbook's v_0 = 1); every other buffer at 0.
    const auto initial = [&](std::size_t b, const torch::Tensor& like) {
      const bool starts_at_one = run.rule == UpdateRule::kRmsProp && names[b] == "v";
      return starts_at_one ? torch::ones_like(like) : torch::zeros_like(like);
    };
    for (std::size_t b = 0; tensor_form_ && b < names.size(); ++b) {
      run.flat_buffers.push_back(initial(b, flat_.narrow(0, run.begin, count)));
    }
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const torch::Tensor slice = params_[i].narrow(0, run.begin, count);
      std::vector<torch::Tensor> buffers;
      for (std::size_t b = 0; b < names.size(); ++b) {
        // In the tensor form, parameter i's columns of the run's flat buffer, shaped as its slice.
        buffers.push_back(tensor_form_
                              ? run.flat_buffers[b].narrow(1, offsets_[i], slice.numel() / count).view(slice.sizes())
                              : initial(b, slice));
      }
      run.buffers.push_back(std::move(buffers));
    }
  }
}

void ArrayOptimizer::FlattenParameters() {
  std::int64_t size = 0;  // of one member's parameters
  for (const torch::Tensor& param : params_) {
    offsets_.push_back(size);
    size += param.numel() / members();
  }
  flat_ = torch::empty({members(), size}, params_.empty() ? torch::TensorOptions() : params_.front().options());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& param = params_[i];
    const torch::Tensor view = flat_.narrow(1, offsets_[i], param.numel() / members()).view(param.sizes());
    view.copy_(param);
    // The same tensor (the model's, with its gradient's bookkeeping), its data now that view.
    param.set_data(view);
  }
}

void ArrayOptimizer::ZeroGrad() {
  for (torch::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

// As Optimizer::Step, with member m's options.
UpdateCoefficients ArrayOptimizer::Coefficients(std::int64_t member, double eta) const {
  return CoefficientsOf(RunOf(member).rule, members_[static_cast<std::size_t>(member)], eta);
}

double ArrayOptimizer::UpdateMember(std::int64_t member, double eta) {
  UpdateCoefficients c = Coefficients(member, eta);
  const auto t = static_cast<double>(++steps_[static_cast<std::size_t>(member)]);
  c.bias = std::sqrt(1.0 - std::pow(c.beta2, t)) / (1.0 - std::pow(c.beta1, t));
  const Run& run = RunOf(member);
  double squares = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    const torch::Tensor grad = p.grad().to(p.scalar_type()).contiguous();
    const std::int64_t size = p.numel() / members();  // of one member's slice
    const std::int64_t offset = member * size;
    const std::vector<torch::Tensor>& buffers = run.buffers[i];
    const std::int64_t buffer_offset = (member - run.begin) * size;
    // The lone optimizer's slices across threads, so that the norm's sums come in the same order.
    constexpr std::int64_t kGrain = 32768;
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "dltune_array_optimizer_step", [&] {
      auto* param = p.data_ptr<scalar_t>() + offset;
      const auto* gradient = grad.data_ptr<scalar_t>() + offset;
      auto* first = buffers.empty() ? nullptr : buffers[0].data_ptr<scalar_t>() + buffer_offset;
      auto* second = buffers.size() < 2 ? nullptr : buffers[1].data_ptr<scalar_t>() + buffer_offset;
      squares += at::parallel_reduce(
          0, size, kGrain, 0.0,
          [&](std::int64_t begin, std::int64_t end, double) {
            return OnePassUpdate(c,
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
  CheckStep(learning_rates, active);
  torch::NoGradGuard no_grad;
  if (tensor_form_) {
    const torch::Tensor norms = TensorStep(learning_rates, active).to(torch::kCPU).contiguous();
    return {norms.data_ptr<double>(), norms.data_ptr<double>() + count};
  }
  std::vector<double> norms(count, 0.0);
  for (std::size_t m = 0; m < count; ++m) {
    if (active[m]) norms[m] = std::sqrt(UpdateMember(static_cast<std::int64_t>(m), learning_rates[m]));
  }
  return norms;
}

void ArrayOptimizer::CheckStep(const std::vector<double>& learning_rates, const std::vector<bool>& active,
                               bool gradients) const {
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
  for (std::size_t i = 0; gradients && i < params_.size(); ++i) {
    const torch::Tensor& grad = params_[i].grad();
    if (!grad.defined() || grad.is_sparse()) {
      throw Error(fmt::format("array optimizer: parameter {} has no dense gradient", i));
    }
  }
}

torch::Tensor ArrayOptimizer::StepDeferred(const std::vector<double>& learning_rates, const std::vector<bool>& active) {
  if (!tensor_form_) return torch::tensor(Step(learning_rates, active), torch::kDouble);
  CheckStep(learning_rates, active);
  torch::NoGradGuard no_grad;
  return TensorStep(learning_rates, active);
}

torch::Tensor ArrayOptimizer::TensorStep(const std::vector<double>& learning_rates, const std::vector<bool>& active) {
  return ApplyTable(ToDevice(CoefficientTable(learning_rates, active), params_.front().device()));
}

torch::Tensor ArrayOptimizer::CoefficientTable(const std::vector<double>& learning_rates,
                                               const std::vector<bool>& active) {
  CheckStep(learning_rates, active, /*gradients=*/false);
  const auto count = static_cast<std::int64_t>(members_.size());
  torch::Tensor table = torch::empty({coefficient::kRows, count}, torch::kDouble);
  for (std::int64_t m = 0; m < count; ++m) {
    const auto member = static_cast<std::size_t>(m);
    const auto t = static_cast<double>(steps_[member] + (active[member] ? 1 : 0));
    SetCoefficientColumn(Coefficients(m, learning_rates[member]), t, active[member], table, m);
  }
  for (std::size_t m = 0; m < members_.size(); ++m) steps_[m] += active[m] ? 1 : 0;
  return table;
}

torch::Tensor ArrayOptimizer::ApplyTable(const torch::Tensor& table) {
  torch::NoGradGuard no_grad;
  const torch::Tensor typed = table.to(flat_.scalar_type());
  std::vector<torch::Tensor> grads;
  for (const torch::Tensor& p : params_) grads.push_back(p.grad().to(flat_.scalar_type()).reshape({members(), -1}));
  // Every member's gradient as one [M, P] row, as flat_ holds its parameters: one kernel, and the update's kernels
  // then cover all parameters at once.
  torch::Tensor g = torch::cat(grads, 1);
  const torch::Tensor norms = at::linalg_vector_norm(g, 2, std::vector<std::int64_t>{1}, false, torch::kDouble);
  // A masked member's gradient (NaN, maybe: it diverged) is zeroed, and its coefficients leave what it holds as it is.
  g.masked_fill_(typed[coefficient::kMask].unsqueeze(1) < 0.5, 0.0);
  for (Run& run : runs_) {
    const std::int64_t count = run.end - run.begin;
    torch::Tensor p = flat_.narrow(0, run.begin, count);  // [count, P], updated in place
    // The lone optimizer's operations, each coefficient a [count, 1] column broadcast over its members' rows.
    UpdateWithTensorOps(run.rule, run.coupled, run.decays, typed.narrow(1, run.begin, count).unsqueeze(2), p,
                        g.narrow(0, run.begin, count), run.flat_buffers);
  }
  return norms.masked_fill(table[coefficient::kMask] <= 0.5, 0.0);
}

OptimizerState ArrayOptimizer::CopyMember(std::int64_t member) const {
  const Run& run = RunOf(member);
  const std::int64_t steps = steps_.at(static_cast<std::size_t>(member));
  OptimizerState state{.kind = members_[static_cast<std::size_t>(member)].kind, .steps = steps};
  for (const std::vector<torch::Tensor>& buffers : run.buffers) {
    state.param_steps.push_back(steps);  // every parameter has a gradient at each step
    std::vector<torch::Tensor> copies;
    for (const torch::Tensor& buffer : buffers) copies.push_back(buffer[member - run.begin].clone());
    state.buffers.push_back(std::move(copies));
  }
  return state;
}

void ArrayOptimizer::LoadMember(std::int64_t member, torch::serialize::InputArchive& archive) {
  // A lone optimizer over tensors of the member's shapes reads and checks the archive; its state is then copied in.
  std::vector<torch::Tensor> shapes;
  for (const torch::Tensor& param : params_) shapes.push_back(torch::zeros_like(param[member]));
  Optimizer lone(shapes, members_.at(static_cast<std::size_t>(member)));
  lone.Load(archive);
  torch::NoGradGuard no_grad;
  Run& run = runs_[run_of_.at(static_cast<std::size_t>(member))];
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (std::size_t b = 0; b < run.buffers[i].size(); ++b) {
      run.buffers[i][b][member - run.begin].copy_(lone.Buffers(i)[b]);
    }
  }
  steps_[static_cast<std::size_t>(member)] = lone.steps();
}

}  // namespace dltune
