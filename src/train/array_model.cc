#include "array_model.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "device.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

// One dense layer of every member with the products of the backward pass taken as a lone Linear's are (LibTorch's
// addmm backward for its transposed weight): the weight's gradient as g^T x straight into the [M, out, in] layout,
// the input's as g W. baddbmm's own backward would take x^T g and copy it transposed, another BLAS call (other
// rounding) and a copy of the weights' size per step. The forward uses the weights' transposed view, the lone
// layer's transposition flags: contiguous [M, in, out] weights would call the BLAS without it, whose kernels round
// differently at some widths (10 outputs on OpenBLAS's SkylakeX kernels).
struct ArrayLinearFunction : torch::autograd::Function<ArrayLinearFunction> {
  // NOLINTBEGIN(readability-identifier-naming): the names torch::autograd::Function calls.
  static torch::Tensor forward(torch::autograd::AutogradContext* context, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    context->save_for_backward({x, weight});
    return torch::baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2));
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* context,
                                                 torch::autograd::variable_list gradients) {
    const auto saved = context->get_saved_variables();
    const torch::Tensor& x = saved[0];
    const torch::Tensor& weight = saved[1];
    const torch::Tensor& g = gradients[0];
    torch::Tensor x_gradient, weight_gradient, bias_gradient;
    if (context->needs_input_grad(0)) x_gradient = g.bmm(weight);
    if (context->needs_input_grad(1)) weight_gradient = g.transpose(1, 2).bmm(x);
    if (context->needs_input_grad(2)) bias_gradient = g.sum(1);
    return {x_gradient, weight_gradient, bias_gradient};
  }
  // NOLINTEND(readability-identifier-naming)
};

// The name under which the array tensor of lone tensor `name` is registered ("conv1.weight" -> "conv1_weight").
std::string ArrayName(std::string name) {
  std::replace(name.begin(), name.end(), '.', '_');
  return name;
}

}  // namespace

torch::Tensor ArrayLinear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return ArrayLinearFunction::apply(x, weight, bias);
}

ArrayModel::ArrayModel(const std::vector<std::shared_ptr<Model>>& members, std::string what,
                       const torch::Device& device)
    : members_(static_cast<std::int64_t>(members.size())), what_(std::move(what)) {
  if (members.empty()) throw Error(fmt::format("{}: no members", what_));
  torch::NoGradGuard no_grad;
  const Model& first = *members.front();
  for (const auto& item : first.named_parameters()) {
    const torch::Tensor& lone = item.value();
    if (lone.scalar_type() != torch::kFloat) {
      throw Error(fmt::format("{}: parameter {} is not float32", what_, item.key()));
    }
    std::vector<std::int64_t> shape = {members_};
    shape.insert(shape.end(), lone.sizes().begin(), lone.sizes().end());
    parameters_.push_back(
        register_parameter(ArrayName(item.key()), torch::empty(shape, lone.options().device(device))));
    parameter_names_.push_back(item.key());
    arrays_[item.key()] = parameters_.back();
  }
  for (const auto& item : first.named_buffers()) {
    std::vector<std::int64_t> shape = {members_};
    shape.insert(shape.end(), item.value().sizes().begin(), item.value().sizes().end());
    arrays_[item.key()] =
        register_buffer(ArrayName(item.key()), torch::empty(shape, item.value().options().device(device)));
  }
  for (std::int64_t m = 0; m < members_; ++m) {
    Model& member = *members[static_cast<std::size_t>(m)];
    const auto parameters = member.named_parameters();
    const auto buffers = member.named_buffers();
    if (parameters.size() + buffers.size() != arrays_.size()) {
      throw Error(fmt::format("{}: member {} has {} parameters and buffers, member 0 {}", what_, m,
                              parameters.size() + buffers.size(), arrays_.size()));
    }
    for (const auto* tensors : {&parameters, &buffers}) {
      for (const auto& item : *tensors) {
        const auto array = arrays_.find(item.key());
        if (array == arrays_.end() || array->second[m].sizes() != item.value().sizes()) {
          throw Error(fmt::format("{}: member {}'s {} (shape [{}]) is not member 0's", what_, m, item.key(),
                                  fmt::join(item.value().sizes(), ", ")));
        }
      }
    }
    CopyMemberFrom(m, member);
    dropout_.push_back(at::make_generator<at::CPUGeneratorImpl>());
  }
}

torch::Tensor ArrayModel::ForwardShared(const torch::Tensor& inputs) {
  std::vector<std::int64_t> shape = inputs.sizes().vec();
  shape.insert(shape.begin(), members_);
  return ForwardStacked(inputs.unsqueeze(0).expand(shape));
}

void ArrayModel::CopyMemberInto(std::int64_t member, Model& model) const {
  torch::NoGradGuard no_grad;
  for (const auto& tensors : {model.named_parameters(), model.named_buffers()}) {
    for (const auto& item : tensors) item.value().copy_(Array(item.key())[member]);
  }
}

void ArrayModel::CopyMemberFrom(std::int64_t member, Model& model) {
  torch::NoGradGuard no_grad;
  for (const auto& tensors : {model.named_parameters(), model.named_buffers()}) {
    for (const auto& item : tensors) Array(item.key())[member].copy_(item.value());
  }
}

const torch::Tensor& ArrayModel::Array(const std::string& name) const {
  const auto found = arrays_.find(name);
  if (found == arrays_.end()) throw Error(fmt::format("{}: the lone models have no {}", what_, name));
  return found->second;
}

torch::Tensor ArrayModel::MemberDropout(const torch::Tensor& x, double p) {
  if (!is_training() || p <= 0) return x;
  // torch::dropout on the CPU: a Bernoulli(1 - p) noise of the input's shape, divided by 1 - p, times the input.
  torch::Tensor noise = torch::empty(x.sizes(), x.options().device(torch::kCPU));
  for (std::int64_t m = 0; m < members_; ++m) {
    torch::Tensor slice = noise[m];
    slice.bernoulli_(1 - p, DropoutGenerator(m));
  }
  noise.div_(1 - p);
  return x * ToDevice(noise, x.device());
}

void ArrayModel::CheckAgainstLoneModels(const std::vector<std::shared_ptr<Model>>& members,
                                        const torch::Tensor& probe) {
  torch::NoGradGuard no_grad;
  const bool training = is_training();
  eval();
  const torch::Tensor on_device = probe.to(parameters_.empty() ? torch::Device(torch::kCPU) : parameters_[0].device());
  // The probe as every member's own batch, through the training step's forward.
  const torch::Tensor fused =
      ForwardStacked(torch::stack(std::vector<torch::Tensor>(static_cast<std::size_t>(members_), on_device)))
          .to(torch::kCPU);
  train(training);
  for (std::int64_t m = 0; m < members_; ++m) {
    Model& lone = *members[static_cast<std::size_t>(m)];
    const bool lone_training = lone.is_training();
    lone.eval();
    const torch::Tensor expected = lone.Forward(probe);
    lone.train(lone_training);
    if (!torch::allclose(fused[m], expected, 1e-4, 1e-5)) {
      throw Error(fmt::format("{}: member {} computes other logits than its lone model", what_, m));
    }
  }
}

double DropoutOf(const std::vector<std::shared_ptr<Model>>& members) {
  std::optional<double> rate;
  for (std::size_t m = 0; m < members.size(); ++m) {
    double p = 0;
    for (const auto& child : members[m]->named_children()) {
      if (child.key() != "dropout") continue;
      const auto* dropout = dynamic_cast<const torch::nn::DropoutImpl*>(child.value().get());
      if (dropout == nullptr) throw Error(fmt::format("member {}'s module \"dropout\" is not a Dropout", m));
      p = dropout->options.p();
    }
    if (rate && *rate != p) throw Error(fmt::format("fused members drop out at one rate, not {} and {}", *rate, p));
    rate = p;
  }
  return rate.value_or(0);
}

}  // namespace dltune
