// Evaluation batches and fixed evaluation samples.
//
// The playbook ("Setting up periodic evaluations") warns that a split not divisible by the batch size leaves a
// partial batch whose padding must not bias the metrics. Here every batch has exactly batch_size rows: the last one
// is padded with zero-weight examples (inputs 0, label 0), real examples weigh 1, so sum(w * metric) / sum(w) over
// all batches is exactly the per-example mean over the split. Batches cover the split in order.
#pragma once

#include <cstdint>
#include <iterator>

#include <torch/torch.h>

#include "dltune/train/workload.h"

namespace dltune {

// A fixed-size evaluation batch: inputs [B, ...], labels [B] (the split's dtypes) and weights (float32 [B]: 1 for a
// real example, 0 for padding).
struct EvalBatch {
  torch::Tensor inputs;
  torch::Tensor labels;
  torch::Tensor weights;
};

// The evaluation batches of one split, made on demand (full batches are views of the split; only the last, padded
// one is copied). An immutable value: safe to read from several threads. Iterate with range-for.
class EvalBatches {
 public:
  // Throws Error when batch_size < 1. `data` is shared, not copied.
  EvalBatches(Dataset data, std::int64_t batch_size);

  // Number of batches: ceil(examples / batch_size); 0 for an empty split.
  std::int64_t size() const { return (data_.size() + batch_size_ - 1) / batch_size_; }
  std::int64_t batch_size() const { return batch_size_; }
  // Real (non-padding) examples over all batches: the split's size.
  std::int64_t examples() const { return data_.size(); }
  // Batch i, 0 <= i < size(): Rows(i) and Weights(i).
  EvalBatch Get(std::int64_t i) const;
  // Batch i's inputs and labels, padded.
  Dataset Rows(std::int64_t i) const;
  // Batch i's weights: the same for every split of this size (a fused group's members share them).
  torch::Tensor Weights(std::int64_t i) const;

  // Input iterator over the batches, yielding EvalBatch values.
  class Iterator {
   public:
    // NOLINTBEGIN(readability-identifier-naming): the names std::iterator_traits looks for.
    using iterator_category = std::input_iterator_tag;
    using value_type = EvalBatch;
    using difference_type = std::int64_t;
    using pointer = void;
    using reference = EvalBatch;
    // NOLINTEND(readability-identifier-naming)

    Iterator(const EvalBatches* batches, std::int64_t index) : batches_(batches), index_(index) {}
    EvalBatch operator*() const { return batches_->Get(index_); }
    Iterator& operator++() {
      ++index_;
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++index_;
      return before;
    }
    bool operator==(const Iterator& other) const { return index_ == other.index_; }

   private:
    const EvalBatches* batches_;
    std::int64_t index_;
  };
  Iterator begin() const { return {this, 0}; }
  Iterator end() const { return {this, size()}; }

 private:
  Dataset data_;
  std::int64_t batch_size_;
};

// The evaluation batches of `data` (see EvalBatches).
EvalBatches MakeEvalBatches(const Dataset& data, std::int64_t batch_size);

// A fixed random subset of `count` examples, in their original order: a pure function of (data, count, seed), so
// every periodic evaluation sees the same examples (the playbook's fixed subset of train for training error, and
// a fixed sample of valid for frequent evaluations). The result is a copy, or `data` itself when count equals its
// size. Throws Error unless 0 <= count <= data.size().
Dataset FixedSample(const Dataset& data, std::int64_t count, std::uint64_t seed);

// Several members' fixed samples of `data`, one per seed, gathered at once and interleaved: inputs [count, M, ...] and
// labels [count, M], whose [i, m] is row i of FixedSample(data, count, seeds[m]). Examples first, so that
// EvalBatches batches it as one split (a batch [B, M, ...]: each member's next B examples). Throws as FixedSample.
Dataset InterleavedFixedSamples(const Dataset& data, std::int64_t count, const std::vector<std::uint64_t>& seeds);

}  // namespace dltune
