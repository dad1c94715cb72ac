#include "train/fashion_mnist.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "dltune/core/error.h"
#include "idx.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

// Decoded once for the whole suite (the real files from dataset-fashion-mnist).
class FashionMnistTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto start = std::chrono::steady_clock::now();
    splits_ = new FashionMnistSplits(LoadFashionMnist());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("[ measured ] LoadFashionMnist: %.3f s\n", seconds);
  }
  static void TearDownTestSuite() {
    delete splits_;
    splits_ = nullptr;
  }
  static const FashionMnistSplits& Splits() { return *splits_; }

  static FashionMnistSplits* splits_;
};
FashionMnistSplits* FashionMnistTest::splits_ = nullptr;

TEST_F(FashionMnistTest, SplitSizesShapesAndTypes) {
  const FashionMnistSplits& s = Splits();
  EXPECT_EQ(s.train.inputs.sizes(), (std::vector<std::int64_t>{50000, 1, 28, 28}));
  EXPECT_EQ(s.valid.inputs.sizes(), (std::vector<std::int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(s.test.inputs.sizes(), (std::vector<std::int64_t>{10000, 1, 28, 28}));
  for (const Dataset* split : {&s.train, &s.valid, &s.test}) {
    EXPECT_EQ(split->inputs.dtype(), torch::kFloat32);
    EXPECT_EQ(split->labels.dtype(), torch::kInt64);
    EXPECT_EQ(split->labels.size(0), split->inputs.size(0));
    EXPECT_TRUE(split->inputs.is_contiguous());
  }
}

TEST_F(FashionMnistTest, LabelsAreTheTenClassesAndPixelsAreInUnitRange) {
  for (const Dataset* split : {&Splits().train, &Splits().valid, &Splits().test}) {
    EXPECT_EQ(split->labels.min().item<std::int64_t>(), 0);
    EXPECT_EQ(split->labels.max().item<std::int64_t>(), 9);
    EXPECT_EQ(split->inputs.min().item<float>(), 0.0f);
    EXPECT_EQ(split->inputs.max().item<float>(), 1.0f);
  }
  // Pixel values are exactly k / 255.
  const torch::Tensor scaled = Splits().test.inputs * 255;
  EXPECT_LT((scaled - scaled.round()).abs().max().item<float>(), 1e-4f);
}

TEST_F(FashionMnistTest, KnownFacts) {
  // The official files are balanced: 1,000 test and 6,000 training images per class.
  EXPECT_TRUE(torch::bincount(Splits().test.labels).eq(1000).all().item<bool>());
  const torch::Tensor all_train = torch::cat({Splits().train.labels, Splits().valid.labels});
  EXPECT_TRUE(torch::bincount(all_train).eq(6000).all().item<bool>());
  // The first labels of each file, as published (train: ankle boot, T-shirt, T-shirt, dress, T-shirt, pullover...).
  EXPECT_TRUE(Splits().train.labels.slice(0, 0, 6).equal(torch::tensor({9, 0, 0, 3, 0, 2}, torch::kInt64)));
  EXPECT_TRUE(Splits().test.labels.slice(0, 0, 6).equal(torch::tensor({9, 2, 1, 1, 6, 1}, torch::kInt64)));
  // The pixel statistics the models standardize with (training images).
  const torch::Tensor train_pixels = Splits().train.inputs.to(torch::kDouble);
  EXPECT_NEAR(train_pixels.mean().item<double>(), 0.2860, 1e-3);
  EXPECT_NEAR(train_pixels.std().item<double>(), 0.3530, 1e-3);
  EXPECT_STREQ(kFashionMnistClasses[9], "Ankle boot");
}

TEST_F(FashionMnistTest, ValidIsTheLastTenThousandOfTheTrainingFile) {
  const torch::Tensor images = ReadIdxImages(std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz");
  const torch::Tensor labels = ReadIdxLabels(std::string(kFashionMnistDir) + "/train-labels-idx1-ubyte.gz");
  const torch::Tensor last = images.slice(0, 50000).to(torch::kFloat32).div(255.0).unsqueeze(1);
  EXPECT_TRUE(Splits().valid.inputs.equal(last));
  EXPECT_TRUE(Splits().valid.labels.equal(labels.slice(0, 50000).to(torch::kInt64)));
  const torch::Tensor first = images.slice(0, 0, 50000).to(torch::kFloat32).div(255.0).unsqueeze(1);
  EXPECT_TRUE(Splits().train.inputs.equal(first));
}

TEST_F(FashionMnistTest, FlattenGivesRowsOf784) {
  const FashionMnistSplits flat = LoadFashionMnist(kFashionMnistDir, /*flatten=*/true);
  EXPECT_EQ(flat.train.inputs.sizes(), (std::vector<std::int64_t>{50000, 784}));
  EXPECT_EQ(flat.test.inputs.sizes(), (std::vector<std::int64_t>{10000, 784}));
  EXPECT_TRUE(flat.valid.inputs.equal(Splits().valid.inputs.flatten(1)));
}

TEST(FashionMnist, MissingFilesSayHowToInstallThem) {
  const std::string dir = (std::filesystem::temp_directory_path() / "dltune_no_fashion_mnist_here").string();
  try {
    LoadFashionMnist(dir);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), dir +
                                             "/train-images-idx3-ubyte.gz: Fashion-MNIST not found; install it "
                                             "with: apt-get install dataset-fashion-mnist");
  }
}

}  // namespace
}  // namespace dltune
