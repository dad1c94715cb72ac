#include "eval_batches.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "dltune/core/error.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

// Example i has inputs [i, i/2, 1] (float32) and label i % 7.
Dataset Numbered(std::int64_t size) {
  const torch::Tensor ids = torch::arange(size, torch::kFloat32).unsqueeze(1);
  return {torch::cat({ids, ids / 2, torch::ones_like(ids)}, 1), torch::arange(size, torch::kInt64) % 7};
}

TEST(EvalBatches, WeightedMeanOverPaddedBatchesEqualsThePlainMean) {
  const Dataset data = Numbered(1003);
  const EvalBatches batches = MakeEvalBatches(data, 100);
  ASSERT_EQ(batches.size(), 11);
  // A per-example quantity; a padding row (inputs 0) would count as 9, far below the split's mean.
  auto metric = [](const torch::Tensor& inputs) { return (inputs.sum(1) + 3.0).to(torch::kDouble).pow(2); };
  double weighted_sum = 0;
  double weight_sum = 0;
  double unweighted_sum = 0;
  std::int64_t rows = 0;
  for (const EvalBatch& batch : batches) {
    const torch::Tensor values = metric(batch.inputs);
    weighted_sum += (values * batch.weights.to(torch::kDouble)).sum().item<double>();
    weight_sum += batch.weights.sum().item<double>();
    unweighted_sum += values.sum().item<double>();
    rows += batch.inputs.size(0);
  }
  const double plain_mean = metric(data.inputs).mean().item<double>();
  EXPECT_EQ(weight_sum, 1003.0);
  EXPECT_EQ(rows, 1100);
  EXPECT_NEAR(weighted_sum / weight_sum, plain_mean, 1e-9 * plain_mean);
  EXPECT_GT(std::abs(unweighted_sum / static_cast<double>(rows) - plain_mean), 1.0);  // padding would bias it
}

TEST(EvalBatches, EveryBatchHasTheFullShapeAndTheLastIsPadded) {
  const Dataset data = Numbered(1003);
  const EvalBatches batches(data, 100);
  std::vector<torch::Tensor> real_inputs;
  std::vector<torch::Tensor> real_labels;
  for (std::int64_t i = 0; i < batches.size(); ++i) {
    const EvalBatch batch = batches.Get(i);
    EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{100, 3}));
    EXPECT_EQ(batch.labels.sizes(), (std::vector<std::int64_t>{100}));
    EXPECT_EQ(batch.weights.sizes(), (std::vector<std::int64_t>{100}));
    EXPECT_EQ(batch.inputs.dtype(), torch::kFloat32);
    EXPECT_EQ(batch.labels.dtype(), torch::kInt64);
    EXPECT_EQ(batch.weights.dtype(), torch::kFloat32);
    const std::int64_t real = i < 10 ? 100 : 3;
    EXPECT_TRUE(batch.weights.slice(0, 0, real).eq(1).all().item<bool>());
    EXPECT_TRUE(batch.weights.slice(0, real).eq(0).all().item<bool>());
    EXPECT_TRUE(batch.inputs.slice(0, real).eq(0).all().item<bool>());
    EXPECT_TRUE(batch.labels.slice(0, real).eq(0).all().item<bool>());
    real_inputs.push_back(batch.inputs.slice(0, 0, real));
    real_labels.push_back(batch.labels.slice(0, 0, real));
  }
  // The real rows are the split, in order.
  EXPECT_TRUE(torch::cat(real_inputs).equal(data.inputs));
  EXPECT_TRUE(torch::cat(real_labels).equal(data.labels));
}

TEST(EvalBatches, DivisibleSplitIsUnpaddedViews) {
  const Dataset data = Numbered(300);
  const EvalBatches batches(data, 100);
  ASSERT_EQ(batches.size(), 3);
  EXPECT_EQ(batches.examples(), 300);
  const EvalBatch second = batches.Get(1);
  EXPECT_TRUE(second.weights.eq(1).all().item<bool>());
  EXPECT_EQ(second.inputs.data_ptr<float>(), data.inputs.data_ptr<float>() + 100 * 3);  // no copy
}

TEST(EvalBatches, SplitSmallerThanOneBatchIsOnePaddedBatch) {
  const EvalBatches batches(Numbered(5), 64);
  ASSERT_EQ(batches.size(), 1);
  EXPECT_EQ(batches.Get(0).weights.sum().item<float>(), 5.0f);
  EXPECT_EQ(batches.Get(0).inputs.size(0), 64);
}

// A batch's parts apart: its rows, and its weights, which depend only on the split's size (a fused group takes them
// once for all its members' splits).
TEST(EvalBatches, RowsAndWeightsAreTheBatchesAndWeightsDependOnlyOnTheSize) {
  const Dataset data = Numbered(250);
  const Dataset other = {data.inputs.flip(0), data.labels.flip(0)};
  const EvalBatches batches(data, 100), other_batches(other, 100);
  for (std::int64_t i = 0; i < batches.size(); ++i) {
    const EvalBatch batch = batches.Get(i);
    const Dataset rows = batches.Rows(i);
    EXPECT_TRUE(rows.inputs.equal(batch.inputs));
    EXPECT_TRUE(rows.labels.equal(batch.labels));
    EXPECT_TRUE(batches.Weights(i).equal(batch.weights));
    EXPECT_TRUE(other_batches.Weights(i).equal(batch.weights));
  }
  EXPECT_EQ(batches.Weights(2).sum().item<float>(), 50.0f);
}

TEST(EvalBatches, EmptySplitHasNoBatches) {
  const EvalBatches batches(Numbered(0), 10);
  EXPECT_EQ(batches.size(), 0);
  EXPECT_TRUE(batches.begin() == batches.end());
}

TEST(EvalBatches, RejectsBatchSizeBelowOne) {
  try {
    EvalBatches(Numbered(10), 0);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), HasSubstr("batch size must be >= 1, not 0"));
  }
}

std::vector<std::int64_t> Values(const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.contiguous();
  return {t.data_ptr<std::int64_t>(), t.data_ptr<std::int64_t>() + t.numel()};
}

// The ids of a sample of Numbered(): column 0 of its inputs.
std::vector<std::int64_t> Ids(const Dataset& sample) { return Values(sample.inputs.select(1, 0).to(torch::kInt64)); }

TEST(FixedSample, SameSeedSameSubsetDifferentSeedDifferentSubset) {
  const Dataset data = Numbered(1000);
  const Dataset a = FixedSample(data, 100, 5);
  EXPECT_EQ(Ids(a), Ids(FixedSample(data, 100, 5)));
  EXPECT_NE(Ids(a), Ids(FixedSample(data, 100, 6)));
}

TEST(FixedSample, DistinctExamplesInOriginalOrderWithTheirLabels) {
  const Dataset data = Numbered(1000);
  const Dataset sample = FixedSample(data, 250, 1);
  ASSERT_EQ(sample.size(), 250);
  const std::vector<std::int64_t> ids = Ids(sample);
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  EXPECT_EQ(std::set<std::int64_t>(ids.begin(), ids.end()).size(), 250u);
  EXPECT_TRUE(sample.labels.equal(torch::tensor(ids, torch::kInt64) % 7));
  EXPECT_TRUE(sample.inputs.select(1, 1).equal(sample.inputs.select(1, 0) / 2));
}

TEST(FixedSample, IsSpreadOverTheWholeSplit) {
  const Dataset data = Numbered(1000);
  // Over 40 seeds of 100 each, every tenth of the split gets about 400 picks (not the first rows only).
  std::vector<int> per_tenth(10);
  for (std::uint64_t seed = 0; seed < 40; ++seed) {
    for (std::int64_t id : Ids(FixedSample(data, 100, seed))) ++per_tenth[static_cast<std::size_t>(id / 100)];
  }
  for (int count : per_tenth) {
    EXPECT_GT(count, 320);
    EXPECT_LT(count, 480);
  }
}

TEST(FixedSample, WholeSplitAndEmptySampleAndTooMany) {
  const Dataset data = Numbered(50);
  EXPECT_TRUE(FixedSample(data, 50, 3).inputs.equal(data.inputs));
  EXPECT_EQ(FixedSample(data, 0, 3).size(), 0);
  try {
    FixedSample(data, 51, 3);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "evaluation sample: cannot take 51 examples from a split of 50");
  }
  EXPECT_THROW(FixedSample(data, -1, 3), Error);
}

// Members' samples interleaved: [i, m] is member m's row i, and EvalBatches batches them as one split, padding each
// member's last batch.
TEST(InterleavedFixedSamples, RowIOfMemberMIsItsOwnSamplesRowIAndBatchesPadEveryMember) {
  const Dataset data = Numbered(50);
  const std::vector<std::uint64_t> seeds = {3, 4, 5};
  const Dataset interleaved = InterleavedFixedSamples(data, 20, seeds);
  ASSERT_EQ(interleaved.inputs.sizes(), (std::vector<std::int64_t>{20, 3, 3}));
  ASSERT_EQ(interleaved.labels.sizes(), (std::vector<std::int64_t>{20, 3}));
  for (std::size_t m = 0; m < seeds.size(); ++m) {
    const Dataset own = FixedSample(data, 20, seeds[m]);
    const auto member = static_cast<std::int64_t>(m);
    EXPECT_TRUE(interleaved.inputs.select(1, member).equal(own.inputs)) << m;
    EXPECT_TRUE(interleaved.labels.select(1, member).equal(own.labels)) << m;
  }
  const EvalBatches batches = MakeEvalBatches(interleaved, 8);
  ASSERT_EQ(batches.size(), 3);
  const Dataset last = batches.Rows(2);
  ASSERT_EQ(last.inputs.sizes(), (std::vector<std::int64_t>{8, 3, 3}));
  EXPECT_TRUE(last.inputs.narrow(0, 0, 4).equal(interleaved.inputs.narrow(0, 16, 4)));
  EXPECT_EQ(last.inputs.narrow(0, 4, 4).abs().sum().item<float>(), 0.0F);
  EXPECT_TRUE(last.labels.narrow(0, 4, 4).equal(torch::zeros({4, 3}, torch::kInt64)));
  EXPECT_THROW(InterleavedFixedSamples(data, 51, seeds), Error);
}

}  // namespace
}  // namespace dltune
