#include "optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>  // fmt::join, there since fmt 11 (LibTorch 2.x brings its own fmt)
#include <torch/torch.h>

#include "device.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

// Throws unless 0 <= value < 1 (NaN fails too).
void CheckUnitInterval(const char* name, double value) {
  if (!(value >= 0.0 && value < 1.0)) throw Error(fmt::format("optimizer: {} must be in [0, 1), not {}", name, value));
}

// Throws unless value is finite and >= 0.
void CheckNonNegative(const char* name, double value) {
  if (!(std::isfinite(value) && value >= 0.0)) {
    throw Error(fmt::format("optimizer: {} must be finite and >= 0, not {}", name, value));
  }
}

std::string KindList() { return fmt::format("{}", fmt::join(OptimizerKinds(), ", ")); }

// Reads an int IValue written by Save; throws Error naming the key when absent or of another type.
std::int64_t ReadInt(torch::serialize::InputArchive& archive, const std::string& key, const std::string& where) {
  c10::IValue value;
  if (!archive.try_read(key, value) || !value.isInt()) {
    throw Error(fmt::format("optimizer checkpoint: {}{} is missing or not an integer", where, key));
  }
  return value.toInt();
}

}  // namespace

void SetCoefficientColumn(const UpdateCoefficients& c, double t, bool active, torch::Tensor& table,
                          std::int64_t column) {
  using namespace coefficient;  // NOLINT(google-build-using-namespace): the rows' names
  auto rows = table.accessor<double, 2>();
  if (!active) {
    // What leaves a parameter and its state as they are, given a zero gradient: no step, every average keeping all
    // of its old value, a denominator of at least 1.
    for (std::int64_t row = 0; row < kRows; ++row) rows[row][column] = 0.0;
    for (const Row row : {kDecay, kGamma, kRho, kBeta1, kBeta2, kEpsilon}) rows[row][column] = 1.0;
    return;
  }
  const double bias = std::sqrt(1.0 - std::pow(c.beta2, t)) / (1.0 - std::pow(c.beta1, t));
  const bool nadam = c.rule == UpdateRule::kNadam;
  const auto set = [&](Row row, double value) { rows[row][column] = value; };
  set(kEta, c.eta);
  set(kEtaGamma, c.eta * c.momentum);
  set(kCoupledWd, c.coupled ? c.weight_decay : 0.0);
  set(kDecay, c.decay_in_place ? c.decay_factor : 1.0);
  set(kGamma, c.momentum);
  set(kRho, c.rho);
  set(kOneMinusRho, 1.0 - c.rho);
  set(kBeta1, c.beta1);
  set(kOneMinusBeta1, 1.0 - c.beta1);
  set(kBeta2, c.beta2);
  set(kOneMinusBeta2, 1.0 - c.beta2);
  set(kEpsilon, c.epsilon);
  set(kStepSize, -c.eta * bias * (nadam ? c.beta1 : 1.0));
  set(kGradientStep, -c.eta * bias * (1.0 - c.beta1));
  set(kMask, 1.0);
}

void UpdateWithTensorOps(UpdateRule rule, bool coupled, bool decays, const torch::Tensor& coefficients,
                         torch::Tensor& p, const torch::Tensor& g, std::vector<torch::Tensor>& buffers) {
  using namespace coefficient;  // NOLINT(google-build-using-namespace): the rows' names
  const auto at = [&](Row row) { return coefficients[row]; };
  // The gradient the rule sees: grad + wd * theta_t under coupled decay (taken before theta changes).
  const torch::Tensor gradient = coupled ? torch::addcmul(g, p, at(kCoupledWd)) : g;
  const auto decay_in_place = [&] {
    if (decays) p.mul_(at(kDecay));
  };
  switch (rule) {
    case UpdateRule::kSgd:
      decay_in_place();
      p.addcmul_(g, at(kEta), -1);
      break;
    case UpdateRule::kMomentum:
    case UpdateRule::kNesterov: {
      torch::Tensor& v = buffers[0];
      v.mul_(at(kGamma)).add_(g);                  // v = g + gamma * v
      if (coupled) v.addcmul_(p, at(kCoupledWd));  // ... + wd * theta_t
      decay_in_place();
      if (rule == UpdateRule::kNesterov) {
        p.addcmul_(g, at(kEta), -1).addcmul_(v, at(kEtaGamma), -1);
      } else {
        p.addcmul_(v, at(kEta), -1);
      }
      break;
    }
    case UpdateRule::kRmsProp: {
      torch::Tensor& v = buffers[0];
      torch::Tensor& m = buffers[1];
      v.mul_(at(kRho)).addcmul_(gradient, gradient * at(kOneMinusRho));
      m.mul_(at(kGamma)).addcmul_(gradient / (v + at(kEpsilon)).sqrt(), at(kEta));
      decay_in_place();
      p.addcmul_(m, at(kMask), -1);  // theta - m (where masked: theta)
      break;
    }
    case UpdateRule::kAdam:
    case UpdateRule::kNadam: {
      torch::Tensor& m = buffers[0];
      torch::Tensor& v = buffers[1];
      m.lerp_(gradient, at(kOneMinusBeta1));
      v.mul_(at(kBeta2)).addcmul_(gradient, gradient * at(kOneMinusBeta2));
      const torch::Tensor denominator = v.sqrt().add_(at(kEpsilon));
      decay_in_place();
      p.addcmul_(m / denominator, at(kStepSize));
      if (rule == UpdateRule::kNadam) p.addcmul_(gradient / denominator, at(kGradientStep));
      break;
    }
  }
}

const std::vector<std::string>& OptimizerKinds() {
  static const std::vector<std::string> kKinds = {"sgd", "momentum", "nesterov", "rmsprop", "adam", "nadam"};
  return kKinds;
}

void OptimizerOptions::Validate() const {
  const auto& kinds = OptimizerKinds();
  if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) {
    throw Error(fmt::format("optimizer: unknown kind '{}'; kinds: {}", kind, KindList()));
  }
  CheckUnitInterval("momentum", momentum);
  CheckUnitInterval("rho", rho);
  CheckUnitInterval("beta1", beta1);
  CheckUnitInterval("beta2", beta2);
  CheckNonNegative("epsilon", epsilon);
  CheckNonNegative("weight_decay", weight_decay);
}

Optimizer::Optimizer(std::vector<torch::Tensor> params, OptimizerOptions options, bool flat)
    : options_(std::move(options)), kind_(UpdateRule::kSgd), params_(std::move(params)) {
  options_.Validate();
  kind_ = RuleOfKind(options_.kind);
  // As CoefficientsOf decides them, for any learning rate but 0 (where decaying by 1 - 0 * wd changes nothing).
  const UpdateCoefficients c = CoefficientsOf(kind_, options_, 1.0);
  coupled_ = c.coupled;
  decays_ = c.decay_in_place;

  torch::NoGradGuard no_grad;
  on_cpu_ = params_.empty() || params_.front().device().is_cpu();
  states_.resize(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& p = params_[i];
    if (!p.defined()) throw Error(fmt::format("optimizer: parameter {} is undefined", i));
    const auto dtype = p.scalar_type();
    if (dtype != torch::kFloat && dtype != torch::kDouble) {
      throw Error(fmt::format("optimizer: parameter {} has dtype {}, not float32 or float64", i,
                              std::string(c10::toString(dtype))));
    }
    if (!p.is_contiguous()) {
      throw Error(fmt::format("optimizer: parameter {} is not a contiguous {} tensor", i,
                              c10::DeviceTypeName(p.device().type())));
    }
    if (p.device() != params_.front().device()) {
      throw Error(fmt::format("optimizer: parameter {} is on {}, and parameter 0 on {}", i, p.device().str(),
                              params_.front().device().str()));
    }
  }
  const bool one_dtype = std::all_of(params_.begin(), params_.end(), [&](const torch::Tensor& p) {
    return p.scalar_type() == params_.front().scalar_type();
  });
  if ((flat || !on_cpu_) && one_dtype && !params_.empty()) Flatten();
  const auto& names = BufferNames();
  for (const std::string& name : names) {
    // RMSProp's v starts at 1 (the playbook's v_0 = 1); every other buffer at 0.
    const bool starts_at_one = kind_ == UpdateRule::kRmsProp && name == "v";
    const auto initial = [&](const torch::Tensor& like) {
      return starts_at_one ? torch::ones_like(like) : torch::zeros_like(like);
    };
    if (flat_.defined()) flat_buffers_.push_back(initial(flat_));
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const torch::Tensor& p = params_[i];
      states_[i].buffers.push_back(
          flat_.defined() ? flat_buffers_.back().narrow(0, offsets_[i], p.numel()).view(p.sizes()) : initial(p));
    }
  }
}

void Optimizer::Flatten() {
  torch::NoGradGuard no_grad;
  offsets_.clear();
  std::int64_t size = 0;
  for (const torch::Tensor& p : params_) {
    offsets_.push_back(size);
    size += p.numel();
  }
  torch::Tensor flat = torch::empty({size}, params_.front().options());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    const torch::Tensor view = flat.narrow(0, offsets_[i], p.numel()).view(p.sizes());
    view.copy_(p);
    p.set_data(view);  // the same tensor (the model's), its data now that view
  }
  flat_ = std::move(flat);
}

bool Optimizer::Flat() const {
  const auto* base = static_cast<const char*>(flat_.data_ptr());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const torch::Tensor& p = params_[i];
    const auto* expected = base + offsets_[i] * flat_.element_size();
    if (p.data_ptr() != expected || !p.is_contiguous() || p.scalar_type() != flat_.scalar_type()) return false;
  }
  return true;
}

UpdateRule RuleOfKind(const std::string& kind) {
  if (kind == "momentum") return UpdateRule::kMomentum;
  if (kind == "nesterov") return UpdateRule::kNesterov;
  if (kind == "rmsprop") return UpdateRule::kRmsProp;
  if (kind == "adam") return UpdateRule::kAdam;
  if (kind == "nadam") return UpdateRule::kNadam;
  return UpdateRule::kSgd;
}

const std::vector<std::string>& StateBufferNames(UpdateRule rule) {
  static const std::vector<std::string> kNone;
  static const std::vector<std::string> kVelocity = {"v"};
  static const std::vector<std::string> kRmsProp = {"v", "m"};
  static const std::vector<std::string> kAdam = {"m", "v"};
  switch (rule) {
    case UpdateRule::kSgd: return kNone;
    case UpdateRule::kMomentum:
    case UpdateRule::kNesterov: return kVelocity;
    case UpdateRule::kRmsProp: return kRmsProp;
    case UpdateRule::kAdam:
    case UpdateRule::kNadam: return kAdam;
  }
  return kNone;
}

void OptimizerState::Save(torch::serialize::OutputArchive& archive) const {
  const std::vector<std::string>& names = StateBufferNames(RuleOfKind(kind));
  archive.write("kind", c10::IValue(kind));
  archive.write("steps", c10::IValue(steps));
  archive.write("param_count", c10::IValue(static_cast<std::int64_t>(buffers.size())));
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    torch::serialize::OutputArchive param_archive;
    param_archive.write("steps", c10::IValue(param_steps.at(i)));
    for (std::size_t b = 0; b < names.size(); ++b) param_archive.write(names[b], buffers[i].at(b), /*is_buffer=*/true);
    archive.write(fmt::format("param_{}", i), param_archive);
  }
}

void Optimizer::ZeroGrad() {
  for (torch::Tensor& p : params_) {
    if (p.grad().defined()) p.mutable_grad().reset();
  }
}

void Optimizer::CheckStep(double learning_rate) const {
  if (!(std::isfinite(learning_rate) && learning_rate >= 0.0)) {
    throw Error(fmt::format("optimizer: the learning rate must be finite and >= 0, not {}", learning_rate));
  }
  for (std::size_t i = 0; i < params_.size(); ++i) {  // before any update, so a refused step changes nothing
    const torch::Tensor& grad = params_[i].grad();
    if (grad.defined() && grad.is_sparse()) {
      throw Error(fmt::format("optimizer: parameter {} has a sparse gradient (unsupported)", i));
    }
  }
}

UpdateCoefficients CoefficientsOf(UpdateRule rule, const OptimizerOptions& options, double eta) {
  UpdateCoefficients c;
  c.rule = rule;
  c.eta = eta;
  c.weight_decay = options.weight_decay;
  c.coupled = c.weight_decay != 0.0 && !options.decoupled_weight_decay;
  // theta_t * (1 - eta * wd) is "- eta * wd * theta_t" done in place. For sgd, coupled decay is the same thing, and
  // Nesterov's "+ g" term carries coupled decay too (momentum's is inside v).
  c.decay_factor = 1.0 - c.eta * c.weight_decay;
  c.decay_in_place = c.weight_decay != 0.0 && c.eta != 0.0 &&
                     (!c.coupled || rule == UpdateRule::kSgd || rule == UpdateRule::kNesterov);
  c.coupled = c.coupled && rule != UpdateRule::kSgd;
  c.momentum = options.momentum;
  c.rho = options.rho;
  c.beta1 = options.beta1;
  c.beta2 = options.beta2;
  c.epsilon = options.epsilon;
  return c;
}

UpdateCoefficients Optimizer::Coefficients(double learning_rate) const {
  return CoefficientsOf(kind_, options_, learning_rate);
}

double Optimizer::Step(double learning_rate) {
  if (!on_cpu_) return StepDeferred(learning_rate).item<double>();
  CheckStep(learning_rate);
  return StepOnCpu(Coefficients(learning_rate));
}

torch::Tensor Optimizer::StepDeferred(double learning_rate) {
  if (!on_cpu_) return ApplyTable(ToDevice(CoefficientTable(learning_rate), params_.front().device()));
  CheckStep(learning_rate);
  return torch::scalar_tensor(StepOnCpu(Coefficients(learning_rate)), torch::kDouble);
}

double Optimizer::StepOnCpu(UpdateCoefficients c) {
  torch::NoGradGuard no_grad;
  double squares = 0;  // of the gradients, parameter by parameter
  for (std::size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    const torch::Tensor grad = p.grad().to(p.scalar_type()).contiguous();  // no copy in the usual case
    ParamState& state = states_[i];
    const auto t = static_cast<double>(++state.steps);
    c.bias = std::sqrt(1.0 - std::pow(c.beta2, t)) / (1.0 - std::pow(c.beta1, t));
    // Slices of at least 32 Ki elements per thread: below that, starting a thread costs more than the work.
    constexpr std::int64_t kGrain = 32768;
    AT_DISPATCH_FLOATING_TYPES(p.scalar_type(), "dltune_optimizer_step", [&] {
      auto* param = p.data_ptr<scalar_t>();
      const auto* gradient = grad.data_ptr<scalar_t>();
      auto* first = state.buffers.empty() ? nullptr : state.buffers[0].data_ptr<scalar_t>();
      auto* second = state.buffers.size() < 2 ? nullptr : state.buffers[1].data_ptr<scalar_t>();
      // The slices' sums are combined in thread order, so the norm is the same on every run with these threads.
      squares += at::parallel_reduce(
          0, p.numel(), kGrain, 0.0,
          [&](std::int64_t begin, std::int64_t end, double) {
            return OnePassUpdate(c,
                                 UpdateSlice<scalar_t>{param + begin, gradient + begin, first ? first + begin : nullptr,
                                                       second ? second + begin : nullptr, end - begin});
          },
          std::plus<double>());
    });
  }
  ++steps_;
  return std::sqrt(squares);
}

torch::Tensor Optimizer::CoefficientTable(double learning_rate, bool advance) {
  CheckStep(learning_rate);
  const UpdateCoefficients c = Coefficients(learning_rate);
  torch::Tensor table = torch::zeros({coefficient::kRows, static_cast<std::int64_t>(params_.size())}, torch::kDouble);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const bool updated = !advance || params_[i].grad().defined();
    const auto t = static_cast<double>(states_[i].steps + 1);
    SetCoefficientColumn(c, t, updated, table, static_cast<std::int64_t>(i));
    if (advance && updated) ++states_[i].steps;
  }
  if (advance) ++steps_;
  return table;
}

torch::Tensor Optimizer::ApplyTable(const torch::Tensor& table) {
  torch::NoGradGuard no_grad;
  const torch::Device device = params_.front().device();
  if (flat_.defined() && !Flat()) Flatten();  // a parameter's storage was replaced (Module::load)
  // In the flat layout, when every parameter has a gradient and as many updates (so that their columns are alike):
  // every parameter at once, with column 0.
  bool at_once = flat_.defined();
  for (std::size_t i = 0; at_once && i < params_.size(); ++i) {
    at_once = params_[i].grad().defined() && states_[i].steps == states_.front().steps;
  }
  if (at_once) {
    std::vector<torch::Tensor> gradients;
    for (const torch::Tensor& p : params_) gradients.push_back(p.grad().to(flat_.scalar_type()).reshape({-1}));
    const torch::Tensor g = torch::cat(gradients);
    UpdateWithTensorOps(kind_, coupled_, decays_, table.to(flat_.scalar_type()).select(1, 0), flat_, g, flat_buffers_);
    return at::linalg_vector_norm(g, 2, c10::nullopt, false, torch::kDouble);
  }
  std::map<torch::ScalarType, torch::Tensor> tables;  // the table in each parameter type, cast once
  std::vector<torch::Tensor> gradients;               // flattened: their norm is one reduction, in double
  for (std::size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i];
    if (!p.grad().defined()) continue;
    torch::Tensor& typed = tables[p.scalar_type()];
    if (!typed.defined()) typed = table.to(p.scalar_type());
    const torch::Tensor grad = p.grad().to(p.scalar_type()).contiguous();
    gradients.push_back(grad.flatten());
    UpdateWithTensorOps(kind_, coupled_, decays_, typed.select(1, static_cast<std::int64_t>(i)), p, grad,
                        states_[i].buffers);
  }
  if (gradients.empty()) return torch::zeros({}, torch::TensorOptions(device).dtype(torch::kDouble));
  return at::linalg_vector_norm(torch::cat(gradients), 2, c10::nullopt, false, torch::kDouble);
}

void Optimizer::Save(torch::serialize::OutputArchive& archive) const {
  OptimizerState state{.kind = options_.kind, .steps = steps_};
  for (const ParamState& param : states_) {
    state.param_steps.push_back(param.steps);
    std::vector<torch::Tensor> copies;  // copies: the archive may be serialized later while training continues
    for (const torch::Tensor& buffer : param.buffers) copies.push_back(buffer.detach().clone());
    state.buffers.push_back(std::move(copies));
  }
  state.Save(archive);
}

void Optimizer::Load(torch::serialize::InputArchive& archive) {
  c10::IValue kind;
  if (!archive.try_read("kind", kind) || !kind.isString()) {
    throw Error("optimizer checkpoint: kind is missing (not an optimizer state?)");
  }
  if (kind.toStringRef() != options_.kind) {
    throw Error(fmt::format("optimizer checkpoint holds {} state, but this optimizer is {}", kind.toStringRef(),
                            options_.kind));
  }
  const std::int64_t steps = ReadInt(archive, "steps", "");
  const std::int64_t param_count = ReadInt(archive, "param_count", "");
  if (param_count != static_cast<std::int64_t>(params_.size())) {
    throw Error(fmt::format("optimizer checkpoint holds state for {} parameters, but this optimizer has {}",
                            param_count, params_.size()));
  }

  // Read and check everything before changing anything.
  const auto& names = BufferNames();
  std::vector<ParamState> loaded(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const std::string where = fmt::format("param_{}", i);
    torch::serialize::InputArchive param_archive;
    if (!archive.try_read(where, param_archive)) throw Error(fmt::format("optimizer checkpoint: {} is missing", where));
    loaded[i].steps = ReadInt(param_archive, "steps", where + ".");
    for (std::size_t b = 0; b < names.size(); ++b) {
      torch::Tensor buffer;
      if (!param_archive.try_read(names[b], buffer, /*is_buffer=*/true)) {
        throw Error(fmt::format("optimizer checkpoint: {}.{} is missing", where, names[b]));
      }
      const torch::Tensor& expected = states_[i].buffers[b];
      if (buffer.sizes() != expected.sizes()) {
        throw Error(fmt::format("optimizer checkpoint: {}.{} has shape [{}], but the parameter has shape [{}]", where,
                                names[b], fmt::join(buffer.sizes(), ", "), fmt::join(expected.sizes(), ", ")));
      }
      loaded[i].buffers.push_back(std::move(buffer));
    }
  }

  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    for (std::size_t b = 0; b < names.size(); ++b) states_[i].buffers[b].copy_(loaded[i].buffers[b]);
    states_[i].steps = loaded[i].steps;
  }
  steps_ = steps;
}

}  // namespace dltune
