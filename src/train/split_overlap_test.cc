#include <gtest/gtest.h>

#include "dltune/train/trainer.h"
#include "dltune/train/workload.h"
#include "train/split_overlap.h"

namespace dltune {
namespace {

// A workload whose splits are given: some rows copied from one split into another.
class FixedSplits final : public Workload {
 public:
  explicit FixedSplits(WorkloadData data) : data_(std::move(data)) {}
  std::string name() const override { return "fixed"; }
  std::int64_t num_classes() const override { return 3; }
  const WorkloadData& Data() override { return data_; }
  std::shared_ptr<Model> BuildModel(const HyperParams&) override { return nullptr; }

 private:
  WorkloadData data_;
};

Dataset Rows(const torch::Tensor& inputs, const torch::Tensor& labels) { return {inputs, labels}; }

TEST(SplitOverlap, CountsExamplesSharedBySplitsByTheirBytes) {
  torch::manual_seed(3);
  const torch::Tensor train = torch::rand({50, 2, 4});
  const torch::Tensor train_labels = torch::randint(0, 3, {50}, torch::kInt64);
  torch::Tensor valid = torch::rand({20, 2, 4});
  torch::Tensor test = torch::rand({10, 2, 4});
  valid[3] = train[7];  // the same input, the same label below
  test[0] = train[11];  // relabelled
  test[5] = valid[9];
  torch::Tensor valid_labels = torch::randint(0, 3, {20}, torch::kInt64);
  torch::Tensor test_labels = torch::randint(0, 3, {10}, torch::kInt64);
  valid_labels[3] = train_labels[7];
  test_labels[0] = (train_labels[11] + 1) % 3;
  test_labels[5] = valid_labels[9];
  // Nearly equal is not equal: one float differs in its last bit.
  test[6] = train[12].clone();
  test[6][0][0] = std::nextafter(test[6][0][0].item<float>(), 2.0f);

  FixedSplits workload({Rows(train, train_labels), Rows(valid, valid_labels), Rows(test, test_labels)});
  const SplitOverlap overlap = CheckSplitOverlap(workload);
  EXPECT_EQ(overlap.train, 50);
  EXPECT_EQ(overlap.valid, 20);
  EXPECT_EQ(overlap.test, 10);
  EXPECT_EQ(overlap.valid_in_train, 1);
  EXPECT_EQ(overlap.test_in_train, 1);
  EXPECT_EQ(overlap.test_in_valid, 1);
  EXPECT_EQ(overlap.relabelled, 1);
  EXPECT_TRUE(overlap.any());

  FixedSplits clean({Rows(train, train_labels), Rows(torch::rand({5, 2, 4}), torch::zeros({5}, torch::kInt64)),
                     Rows(torch::rand({5, 2, 4}), torch::zeros({5}, torch::kInt64))});
  EXPECT_FALSE(CheckSplitOverlap(clean).any());
}

TEST(SplitOverlap, TextWarnsOfTheSharedExamplesOnly) {
  EXPECT_EQ(SplitOverlapText({.train = 50, .valid = 20, .test = 10}),
            "data: 50 train, 20 valid, 10 test examples; no example is in two splits\n");
  const std::string warning =
      SplitOverlapText({.train = 50, .valid = 20, .test = 10, .test_in_train = 2, .relabelled = 1});
  EXPECT_EQ(warning.substr(0, warning.find("\n  ")),
            "data: 50 train, 20 valid, 10 test examples\n"
            "warning: examples are in two splits: 2 test in train; 1 of them with another label there");
  EXPECT_NE(warning.find("implementation bug"), std::string::npos);
}

}  // namespace
}  // namespace dltune
