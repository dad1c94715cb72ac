#include "array_mlp.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dltune/core/error.h"
#include "standardize.h"

namespace dltune {
namespace {

// A fixed batch of 8 inputs in [0, 1): a probe that needs no random generator.
torch::Tensor ProbeInputs(std::int64_t features) {
  return torch::sin(torch::arange(8 * features, torch::kFloat).reshape({8, features})).abs();
}

}  // namespace

ArrayMlp::ArrayMlp(const std::vector<std::shared_ptr<Model>>& members, std::optional<InputStandardization> standardize,
                   const torch::Device& device)
    : ArrayModel(members, "array MLP", device), standardize_(standardize), dropout_(DropoutOf(members)) {
  // The parameters as (weight [M, out, in], bias [M, out]) pairs of a chain of dense layers.
  const std::vector<torch::Tensor>& parameters = ArrayParameters();
  if (parameters.empty() || parameters.size() % 2 != 0) {
    throw Error(
        fmt::format("array MLP: a lone model with {} parameters is not a chain of dense layers", parameters.size()));
  }
  for (std::size_t i = 0; i < parameters.size(); i += 2) {
    const torch::Tensor& weight = parameters[i];
    const torch::Tensor& bias = parameters[i + 1];
    const bool chained = weights_.empty() || weights_.back().size(1) == weight.size(-1);
    if (weight.dim() != 3 || bias.dim() != 2 || bias.size(1) != weight.size(1) || !chained) {
      throw Error(fmt::format("array MLP: parameters {} and {} (shapes [{}] and [{}]) are not a dense layer's",
                              ParameterNames()[i], ParameterNames()[i + 1], fmt::join(weight.sizes().slice(1), ", "),
                              fmt::join(bias.sizes().slice(1), ", ")));
    }
    weights_.push_back(weight);
    biases_.push_back(bias);
  }
  try {
    CheckAgainstLoneModels(members, ProbeInputs(weights_.front().size(2)));
  } catch (const Error& e) {
    throw Error(fmt::format("{}: not an MLP of dense + ReLU layers{}", e.what(),
                            standardize_ ? " with this input standardization" : " without input standardization"));
  }
}

torch::Tensor ArrayMlp::ForwardStacked(const torch::Tensor& inputs) {
  if (inputs.dim() < 3 || inputs.size(0) != members()) {
    throw Error(fmt::format("array MLP: inputs of shape [{}] are not [{}, batch, ...]", fmt::join(inputs.sizes(), ", "),
                            members()));
  }
  return Layers(Standardized(inputs.flatten(2)));
}

torch::Tensor ArrayMlp::ForwardShared(const torch::Tensor& inputs) {
  if (inputs.dim() < 2) {
    throw Error(fmt::format("array MLP: inputs of shape [{}] are not [batch, ...]", fmt::join(inputs.sizes(), ", ")));
  }
  const torch::Tensor x = Standardized(inputs.flatten(1));
  return Layers(x.unsqueeze(0).expand({members(), x.size(0), x.size(1)}));
}

torch::Tensor ArrayMlp::Standardized(torch::Tensor x) const {
  // The lone model's own standardization (one pass on the CPU, its two element-wise operations elsewhere).
  if (standardize_) x = Standardize(x, standardize_->mean, standardize_->std);
  return x;
}

torch::Tensor ArrayMlp::Layers(torch::Tensor x) {
  for (std::size_t l = 0; l < weights_.size(); ++l) {
    x = ArrayLinear(x, weights_[l], biases_[l]);
    if (l + 1 < weights_.size()) x = MemberDropout(torch::relu(x), dropout_);
  }
  return x;
}

}  // namespace dltune
