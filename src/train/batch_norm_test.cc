#include "train/batch_norm.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

constexpr double kEps = 1e-5;

// Reference: one ghost batch normalized with its own biased statistics over every dimension but channels (dim 1).
torch::Tensor NormalizeByHand(const torch::Tensor& x) {
  std::vector<std::int64_t> dims = {0};
  for (std::int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  const torch::Tensor mean = x.mean(dims, /*keepdim=*/true);
  const torch::Tensor var = (x - mean).pow(2).mean(dims, /*keepdim=*/true);
  return (x - mean) / torch::sqrt(var + kEps);
}

// Per-channel scale/shift as [1, C] or [1, C, 1, 1].
torch::Tensor PerChannel(const torch::Tensor& v, std::int64_t rank) {
  std::vector<std::int64_t> shape(static_cast<std::size_t>(rank), 1);
  shape[1] = v.size(0);
  return v.view(shape);
}

GhostBatchNorm MakeLayer(std::int64_t channels, std::int64_t virtual_batch_size, double momentum = 0.9) {
  GhostBatchNorm layer(GhostBatchNormOptions{
      .num_features = channels, .virtual_batch_size = virtual_batch_size, .momentum = momentum, .epsilon = kEps});
  torch::NoGradGuard no_grad;
  layer->weight.copy_(torch::linspace(0.5, 2.0, channels));
  layer->bias.copy_(torch::linspace(-1.0, 1.0, channels));
  return layer;
}

// Examples whose distribution differs by ghost batch, so that per-ghost and whole-batch statistics differ clearly.
torch::Tensor Input(std::vector<std::int64_t> shape, std::int64_t virtual_batch_size) {
  torch::Tensor x = torch::randn(shape);
  const std::int64_t ghosts = shape[0] / virtual_batch_size;
  for (std::int64_t g = 0; g < ghosts; ++g) {
    x.slice(0, g * virtual_batch_size, (g + 1) * virtual_batch_size)
        .mul_(1.0 + static_cast<double>(g))
        .add_(3.0 * static_cast<double>(g));
  }
  return x;
}

class GhostBatchNormTest : public ::testing::Test {
 protected:
  void SetUp() override { torch::manual_seed(7); }
};

TEST_F(GhostBatchNormTest, TrainingNormalizesEachGhostBatchWithItsOwnStatistics) {
  for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{12, 3}, {6, 2, 3, 3}}) {
    const std::int64_t v = shape.size() == 2 ? 4 : 2;
    GhostBatchNorm layer = MakeLayer(shape[1], v);
    const torch::Tensor x = Input(shape, v).requires_grad_(true);
    const torch::Tensor y = layer->forward(x);

    const torch::Tensor x_ref = x.detach().clone().requires_grad_(true);
    std::vector<torch::Tensor> parts;
    for (std::int64_t g = 0; g < shape[0] / v; ++g)
      parts.push_back(NormalizeByHand(x_ref.slice(0, g * v, (g + 1) * v)));
    const auto rank = static_cast<std::int64_t>(shape.size());
    const torch::Tensor expected =
        torch::cat(parts) * PerChannel(layer->weight.detach(), rank) + PerChannel(layer->bias.detach(), rank);
    EXPECT_TRUE(torch::allclose(y, expected, 1e-4, 1e-5)) << "shape rank " << rank;
    // Normalizing the whole batch at once would give something else.
    const torch::Tensor whole =
        NormalizeByHand(x.detach()) * PerChannel(layer->weight.detach(), rank) + PerChannel(layer->bias.detach(), rank);
    EXPECT_FALSE(torch::allclose(y, whole, 1e-2, 1e-2));

    // Gradients flow through each ghost batch's statistics as in the reference.
    const torch::Tensor upstream = torch::randn(x.sizes());
    (y * upstream).sum().backward();
    (expected * upstream).sum().backward();
    EXPECT_TRUE(torch::allclose(x.grad(), x_ref.grad(), 1e-3, 1e-4)) << "shape rank " << rank;
  }
}

TEST_F(GhostBatchNormTest, RunningStatsUpdatedOncePerStepWithAveragedStatistics) {
  const std::int64_t v = 4;
  const double momentum = 0.9;
  GhostBatchNorm layer = MakeLayer(3, v, momentum);
  const torch::Tensor x = Input({12, 3}, v);
  layer->forward(x);

  torch::Tensor mean_sum = torch::zeros({3});
  torch::Tensor var_sum = torch::zeros({3});
  for (std::int64_t g = 0; g < 3; ++g) {
    const torch::Tensor ghost = x.slice(0, g * v, (g + 1) * v);
    mean_sum += ghost.mean(0);
    var_sum += ghost.var(0, /*unbiased=*/true);
  }
  const torch::Tensor expected_mean = momentum * torch::zeros({3}) + (1 - momentum) * mean_sum / 3;
  const torch::Tensor expected_var = momentum * torch::ones({3}) + (1 - momentum) * var_sum / 3;
  EXPECT_TRUE(torch::allclose(layer->running_mean, expected_mean, 1e-5, 1e-6));
  EXPECT_TRUE(torch::allclose(layer->running_var, expected_var, 1e-5, 1e-6));

  // Calling LibTorch's BatchNorm once per ghost batch advances the averages three times: a different result.
  torch::nn::BatchNorm1d sequential(torch::nn::BatchNorm1dOptions(3).momentum(1 - momentum).eps(kEps));
  for (std::int64_t g = 0; g < 3; ++g) sequential->forward(x.slice(0, g * v, (g + 1) * v));
  EXPECT_FALSE(torch::allclose(layer->running_mean, sequential->running_mean, 1e-3, 1e-3));
  EXPECT_FALSE(torch::allclose(layer->running_var, sequential->running_var, 1e-3, 1e-3));
}

TEST_F(GhostBatchNormTest, EvalUsesRunningStatistics) {
  GhostBatchNorm layer = MakeLayer(2, 4);
  {
    torch::NoGradGuard no_grad;
    layer->running_mean.copy_(torch::tensor({1.0f, -2.0f}));
    layer->running_var.copy_(torch::tensor({4.0f, 0.25f}));
  }
  layer->eval();
  const torch::Tensor x = torch::randn({5, 2, 3, 3});  // any batch size in eval
  const torch::Tensor y = layer->forward(x);
  const torch::Tensor expected = (x - PerChannel(torch::tensor({1.0f, -2.0f}), 4)) /
                                     torch::sqrt(PerChannel(torch::tensor({4.0f, 0.25f}), 4) + kEps) *
                                     PerChannel(layer->weight.detach(), 4) +
                                 PerChannel(layer->bias.detach(), 4);
  EXPECT_TRUE(torch::allclose(y, expected, 1e-5, 1e-6));
  EXPECT_TRUE(torch::equal(layer->running_mean, torch::tensor({1.0f, -2.0f})));  // eval does not update
  EXPECT_TRUE(torch::equal(layer->running_var, torch::tensor({4.0f, 0.25f})));
}

TEST_F(GhostBatchNormTest, MatchesTorchBatchNormWhenVirtualBatchIsWholeBatch) {
  const double momentum = 0.9;
  for (const std::int64_t virtual_batch_size : {std::int64_t{8}, std::int64_t{0}}) {
    for (const std::vector<std::int64_t>& shape : {std::vector<std::int64_t>{8, 3}, {8, 3, 4, 4}}) {
      GhostBatchNorm ghost = MakeLayer(3, virtual_batch_size, momentum);
      torch::nn::BatchNorm2d reference(torch::nn::BatchNorm2dOptions(3).momentum(1 - momentum).eps(kEps));
      {
        torch::NoGradGuard no_grad;
        reference->weight.copy_(ghost->weight);
        reference->bias.copy_(ghost->bias);
      }
      const auto rank = static_cast<std::int64_t>(shape.size());
      // BatchNorm2d wants 4-D input; BatchNorm1d's math on [N, C] is the same as BatchNorm2d's on [N, C, 1, 1].
      const auto run_reference = [&](const torch::Tensor& x) {
        return rank == 2 ? reference->forward(x.view({shape[0], 3, 1, 1})).view({shape[0], 3}) : reference->forward(x);
      };
      for (int step = 0; step < 3; ++step) {
        const torch::Tensor x = torch::randn(shape) * (step + 1) + step;
        const torch::Tensor x_ref = x.clone().requires_grad_(true);
        const torch::Tensor x_ghost = x.clone().requires_grad_(true);
        const torch::Tensor upstream = torch::randn(shape);
        const torch::Tensor y_ghost = ghost->forward(x_ghost);
        const torch::Tensor y_ref = run_reference(x_ref);
        EXPECT_TRUE(torch::allclose(y_ghost, y_ref, 1e-4, 1e-5));
        (y_ghost * upstream).sum().backward();
        (y_ref * upstream).sum().backward();
        EXPECT_TRUE(torch::allclose(x_ghost.grad(), x_ref.grad(), 1e-3, 1e-4));
        EXPECT_TRUE(torch::allclose(ghost->weight.grad(), reference->weight.grad(), 1e-3, 1e-4));
      }
      EXPECT_TRUE(torch::allclose(ghost->running_mean, reference->running_mean, 1e-5, 1e-6));
      EXPECT_TRUE(torch::allclose(ghost->running_var, reference->running_var, 1e-5, 1e-6));
      ghost->eval();
      reference->eval();
      const torch::Tensor x = torch::randn(shape);
      EXPECT_TRUE(torch::allclose(ghost->forward(x), run_reference(x), 1e-4, 1e-5));
    }
  }
}

TEST_F(GhostBatchNormTest, SaveAndLoadRoundTripBuffers) {
  GhostBatchNorm trained = MakeLayer(3, 2);
  trained->forward(Input({6, 3, 2, 2}, 2));
  const auto buffers = trained->named_buffers();
  ASSERT_TRUE(buffers.contains("running_mean"));
  ASSERT_TRUE(buffers.contains("running_var"));
  ASSERT_FALSE(torch::equal(trained->running_mean, torch::zeros({3})));

  std::stringstream stream;
  torch::save(trained, stream);
  GhostBatchNorm restored = MakeLayer(3, 2);
  torch::load(restored, stream);
  EXPECT_TRUE(torch::equal(restored->running_mean, trained->running_mean));
  EXPECT_TRUE(torch::equal(restored->running_var, trained->running_var));
  EXPECT_TRUE(torch::equal(restored->weight, trained->weight));

  // clone() (data-parallel replicas) copies them too, into separate storage.
  const auto copy = std::dynamic_pointer_cast<GhostBatchNormImpl>(trained->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(torch::equal(copy->running_var, trained->running_var));
  EXPECT_NE(copy->running_var.data_ptr(), trained->running_var.data_ptr());
}

TEST_F(GhostBatchNormTest, SynchronizeRunningStatsAveragesReplicas) {
  std::vector<GhostBatchNorm> replicas = {MakeLayer(2, 2), MakeLayer(2, 2)};
  {
    torch::NoGradGuard no_grad;
    replicas[0]->running_mean.copy_(torch::tensor({1.0f, 2.0f}));
    replicas[1]->running_mean.copy_(torch::tensor({3.0f, 6.0f}));
    replicas[0]->running_var.copy_(torch::tensor({1.0f, 1.0f}));
    replicas[1]->running_var.copy_(torch::tensor({3.0f, 2.0f}));
  }
  SynchronizeRunningStats(replicas);
  for (const GhostBatchNorm& replica : replicas) {
    EXPECT_TRUE(torch::allclose(replica->running_mean, torch::tensor({2.0f, 4.0f})));
    EXPECT_TRUE(torch::allclose(replica->running_var, torch::tensor({2.0f, 1.5f})));
  }
  EXPECT_THROW(SynchronizeRunningStats({}), Error);
  EXPECT_THROW(SynchronizeRunningStats({MakeLayer(2, 2), MakeLayer(3, 2)}), Error);
}

TEST_F(GhostBatchNormTest, BatchNotMultipleOfVirtualSizeIsAnError) {
  GhostBatchNorm layer = MakeLayer(3, 4);
  try {
    layer->forward(torch::randn({10, 3}));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("batch size 10 is not a multiple of virtual_batch_size 4"));
  }
  EXPECT_TRUE(torch::equal(layer->running_mean, torch::zeros({3})));  // nothing updated
  layer->eval();
  EXPECT_NO_THROW(layer->forward(torch::randn({10, 3})));
}

TEST_F(GhostBatchNormTest, BadInputsAndOptionsAreErrors) {
  GhostBatchNorm layer = MakeLayer(3, 2);
  EXPECT_THROW(layer->forward(torch::randn({4, 3, 2})), Error);
  EXPECT_THROW(layer->forward(torch::randn({4, 5})), Error);
  EXPECT_THROW(MakeLayer(3, 1)->forward(torch::randn({4, 3})), Error);  // one value per channel per ghost batch
  EXPECT_NO_THROW(MakeLayer(3, 1)->forward(torch::randn({4, 3, 2, 2})));
  EXPECT_THROW(GhostBatchNorm(GhostBatchNormOptions{.num_features = 0}), Error);
  EXPECT_THROW(GhostBatchNorm(GhostBatchNormOptions{.num_features = 3, .virtual_batch_size = -1}), Error);
  EXPECT_THROW(GhostBatchNorm(GhostBatchNormOptions{.num_features = 3, .momentum = 1.0}), Error);
  EXPECT_THROW(GhostBatchNorm(GhostBatchNormOptions{.num_features = 3, .epsilon = 0.0}), Error);
}

TEST_F(GhostBatchNormTest, WithoutAffineHasNoParameters) {
  GhostBatchNorm layer(GhostBatchNormOptions{.num_features = 2, .virtual_batch_size = 4, .affine = false});
  EXPECT_TRUE(layer->parameters().empty());
  const torch::Tensor x = torch::randn({4, 2});
  EXPECT_TRUE(torch::allclose(layer->forward(x), NormalizeByHand(x), 1e-4, 1e-5));
}

}  // namespace
}  // namespace dltune
