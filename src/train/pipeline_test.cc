#include "pipeline.h"

#include <gmock/gmock.h>
#include <span>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <numeric>
#include <set>
#include <thread>
#include <vector>

#include "core/rng.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

// Example i has inputs [i, -i] and label i, so a batch shows which examples it holds.
Dataset Numbered(std::int64_t size) {
  const torch::Tensor ids = torch::arange(size, torch::kInt64);
  const torch::Tensor column = ids.to(torch::kFloat32).unsqueeze(1);
  return {torch::cat({column, -column}, 1), ids};
}

std::vector<std::int64_t> Labels(const Batch& batch) {
  const torch::Tensor labels = batch.labels.contiguous();
  return {labels.data_ptr<std::int64_t>(), labels.data_ptr<std::int64_t>() + labels.numel()};
}

std::vector<Batch> Take(BatchPipeline& pipeline, int count) {
  std::vector<Batch> batches;
  for (int i = 0; i < count; ++i) batches.push_back(pipeline.Next());
  return batches;
}

void ExpectSameBatches(const std::vector<Batch>& a, const std::vector<Batch>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].index, b[i].index);
    EXPECT_TRUE(a[i].inputs.equal(b[i].inputs)) << "batch " << i;
    EXPECT_TRUE(a[i].labels.equal(b[i].labels)) << "batch " << i;
  }
}

TEST(BatchPipeline, SameSeedGivesIdenticalBatches) {
  BatchPipeline a(Numbered(103), 10, 7);
  BatchPipeline b(Numbered(103), 10, 7);
  const std::vector<Batch> from_a = Take(a, 35);  // three and a half epochs
  ExpectSameBatches(from_a, Take(b, 35));
  for (int i = 0; i < 35; ++i) EXPECT_EQ(from_a[static_cast<std::size_t>(i)].index, i);
}

TEST(BatchPipeline, DifferentSeedsGiveDifferentBatches) {
  BatchPipeline a(Numbered(100), 10, 7);
  BatchPipeline b(Numbered(100), 10, 8);
  EXPECT_NE(Labels(a.Next()), Labels(b.Next()));
}

TEST(BatchPipeline, EpochsAreShuffledDifferently) {
  BatchPipeline pipeline(Numbered(100), 10, 7);
  std::vector<std::vector<std::int64_t>> epochs(3);
  for (auto& epoch : epochs) {
    for (const Batch& batch : Take(pipeline, 10)) {
      for (std::int64_t label : Labels(batch)) epoch.push_back(label);
    }
  }
  std::vector<std::int64_t> identity(100);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(epochs[0], identity);
  EXPECT_NE(epochs[0], epochs[1]);
  EXPECT_NE(epochs[1], epochs[2]);
}

TEST(BatchPipeline, EveryExampleOncePerEpochAndRemainderDropped) {
  constexpr std::int64_t kSize = 103;
  BatchPipeline pipeline(Numbered(kSize), 10, 3);
  EXPECT_EQ(pipeline.batches_per_epoch(), 10);
  for (std::int64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<std::int64_t> seen;
    for (const Batch& batch : Take(pipeline, 10)) {
      EXPECT_EQ(batch.inputs.sizes(), (std::vector<std::int64_t>{10, 2}));
      EXPECT_EQ(batch.labels.dtype(), torch::kInt64);
      // Inputs and labels were gathered with the same rows.
      EXPECT_TRUE(batch.inputs.select(1, 0).equal(batch.labels.to(torch::kFloat32)));
      for (std::int64_t label : Labels(batch)) {
        EXPECT_TRUE(seen.insert(label).second) << "example " << label << " twice in epoch " << epoch;
        EXPECT_LT(label, kSize);
      }
    }
    EXPECT_EQ(seen.size(), 100u);
    // The dropped three are the last three of the epoch's order.
    const std::vector<std::int64_t> order = BatchPipeline::EpochOrder(kSize, 3, epoch);
    for (std::size_t i = 100; i < order.size(); ++i) EXPECT_EQ(seen.count(order[i]), 0u);
  }
}

TEST(BatchPipeline, BatchKIsAPureFunctionOfSeedAndK) {
  constexpr std::int64_t kSize = 53;
  BatchPipeline pipeline(Numbered(kSize), 5, 11);
  for (const Batch& batch : Take(pipeline, 25)) {
    const std::vector<std::int64_t> order = BatchPipeline::EpochOrder(kSize, 11, batch.index / 10);
    const auto begin = order.begin() + (batch.index % 10) * 5;
    EXPECT_EQ(Labels(batch), std::vector<std::int64_t>(begin, begin + 5)) << "batch " << batch.index;
  }
}

TEST(BatchPipeline, EpochOrderIsAFisherYatesShuffleByTheMixedSeed) {
  std::vector<std::int64_t> expected(20);
  std::iota(expected.begin(), expected.end(), 0);
  Rng rng(MixSeed(5, 2));
  rng.Shuffle(std::span(expected));
  EXPECT_EQ(BatchPipeline::EpochOrder(20, 5, 2), expected);
  // Pinned: a change here changes every study's data order.
  EXPECT_EQ(BatchPipeline::EpochOrder(8, 42, 0), (std::vector<std::int64_t>{3, 7, 2, 0, 6, 4, 1, 5}));
}

TEST(BatchPipeline, ResumingAtBatchKEqualsSkippingKBatches) {
  BatchPipeline from_start(Numbered(64), 8, 9);
  const std::vector<Batch> all = Take(from_start, 30);
  BatchPipeline resumed(Numbered(64), 8, 9, /*start_batch=*/19);
  ExpectSameBatches(std::vector<Batch>(all.begin() + 19, all.end()), Take(resumed, 11));
}

// Runs `work` on a detached thread; true when it finished within `limit`.
bool FinishesWithin(std::function<void()> work, milliseconds limit) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([work = std::move(work), done] {
    work();
    done->set_value();
  }).detach();
  return finished.wait_for(limit) == std::future_status::ready;
}

TEST(BatchPipeline, DestructionDoesNotHangWhenTheConsumerStopsEarly) {
  EXPECT_TRUE(FinishesWithin(
      [] {
        auto pipeline = std::make_unique<BatchPipeline>(Numbered(1000), 10, 1);
        pipeline->Next();
        std::this_thread::sleep_for(milliseconds(50));  // the worker fills the queue and blocks
        pipeline.reset();
      },
      std::chrono::seconds(10)));
  EXPECT_TRUE(FinishesWithin([] { BatchPipeline unused(Numbered(1000), 10, 1); }, std::chrono::seconds(10)));
  EXPECT_TRUE(FinishesWithin(
      [] {
        PipelineOptions options;
        options.transform = [](Batch&, Rng&) { std::this_thread::sleep_for(milliseconds(20)); };
        BatchPipeline slow(Numbered(1000), 10, 1, 0, options);
        slow.Next();
      },
      std::chrono::seconds(10)));
}

TEST(BatchPipeline, MeasuresTimeBlockedOnASlowProducer) {
  PipelineOptions options;
  options.transform = [](Batch&, Rng&) { std::this_thread::sleep_for(milliseconds(50)); };
  BatchPipeline pipeline(Numbered(1000), 10, 1, 0, options);
  Take(pipeline, 4);
  const double waited = pipeline.TakeWaitSeconds();
  EXPECT_GT(waited, 0.1);  // ~4 x 50 ms
  EXPECT_LT(waited, 10.0);
  EXPECT_EQ(pipeline.TakeWaitSeconds(), 0.0);  // reset by the previous call
}

// Options with a queue of `capacity` batches whose transform counts the batches made in `made`.
PipelineOptions CountingBatches(std::int64_t capacity, const std::shared_ptr<std::atomic<int>>& made) {
  PipelineOptions options;
  options.prefetch_batches = capacity;
  options.transform = [made](Batch&, Rng&) { ++*made; };
  return options;
}

TEST(BatchPipeline, NoWaitWhenTheQueueIsFull) {
  auto made = std::make_shared<std::atomic<int>>(0);
  BatchPipeline pipeline(Numbered(1000), 10, 1, 0, CountingBatches(4, made));
  while (*made < 4) std::this_thread::sleep_for(milliseconds(1));
  std::this_thread::sleep_for(milliseconds(50));  // the fourth batch reaches the queue
  EXPECT_EQ(*made, 4);                            // and the worker waits for room
  Take(pipeline, 4);
  EXPECT_LT(pipeline.TakeWaitSeconds(), 0.001);
}

TEST(BatchPipeline, AFullQueueIsRefilledOnlyOnceHalfOfItIsTaken) {
  auto made = std::make_shared<std::atomic<int>>(0);
  BatchPipeline pipeline(Numbered(1000), 10, 1, 0, CountingBatches(8, made));
  while (*made < 8) std::this_thread::sleep_for(milliseconds(1));
  Take(pipeline, 3);  // 5 left: above half, so the worker is not woken
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(*made, 8);
  Take(pipeline, 1);  // 4 left: the worker fills the queue again
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (*made < 12 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(milliseconds(1));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(*made, 12);
  for (int i = 4; i < 20; ++i) EXPECT_EQ(pipeline.Next().index, i);  // and the stream goes on in order
}

TEST(BatchPipeline, AStridedSplitGivesTheBatchesOfItsContiguousCopy) {
  const Dataset numbered = Numbered(60);
  // Every other example of 120, as a view: rows are not where a contiguous tensor has them.
  const Dataset doubled{torch::cat({numbered.inputs, numbered.inputs}, 1).view({120, 2}),
                        numbered.labels.repeat_interleave(2)};
  const Dataset strided{doubled.inputs.slice(0, 0, 120, 2), doubled.labels.slice(0, 0, 120, 2)};
  ASSERT_FALSE(strided.inputs.is_contiguous());
  BatchPipeline a(strided, 7, 3);
  BatchPipeline b(Dataset{strided.inputs.contiguous(), strided.labels.contiguous()}, 7, 3);
  ExpectSameBatches(Take(a, 20), Take(b, 20));
}

TEST(BatchPipeline, WorkerExceptionIsRethrownFromNextAfterEarlierBatches) {
  PipelineOptions options;
  options.transform = [](Batch& batch, Rng&) {
    if (batch.index == 3) throw Error("transform failed at batch 3");
  };
  BatchPipeline pipeline(Numbered(100), 10, 1, 0, options);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(pipeline.Next().index, i);
  EXPECT_THROW(
      {
        try {
          pipeline.Next();
        } catch (const Error& error) {
          EXPECT_THAT(error.what(), HasSubstr("transform failed at batch 3"));
          throw;
        }
      },
      Error);
  EXPECT_THROW(pipeline.Next(), Error);
}

TEST(BatchPipeline, TransformRandomnessIsDeterministicPerBatch) {
  PipelineOptions options;
  options.transform = [](Batch& batch, Rng& rng) { batch.inputs.add_(static_cast<float>(rng.Uniform())); };
  const Dataset data = Numbered(100);
  const torch::Tensor original = data.inputs.clone();
  BatchPipeline a(data, 10, 4, 0, options);
  BatchPipeline b(data, 10, 4, 0, options);
  const std::vector<Batch> from_a = Take(a, 12);
  ExpectSameBatches(from_a, Take(b, 12));
  EXPECT_FALSE(from_a[0].inputs.select(1, 0).equal(from_a[0].labels.to(torch::kFloat32)));  // transformed
  EXPECT_FALSE((from_a[0].inputs - from_a[0].inputs.round()).equal(from_a[1].inputs - from_a[1].inputs.round()));
  EXPECT_TRUE(data.inputs.equal(original));  // the split itself is untouched
}

TEST(BatchPipeline, RejectsBadArguments) {
  EXPECT_THROW(BatchPipeline(Numbered(10), 0, 1), Error);
  EXPECT_THROW(BatchPipeline(Numbered(10), 11, 1), Error);
  EXPECT_THROW(BatchPipeline(Numbered(10), 5, 1, -1), Error);
  EXPECT_THROW(BatchPipeline(Numbered(10), 5, 1, 0, PipelineOptions{.prefetch_batches = 0}), Error);
  EXPECT_THROW(BatchPipeline(Dataset{torch::zeros({10, 2}), torch::zeros({9}, torch::kInt64)}, 5, 1), Error);
  try {
    BatchPipeline(Numbered(10), 11, 1);
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "input pipeline: batch_size 11 is larger than the training split (10 examples)");
  }
}

// Not a check of speed (machines vary) but a measurement: Fashion-MNIST-shaped batches of 128.
TEST(BatchPipeline, ThroughputWithFashionMnistShapedData) {
  const Dataset data{torch::rand({50000, 1, 28, 28}), torch::randint(0, 10, {50000}, torch::kInt64)};
  BatchPipeline pipeline(data, 128, 1);
  constexpr int kBatches = 3000;  // several epochs (390 batches each)
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < kBatches; ++i) pipeline.Next();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[ measured ] %.0f batches/s of 128 x 1 x 28 x 28 (%.1f us per batch)\n", kBatches / seconds,
              1e6 * seconds / kBatches);
  EXPECT_GT(kBatches / seconds, 100.0);
}

// A group's batches, gathered together, are each member's BatchPipeline batches row for row, across epochs and from
// a start batch.
TEST(GroupBatches, AreEachMembersPipelineBatches) {
  const std::vector<std::uint64_t> seeds = {7, 8, 9};
  for (const std::int64_t start : {std::int64_t{0}, std::int64_t{17}}) {
    GroupBatches group(Numbered(103), 10, seeds, start);
    std::vector<std::unique_ptr<BatchPipeline>> alone;
    for (const std::uint64_t seed : seeds)
      alone.push_back(std::make_unique<BatchPipeline>(Numbered(103), 10, seed, start));
    for (int k = 0; k < 35; ++k) {  // three and a half epochs
      const Batch together = group.Next();
      EXPECT_EQ(together.index, start + k);
      ASSERT_EQ(together.inputs.sizes(), (std::vector<std::int64_t>{3, 10, 2}));
      for (std::size_t m = 0; m < seeds.size(); ++m) {
        const Batch own = alone[m]->Next();
        EXPECT_TRUE(together.inputs[static_cast<std::int64_t>(m)].equal(own.inputs))
            << "batch " << k << " member " << m;
        EXPECT_TRUE(together.labels[static_cast<std::int64_t>(m)].equal(own.labels))
            << "batch " << k << " member " << m;
      }
    }
  }
}

}  // namespace
}  // namespace dltune
