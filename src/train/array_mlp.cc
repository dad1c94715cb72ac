#include "array_mlp.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

// The lone model's parameters as (weight [out, in], bias [out]) pairs of a chain of dense layers; Error otherwise.
std::vector<std::pair<torch::Tensor, torch::Tensor>> DenseLayers(Model& model) {
  const std::vector<torch::Tensor> parameters = model.parameters();
  if (parameters.empty() || parameters.size() % 2 != 0) {
    throw Error(
        fmt::format("array MLP: a lone model with {} parameters is not a chain of dense layers", parameters.size()));
  }
  std::vector<std::pair<torch::Tensor, torch::Tensor>> layers;
  for (std::size_t i = 0; i < parameters.size(); i += 2) {
    const torch::Tensor& weight = parameters[i];
    const torch::Tensor& bias = parameters[i + 1];
    const bool chained = layers.empty() || layers.back().first.size(0) == weight.size(-1);
    if (weight.dim() != 2 || bias.dim() != 1 || bias.size(0) != weight.size(0) || !chained ||
        weight.scalar_type() != torch::kFloat) {
      throw Error(fmt::format("array MLP: parameters {} and {} (shapes [{}] and [{}]) are not a dense layer's", i,
                              i + 1, fmt::join(weight.sizes(), ", "), fmt::join(bias.sizes(), ", ")));
    }
    layers.emplace_back(weight, bias);
  }
  return layers;
}

// One dense layer of every member, x [M, B, in] to x W^T + b [M, B, out], with the products of the backward pass
// taken as a lone Linear's are (LibTorch's addmm backward for its transposed weight): the weight's gradient as
// g^T x straight into the [M, out, in] layout, the input's as g W. baddbmm's own backward would take x^T g and copy
// it transposed, another BLAS call (other rounding) and a copy of the weights' size per step.
struct ArrayLinear : torch::autograd::Function<ArrayLinear> {
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

// A fixed batch of 8 inputs in [0, 1): a probe that needs no random generator.
torch::Tensor ProbeInputs(std::int64_t features) {
  return torch::sin(torch::arange(8 * features, torch::kFloat).reshape({8, features})).abs();
}

}  // namespace

ArrayMlp::ArrayMlp(const std::vector<std::shared_ptr<Model>>& members, std::optional<InputStandardization> standardize)
    : members_(static_cast<std::int64_t>(members.size())), standardize_(standardize) {
  if (members.empty()) throw Error("array MLP: no members");
  torch::NoGradGuard no_grad;
  const auto first = DenseLayers(*members.front());
  for (std::size_t l = 0; l < first.size(); ++l) {
    const std::int64_t out = first[l].first.size(0), in = first[l].first.size(1);
    weights_.push_back(register_parameter(fmt::format("weight{}", l), torch::empty({members_, out, in})));
    biases_.push_back(register_parameter(fmt::format("bias{}", l), torch::empty({members_, out})));
  }
  for (std::int64_t m = 0; m < members_; ++m) {
    const auto layers = DenseLayers(*members[static_cast<std::size_t>(m)]);
    if (layers.size() != first.size()) throw Error(fmt::format("array MLP: member {} has another depth", m));
    for (std::size_t l = 0; l < layers.size(); ++l) {
      if (layers[l].first.sizes() != first[l].first.sizes()) {
        throw Error(fmt::format("array MLP: member {}'s layer {} has shape [{}], member 0's [{}]", m, l,
                                fmt::join(layers[l].first.sizes(), ", "), fmt::join(first[l].first.sizes(), ", ")));
      }
      weights_[l][m].copy_(layers[l].first);
      biases_[l][m].copy_(layers[l].second);
    }
  }
  const torch::Tensor probe = ProbeInputs(first.front().first.size(1));
  const torch::Tensor fused = Forward(probe.unsqueeze(0).expand({members_, -1, -1}).contiguous());
  for (std::int64_t m = 0; m < members_; ++m) {
    Model& lone = *members[static_cast<std::size_t>(m)];
    const bool training = lone.is_training();
    lone.eval();
    const torch::Tensor expected = lone.Forward(probe);
    lone.train(training);
    if (!torch::allclose(fused[m], expected, 1e-4, 1e-5)) {
      throw Error(fmt::format(
          "array MLP: member {} computes other logits than its lone model: not an MLP of dense + ReLU layers{}", m,
          standardize_ ? " with this input standardization" : " without input standardization"));
    }
  }
}

torch::Tensor ArrayMlp::Forward(const torch::Tensor& inputs) {
  torch::Tensor x = inputs.flatten(2);
  if (standardize_) x = (x - standardize_->mean) / standardize_->std;
  return Layers(x);
}

torch::Tensor ArrayMlp::Forward(const std::vector<torch::Tensor>& member_inputs) {
  if (static_cast<std::int64_t>(member_inputs.size()) != members_) {
    throw Error(fmt::format("array MLP: {} batches for {} members", member_inputs.size(), members_));
  }
  const torch::Tensor& first = member_inputs.front();
  torch::Tensor x = torch::empty({members_, first.size(0), first.numel() / std::max<std::int64_t>(first.size(0), 1)},
                                 first.options());
  for (std::int64_t m = 0; m < members_; ++m) {
    torch::Tensor slice = x[m];
    slice.copy_(member_inputs[static_cast<std::size_t>(m)].flatten(1));
    // In place, the element-wise arithmetic of (x - mean) / std.
    if (standardize_) slice.sub_(standardize_->mean).div_(standardize_->std);
  }
  return Layers(x);
}

torch::Tensor ArrayMlp::Layers(torch::Tensor x) {
  for (std::size_t l = 0; l < weights_.size(); ++l) {
    x = ArrayLinear::apply(x, weights_[l], biases_[l]);
    if (l + 1 < weights_.size()) x = torch::relu(x);
  }
  return x;
}

std::vector<torch::Tensor> ArrayMlp::ArrayParameters() const {
  std::vector<torch::Tensor> parameters;
  for (std::size_t l = 0; l < weights_.size(); ++l) {
    parameters.push_back(weights_[l]);
    parameters.push_back(biases_[l]);
  }
  return parameters;
}

void ArrayMlp::CopyMemberInto(std::int64_t member, Model& model) const {
  torch::NoGradGuard no_grad;
  const auto layers = DenseLayers(model);
  if (layers.size() != weights_.size()) throw Error("array MLP: the lone model has another depth");
  for (std::size_t l = 0; l < layers.size(); ++l) {
    layers[l].first.copy_(weights_[l][member]);
    layers[l].second.copy_(biases_[l][member]);
  }
}

}  // namespace dltune
