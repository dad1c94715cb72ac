// The training input pipeline: shuffled batches of an in-memory split, prefetched on a background thread.
//
// The playbook ("Optimizing the input pipeline") asks for prefetching and for measuring input-bound time; its
// multi-host advice asks for data-shuffling seeds that differ across hosts. So: batch k of training is a pure
// function of (data_seed, k) — epoch e = k / batches_per_epoch is a Fisher-Yates shuffle by
// Rng(MixSeed(data_seed, e)), the same on every platform, and an epoch's last partial batch is dropped (every
// training batch has batch_size examples; each example appears at most once per epoch). Resuming at a step is
// starting at start_batch = that step, with no state to save but the seed. Give each host its own data_seed.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "core/rng.h"
#include "dltune/train/workload.h"

namespace dltune {

// One training batch: batch_size examples (inputs [B, ...], labels [B]), or a data-parallel rank's share of them,
// and its position k in the stream.
struct Batch {
  torch::Tensor inputs;
  torch::Tensor labels;
  std::int64_t index = 0;
};

// Options of a BatchPipeline beyond its data, batch size and seed.
struct PipelineOptions {
  // Batches prepared ahead of the consumer (the bounded queue's capacity); >= 1. A full queue is refilled once the
  // consumer has taken half of it, so the worker wakes once per half queue rather than once per batch.
  std::int64_t prefetch_batches = 16;
  // Optional work done on the background thread to each batch after gathering it (augmentation, preprocessing).
  // `rng` is seeded from (data_seed, batch.index), so a transform that draws only from it keeps batch k a pure
  // function of (data_seed, k). May throw: the exception reaches the consumer from Next().
  std::function<void(Batch& batch, Rng& rng)> transform;
  // Data-parallel training: of each batch of batch_size examples, only share `index` of `count` equal shares (its
  // rows [index * batch_size / count, (index + 1) * batch_size / count)), so that the ranks' shares make up the batch
  // one process would train on. batch_size must be a multiple of count.
  struct Shard {
    int index = 0;
    int count = 1;
  } shard;
};

// Serves batches 0, 1, 2, ... (from start_batch on) of `data`, gathered in shuffled order by a background thread
// into a bounded queue. Thread safety: one consumer thread calls Next() and TakeWaitSeconds(); the worker thread is
// internal. Not copyable or movable. The destructor stops and joins the worker promptly even when the queue is full
// or a transform is running (it waits for that one transform to return).
class BatchPipeline {
 public:
  // Throws Error when batch_size is < 1 or larger than the split (no full batch), when start_batch < 0, when the
  // split's inputs and labels disagree in size, or when options are invalid. `data` is shared, not copied.
  BatchPipeline(Dataset data, std::int64_t batch_size, std::uint64_t data_seed, std::int64_t start_batch = 0,
                PipelineOptions options = {});
  ~BatchPipeline();
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  // The next batch (indices consecutive from start_batch); blocks until it is ready. Rethrows an exception the
  // worker hit (after the batches it finished before it), on this and every later call.
  Batch Next();
  // Seconds Next() spent blocked waiting for the worker since the previous call (or construction); resets to 0.
  double TakeWaitSeconds();

  // Full batches per epoch: data.size() / batch_size (the remainder is dropped).
  std::int64_t batches_per_epoch() const { return batches_per_epoch_; }

  // The order of examples in epoch `epoch` of a split of `size` examples: a permutation of [0, size).
  static std::vector<std::int64_t> EpochOrder(std::int64_t size, std::uint64_t data_seed, std::int64_t epoch);

 private:
  // The worker thread's loop: makes batches from `start_batch` on until stopped or failed.
  void Produce(std::int64_t start_batch);
  // Batch `index`; `order` caches the permutation of epoch `order_epoch` between calls.
  Batch Make(std::int64_t index, std::vector<std::int64_t>& order, std::int64_t& order_epoch) const;

  const Dataset data_;
  const std::int64_t batch_size_;
  const std::uint64_t data_seed_;
  const PipelineOptions options_;
  const std::int64_t batches_per_epoch_;
  const std::size_t refill_at_;  // queue length at which a full queue is refilled: half the capacity
  double wait_seconds_ = 0;      // consumer thread only

  std::mutex mutex_;
  std::condition_variable ready_;  // a batch or an error was queued
  std::condition_variable space_;  // the queue has room, or stop_ was set
  std::deque<Batch> queue_;
  std::exception_ptr error_;
  bool stop_ = false;
  std::thread worker_;  // last: starts after every other member is constructed
};

// The batches of a fused group's members drawn together: each member's epoch order (its data seed's, as its
// BatchPipeline draws it) moved to the data's device once per epoch, and each step's batches of all the members
// gathered into one [M, B, ...] tensor: on a device by one index_select of the inputs and one of the labels, with no
// copy from the host per step; on the CPU row by row, as a pipeline gathers (no copy of M separate batches into one).
// Batch k of member m is, row for row, batch k of a BatchPipeline of m's data seed. On the calling thread (a
// device's gathers are queued, not waited for); not thread-safe.
class GroupBatches {
 public:
  // `data` on the device the batches are wanted on; one member per seed of `data_seeds`. Throws Error as
  // BatchPipeline does.
  GroupBatches(Dataset data, std::int64_t batch_size, std::vector<std::uint64_t> data_seeds,
               std::int64_t start_batch = 0);

  // The members' next batches: inputs [M, B, ...], labels [M, B]. Gather(NextRows()).
  Batch Next();
  // The rows of the data that Next would gather, [M, B] int64 on the data's device (a view of the epoch's orders: copy
  // it where it must outlive the next epoch), and the batch taken.
  torch::Tensor NextRows();
  // The members' batches of `rows` (NextRows's, or a tensor holding them: a captured step gathers from the tensor the
  // graph holds): inputs [M, B, ...], labels [M, B], gathered on the data's device; its index the batch NextRows took
  // last.
  Batch Gather(const torch::Tensor& rows) const;

 private:
  Dataset data_;
  std::int64_t batch_size_;
  std::int64_t batches_per_epoch_;
  std::vector<std::uint64_t> data_seeds_;
  std::int64_t next_;
  std::int64_t epoch_ = -1;
  torch::Tensor orders_;  // [M, examples] on the data's device: each member's order of epoch_
};

}  // namespace dltune
