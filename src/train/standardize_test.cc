// Standardize: one pass, bit-identical to (x - mean) / std, on one thread or several, and the tensor operations
// themselves for what the pass does not take.
#include <gtest/gtest.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/torch.h>

#include "standardize.h"

namespace dltune {
namespace {

// Fashion-MNIST's pixel statistics, as the built-in models standardize with them (src/workloads/models.h).
constexpr double kFashionMnistMean = 0.2860;
constexpr double kFashionMnistStd = 0.3530;

TEST(Standardize, IsBitIdenticalToTheTwoTensorOperations) {
  torch::manual_seed(7);
  const int threads = torch::get_num_threads();
  for (const int use : {1, 2}) {
    torch::set_num_threads(use);
    // Sizes around the vector widths and the per-thread slice, and a batch of images; values beyond [0, 1] too.
    for (const std::int64_t size : {1, 7, 16, 17, 32768, 100003}) {
      const torch::Tensor x = torch::randn({size}) * 3;
      const torch::Tensor ours = Standardize(x, kFashionMnistMean, kFashionMnistStd);
      const torch::Tensor theirs = (x - kFashionMnistMean) / kFashionMnistStd;
      EXPECT_TRUE(torch::equal(ours, theirs)) << "size " << size << ", threads " << use;
    }
    const torch::Tensor images = torch::rand({128, 1, 28, 28});
    const torch::Tensor ours = Standardize(images, kFashionMnistMean, kFashionMnistStd);
    EXPECT_EQ(ours.sizes(), images.sizes());
    EXPECT_TRUE(torch::equal(ours, (images - kFashionMnistMean) / kFashionMnistStd));
  }
  torch::set_num_threads(threads);
}

TEST(Standardize, LeavesItsInputAndTakesOtherTensorsThroughTheOperations) {
  const torch::Tensor x = torch::rand({64, 784});
  const torch::Tensor before = x.clone();
  Standardize(x, 0.5, 0.25);
  EXPECT_TRUE(torch::equal(x, before));
  // A strided view, a double tensor and one that needs a gradient: the same values, and the gradient still flows.
  const torch::Tensor strided = x.t();
  EXPECT_TRUE(torch::equal(Standardize(strided, 0.5, 0.25), (strided - 0.5) / 0.25));
  const torch::Tensor doubles = x.to(torch::kDouble);
  EXPECT_TRUE(torch::equal(Standardize(doubles, 0.5, 0.25), (doubles - 0.5) / 0.25));
  const torch::Tensor leaf = x.clone().requires_grad_(true);
  Standardize(leaf, 0.5, 0.25).sum().backward();
  ASSERT_TRUE(leaf.grad().defined());
  EXPECT_TRUE(torch::allclose(leaf.grad(), torch::full_like(x, 4.0)));
}

// Traced (as a model is for its TorchScript export), Standardize is recorded as operations: the graph standardizes
// inputs it has never seen rather than replaying the traced example's result.
TEST(Standardize, IsRecordedWhenTraced) {
  const torch::Tensor example = torch::rand({4, 784});
  auto traced = torch::jit::tracer::trace(
      {example},
      [](torch::jit::Stack inputs) -> torch::jit::Stack {
        return {Standardize(inputs.at(0).toTensor(), kFashionMnistMean, kFashionMnistStd)};
      },
      [](const torch::autograd::Variable&) { return std::string(); }, /*strict=*/false, /*force_outplace=*/false);
  const torch::Tensor other = torch::rand({4, 784});
  torch::jit::Stack stack = {other};
  torch::jit::GraphExecutor(traced.first->graph, "standardize").run(stack);
  EXPECT_TRUE(torch::equal(stack.at(0).toTensor(), (other - kFashionMnistMean) / kFashionMnistStd));
}

}  // namespace
}  // namespace dltune
