#include "pipeline.h"

#include <chrono>
#include <cstring>
#include <numeric>
#include <span>
#include <utility>

#include <fmt/format.h>

#include "core/clock.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

// Stream of MixSeed(data_seed, ·) from which the transforms' generators derive (epochs use streams 0, 1, 2, ...).
constexpr std::uint64_t kTransformStream = 0x7472616E73666F72;  // "transfor"

// Rows `rows` of `source` (dimension 0), in that order: one memcpy per row of a contiguous CPU tensor (index_select
// goes element by element and takes about twice as long for the MLP's 3 KB rows), index_select otherwise.
torch::Tensor GatherRows(const torch::Tensor& source, std::span<const std::int64_t> rows) {
  const auto count = static_cast<std::int64_t>(rows.size());
  if (!source.device().is_cpu() || !source.is_contiguous()) {
    return source.index_select(
        0, torch::from_blob(const_cast<std::int64_t*>(rows.data()), {count}, torch::kInt64).to(source.device()));
  }
  std::vector<std::int64_t> shape = source.sizes().vec();
  shape[0] = count;
  torch::Tensor gathered = torch::empty(shape, source.options());
  const auto row_bytes = static_cast<std::size_t>(source.stride(0) * source.element_size());
  const auto* from = static_cast<const char*>(source.data_ptr());
  auto* to = static_cast<char*>(gathered.data_ptr());
  for (std::int64_t i = 0; i < count; ++i) {
    std::memcpy(to + static_cast<std::size_t>(i) * row_bytes, from + static_cast<std::size_t>(rows[i]) * row_bytes,
                row_bytes);
  }
  return gathered;
}

// `data` after checking the constructor's arguments (before the worker thread can start).
Dataset Checked(Dataset data, std::int64_t batch_size, std::int64_t start_batch, const PipelineOptions& options) {
  if (!data.inputs.defined() || !data.labels.defined() || data.inputs.dim() == 0 ||
      data.inputs.size(0) != data.labels.size(0)) {
    throw Error("input pipeline: the training split's inputs and labels differ in size");
  }
  if (batch_size < 1) throw Error(fmt::format("input pipeline: batch_size must be >= 1, not {}", batch_size));
  if (batch_size > data.size()) {
    throw Error(fmt::format("input pipeline: batch_size {} is larger than the training split ({} examples)", batch_size,
                            data.size()));
  }
  if (start_batch < 0) throw Error(fmt::format("input pipeline: start_batch must be >= 0, not {}", start_batch));
  if (options.shard.count < 1 || options.shard.index < 0 || options.shard.index >= options.shard.count ||
      batch_size % options.shard.count != 0) {
    throw Error(fmt::format("input pipeline: share {} of {} of a batch of {} is not an equal share",
                            options.shard.index, options.shard.count, batch_size));
  }
  if (options.prefetch_batches < 1) {
    throw Error(fmt::format("input pipeline: prefetch_batches must be >= 1, not {}", options.prefetch_batches));
  }
  return data;
}

}  // namespace

BatchPipeline::BatchPipeline(Dataset data, std::int64_t batch_size, std::uint64_t data_seed, std::int64_t start_batch,
                             PipelineOptions options)
    : data_(Checked(std::move(data), batch_size, start_batch, options)),
      batch_size_(batch_size),
      data_seed_(data_seed),
      options_(std::move(options)),
      batches_per_epoch_(data_.size() / batch_size),
      refill_at_(static_cast<std::size_t>(options_.prefetch_batches) / 2),
      worker_([this, start_batch] { Produce(start_batch); }) {}

BatchPipeline::~BatchPipeline() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_.notify_all();
  worker_.join();
}

std::vector<std::int64_t> BatchPipeline::EpochOrder(std::int64_t size, std::uint64_t data_seed, std::int64_t epoch) {
  std::vector<std::int64_t> order(static_cast<std::size_t>(size));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  Rng rng(MixSeed(data_seed, static_cast<std::uint64_t>(epoch)));
  rng.Shuffle(order);
  return order;
}

Batch BatchPipeline::Make(std::int64_t index, std::vector<std::int64_t>& order, std::int64_t& order_epoch) const {
  const std::int64_t epoch = index / batches_per_epoch_;
  const std::int64_t position = index % batches_per_epoch_;
  if (epoch != order_epoch) {
    order = EpochOrder(data_.size(), data_seed_, epoch);
    order_epoch = epoch;
  }
  const std::int64_t share = batch_size_ / options_.shard.count;
  const std::span<const std::int64_t> rows(order.data() + position * batch_size_ + options_.shard.index * share,
                                           static_cast<std::size_t>(share));
  Batch batch{GatherRows(data_.inputs, rows), GatherRows(data_.labels, rows), index};
  if (options_.transform) {
    Rng rng(MixSeed(MixSeed(data_seed_, kTransformStream), static_cast<std::uint64_t>(index)));
    options_.transform(batch, rng);
  }
  return batch;
}

void BatchPipeline::Produce(std::int64_t start_batch) {
  std::vector<std::int64_t> order;
  std::int64_t order_epoch = -1;
  const auto capacity = static_cast<std::size_t>(options_.prefetch_batches);
  try {
    for (std::int64_t index = start_batch;; ++index) {
      {
        std::unique_lock lock(mutex_);
        // A full queue is refilled once it is down to refill_at_: the worker then runs in bursts, not woken for
        // every batch taken (each wake-up is a trip through the scheduler, costly when every core is busy).
        if (queue_.size() >= capacity) space_.wait(lock, [&] { return stop_ || queue_.size() <= refill_at_; });
        if (stop_) return;
      }
      Batch batch = Make(index, order, order_epoch);
      {
        std::lock_guard lock(mutex_);
        if (stop_) return;
        queue_.push_back(std::move(batch));
      }
      ready_.notify_one();
    }
  } catch (...) {
    {
      std::lock_guard lock(mutex_);
      error_ = std::current_exception();
    }
    ready_.notify_one();
  }
}

Batch BatchPipeline::Next() {
  std::unique_lock lock(mutex_);
  if (queue_.empty() && !error_) {
    const auto start = std::chrono::steady_clock::now();
    ready_.wait(lock, [&] { return !queue_.empty() || error_ != nullptr; });
    wait_seconds_ += Seconds(std::chrono::steady_clock::now() - start);
  }
  if (queue_.empty()) std::rethrow_exception(error_);
  Batch batch = std::move(queue_.front());
  queue_.pop_front();
  const bool refill = queue_.size() == refill_at_;
  lock.unlock();
  if (refill) space_.notify_one();
  return batch;
}

double BatchPipeline::TakeWaitSeconds() { return std::exchange(wait_seconds_, 0.0); }

GroupBatches::GroupBatches(Dataset data, std::int64_t batch_size, std::vector<std::uint64_t> data_seeds,
                           std::int64_t start_batch)
    : data_(Checked(std::move(data), batch_size, start_batch, {})),
      batch_size_(batch_size),
      batches_per_epoch_(data_.size() / batch_size),
      data_seeds_(std::move(data_seeds)),
      next_(start_batch) {
  if (data_seeds_.empty()) throw Error("input pipeline: a group of no members");
}

torch::Tensor GroupBatches::NextRows() {
  const std::int64_t index = next_++;
  const std::int64_t epoch = index / batches_per_epoch_;
  if (epoch != epoch_) {
    std::vector<std::int64_t> orders;
    orders.reserve(data_seeds_.size() * static_cast<std::size_t>(data_.size()));
    for (const std::uint64_t seed : data_seeds_) {
      const std::vector<std::int64_t> order = BatchPipeline::EpochOrder(data_.size(), seed, epoch);
      orders.insert(orders.end(), order.begin(), order.end());
    }
    const auto members = static_cast<std::int64_t>(data_seeds_.size());
    // Copied (on the CPU too: from_blob only borrows the vector).
    orders_ = torch::from_blob(orders.data(), {members, data_.size()}, torch::kInt64)
                  .to(data_.inputs.device(), torch::kInt64, /*non_blocking=*/false, /*copy=*/true);
    epoch_ = epoch;
  }
  return orders_.narrow(1, (index % batches_per_epoch_) * batch_size_, batch_size_);
}

Batch GroupBatches::Next() { return Gather(NextRows()); }

Batch GroupBatches::Gather(const torch::Tensor& rows) const {
  const auto members = static_cast<std::int64_t>(data_seeds_.size());
  std::vector<std::int64_t> shape = {members, batch_size_};
  const torch::Tensor flat = rows.reshape(-1).contiguous();  // member by member
  torch::Tensor inputs, labels;
  if (flat.device().is_cpu()) {
    // Each member's rows straight into the group's batch, as its lone trial's pipeline gathers them.
    const std::span<const std::int64_t> indices(flat.data_ptr<std::int64_t>(), static_cast<std::size_t>(flat.numel()));
    inputs = GatherRows(data_.inputs, indices);
    labels = GatherRows(data_.labels, indices);
  } else {
    inputs = data_.inputs.index_select(0, flat);
    labels = data_.labels.index_select(0, flat);
  }
  for (std::int64_t d = 1; d < inputs.dim(); ++d) shape.push_back(inputs.size(d));
  return {inputs.view(shape), labels.view({members, batch_size_}), next_ - 1};
}

}  // namespace dltune
