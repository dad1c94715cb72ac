// ArrayOptimizer against lone Optimizers on each member's slices (the same bits), and its tensor form against its
// fused loop (float rounding), with a member masked out half way: members of one kind, and of kinds mixed.
#include "array_optimizer.h"

#include <sstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "dltune/core/error.h"
#include "kernel_count_test_util.h"
#include "optimizer_kinds_test_util.h"

namespace dltune {
namespace {

constexpr std::int64_t kMembers = 3;
constexpr int kSteps = 20;
constexpr int kMaskedFrom = 10;  // member 1 is masked from this step on

// Each member's options: its kind (`kinds`: one for all, or one per member, comma-separated), its own learning rate,
// momentum, betas, epsilon and weight decay.
std::vector<OptimizerOptions> MemberOptions(const std::string& kinds) {
  std::vector<OptimizerOptions> members(kMembers);
  for (std::int64_t m = 0; m < kMembers; ++m) {
    OptimizerOptions& o = members[static_cast<std::size_t>(m)];
    o.kind = MemberKind(kinds, static_cast<std::size_t>(m));
    o.momentum = 0.5 + 0.2 * static_cast<double>(m);
    o.rho = 0.8 + 0.05 * static_cast<double>(m);
    o.beta1 = 0.7 + 0.1 * static_cast<double>(m);
    o.beta2 = 0.99 + 0.004 * static_cast<double>(m);
    o.epsilon = m == 2 ? 1e-3 : 1e-8;
    o.weight_decay = m == 0 ? 0.0 : 0.01;
    o.decoupled_weight_decay = m == 2;
  }
  return members;
}

std::vector<torch::Tensor> ArrayParams() {
  torch::manual_seed(7);
  return {torch::randn({kMembers, 5, 7}), torch::randn({kMembers, 7})};
}

// The gradient of step `step` for parameter `p` (the same on every side).
torch::Tensor Gradient(const torch::Tensor& p, int step, std::size_t index) {
  torch::manual_seed(static_cast<std::uint64_t>(100 * step) + index);
  return torch::randn(p.sizes());
}

double LearningRate(std::int64_t member, int step) { return 0.01 * static_cast<double>(member + 1) / (1 + step); }

// Runs kSteps of `optimizer` on `params`; returns each step's gradient norms.
std::vector<std::vector<double>> Train(ArrayOptimizer& optimizer, std::vector<torch::Tensor>& params) {
  std::vector<std::vector<double>> norms;
  for (int step = 0; step < kSteps; ++step) {
    for (std::size_t i = 0; i < params.size(); ++i) params[i].mutable_grad() = Gradient(params[i], step, i);
    std::vector<double> rates;
    std::vector<bool> active;
    for (std::int64_t m = 0; m < kMembers; ++m) {
      rates.push_back(LearningRate(m, step));
      active.push_back(!(m == 1 && step >= kMaskedFrom));
    }
    norms.push_back(optimizer.Step(rates, active));
  }
  return norms;
}

// Member m's state as CopyMember saves it, ready to be read.
torch::serialize::InputArchive Saved(const ArrayOptimizer& optimizer, std::int64_t m) {
  torch::serialize::OutputArchive saved;
  optimizer.CopyMember(m).Save(saved);
  std::ostringstream bytes;
  saved.save_to(bytes);
  std::istringstream in(bytes.str());
  torch::serialize::InputArchive loaded;
  loaded.load_from(in);
  return loaded;
}

// A lone optimizer of member m's kind and shapes that loaded member m's saved state.
Optimizer LoneOptimizer(const ArrayOptimizer& optimizer, std::int64_t m, const std::string& kinds) {
  std::vector<torch::Tensor> shapes;
  for (const torch::Tensor& p : optimizer.params()) shapes.push_back(torch::zeros_like(p[m]));
  Optimizer lone(shapes, MemberOptions(kinds)[static_cast<std::size_t>(m)]);
  torch::serialize::InputArchive archive = Saved(optimizer, m);
  lone.Load(archive);
  return lone;
}

class ArrayOptimizerTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ArrayOptimizerTest, EachMemberIsItsLoneOptimizerBitForBit) {
  std::vector<torch::Tensor> params = ArrayParams();
  ArrayOptimizer array(params, MemberOptions(GetParam()));
  const auto norms = Train(array, params);

  const std::vector<torch::Tensor> initial = ArrayParams();
  for (std::int64_t m = 0; m < kMembers; ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    std::vector<torch::Tensor> lone_params;
    for (const auto& p : initial) lone_params.push_back(p[m].clone());
    Optimizer lone(lone_params, MemberOptions(GetParam())[static_cast<std::size_t>(m)]);
    const int steps = m == 1 ? kMaskedFrom : kSteps;
    for (int step = 0; step < steps; ++step) {
      for (std::size_t i = 0; i < lone_params.size(); ++i) {
        lone_params[i].mutable_grad() = Gradient(initial[i], step, i)[m].clone();
      }
      EXPECT_EQ(lone.Step(LearningRate(m, step)), norms[static_cast<std::size_t>(step)][static_cast<std::size_t>(m)]);
    }
    for (std::size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i][m], lone_params[i]));
    EXPECT_EQ(array.steps(m), steps);

    // Its state, saved as a lone optimizer's, is the lone optimizer's.
    torch::serialize::InputArchive loaded = Saved(array, m);
    Optimizer restored(lone_params, MemberOptions(GetParam())[static_cast<std::size_t>(m)]);
    EXPECT_NO_THROW(restored.Load(loaded));
    EXPECT_EQ(restored.steps(), lone.steps());
  }
}

TEST_P(ArrayOptimizerTest, TensorFormAgreesWithTheFusedLoop) {
  std::vector<torch::Tensor> fused_params = ArrayParams();
  ArrayOptimizer fused(fused_params, MemberOptions(GetParam()));
  const auto fused_norms = Train(fused, fused_params);
  std::vector<torch::Tensor> tensor_params = ArrayParams();
  ArrayOptimizer tensor(tensor_params, MemberOptions(GetParam()), ArrayOptimizer::Form::kTensor);
  const auto tensor_norms = Train(tensor, tensor_params);
  for (std::size_t i = 0; i < fused_params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(tensor_params[i], fused_params[i], 1e-5, 1e-6))
        << (tensor_params[i] - fused_params[i]).abs().max().item<double>();
  }
  for (std::size_t s = 0; s < fused_norms.size(); ++s) {
    for (std::size_t m = 0; m < fused_norms[s].size(); ++m) {
      EXPECT_NEAR(tensor_norms[s][m], fused_norms[s][m], 1e-9 * fused_norms[s][m]);
    }
  }
  // The masked member stopped at step kMaskedFrom in both forms.
  EXPECT_EQ(fused.steps(1), kMaskedFrom);
  EXPECT_EQ(tensor.steps(1), kMaskedFrom);
  // Each member's state, from the tensor form's own layout, saves as the fused loop's does and loads back.
  ArrayOptimizer reloaded(ArrayParams(), MemberOptions(GetParam()), ArrayOptimizer::Form::kTensor);
  for (std::int64_t m = 0; m < kMembers; ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    const Optimizer from_tensor = LoneOptimizer(tensor, m, GetParam());
    const Optimizer from_fused = LoneOptimizer(fused, m, GetParam());
    torch::serialize::InputArchive archive = Saved(tensor, m);
    reloaded.LoadMember(m, archive);
    const Optimizer from_reloaded = LoneOptimizer(reloaded, m, GetParam());
    EXPECT_EQ(from_tensor.steps(), from_fused.steps());
    for (std::size_t i = 0; i < fused_params.size(); ++i) {
      for (std::size_t b = 0; b < from_fused.Buffers(i).size(); ++b) {
        EXPECT_TRUE(torch::allclose(from_tensor.Buffers(i)[b], from_fused.Buffers(i)[b], 1e-5, 1e-6));
        EXPECT_TRUE(torch::equal(from_reloaded.Buffers(i)[b], from_tensor.Buffers(i)[b]));
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, ArrayOptimizerTest,
                         ::testing::Values("sgd", "momentum", "nesterov", "rmsprop", "adam", "nadam",
                                           // runs of kinds: two, and three (a kind split by another)
                                           "nesterov,adam,adam", "adam,rmsprop,adam", "sgd,nadam,momentum"),
                         KindsTestName);

TEST(ArrayOptimizer, RefusesWhatItCannotUpdate) {
  std::vector<OptimizerOptions> invalid = MemberOptions("adam");
  invalid[1].kind = "adamw";
  EXPECT_THROW(ArrayOptimizer(ArrayParams(), invalid), Error);
  EXPECT_THROW(ArrayOptimizer({torch::zeros({2, 3})}, MemberOptions("sgd")), Error);  // 2 members, not 3
  std::vector<torch::Tensor> params = ArrayParams();
  ArrayOptimizer optimizer(params, MemberOptions("sgd"));
  EXPECT_THROW(optimizer.Step({0.1, 0.1, 0.1}, {true, true, true}), Error);  // no gradients
  for (auto& p : params) p.mutable_grad() = torch::ones_like(p);
  EXPECT_THROW(optimizer.Step({0.1, -1.0, 0.1}, {true, true, true}), Error);
  EXPECT_THROW(optimizer.Step({0.1, 0.1}, {true, true}), Error);
}

// The operations of one tensor-form step that are not views or allocations: on a device, its kernels.
int KernelOperations(std::int64_t layers) {
  std::vector<torch::Tensor> params;
  for (std::int64_t l = 0; l < layers; ++l) {
    params.push_back(torch::randn({kMembers, 5, 7}));
    params.push_back(torch::randn({kMembers, 7}));
  }
  ArrayOptimizer optimizer(params, MemberOptions("nesterov,adam,adam"), ArrayOptimizer::Form::kTensor);
  for (torch::Tensor& p : params) p.mutable_grad() = torch::randn_like(p);
  const torch::Tensor table = optimizer.CoefficientTable({0.1, 0.1, 0.1}, {true, true, true});
  return CountKernelOperations([&] { optimizer.ApplyTable(table); });
}

// The tensor form updates all parameters at once: a model of three times the layers takes as many kernels a step.
TEST(ArrayOptimizer, TheTensorFormsStepTakesAsManyKernelsWhateverTheNumberOfParameters) {
  const int two = KernelOperations(1);
  EXPECT_GT(two, 0);
  EXPECT_EQ(KernelOperations(3), two);
}

}  // namespace
}  // namespace dltune
