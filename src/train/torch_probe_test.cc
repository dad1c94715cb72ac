#include <gtest/gtest.h>
#include <torch/torch.h>
TEST(TorchProbe, Works) { EXPECT_EQ(torch::ones({2}).sum().item<float>(), 2.0f); }
