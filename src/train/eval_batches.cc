#include "eval_batches.h"

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

// Stream of MixSeed(seed, ·) that FixedSample draws from.
constexpr std::uint64_t kSampleStream = 0x73616D706C65;  // "sample"

// The rows FixedSample(data, count, seed) takes from a split of `size` examples, in order.
std::vector<std::int64_t> FixedSampleRows(std::int64_t size, std::int64_t count, std::uint64_t seed) {
  if (count < 0 || count > size) {
    throw Error(fmt::format("evaluation sample: cannot take {} examples from a split of {}", count, size));
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(size));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  if (count == size) return order;
  // The first `count` steps of a Fisher-Yates shuffle pick a uniform random subset.
  Rng rng(MixSeed(seed, kSampleStream));
  for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng.Below(order.size() - i));
    std::swap(order[i], order[j]);
  }
  order.resize(static_cast<std::size_t>(count));
  std::sort(order.begin(), order.end());
  return order;
}

Dataset SelectRows(const Dataset& data, std::vector<std::int64_t> rows) {
  const torch::Tensor index =
      torch::from_blob(rows.data(), {static_cast<std::int64_t>(rows.size())}, torch::kInt64).to(data.labels.device());
  return {data.inputs.index_select(0, index), data.labels.index_select(0, index)};
}

}  // namespace

EvalBatches::EvalBatches(Dataset data, std::int64_t batch_size) : data_(std::move(data)), batch_size_(batch_size) {
  if (batch_size < 1) throw Error(fmt::format("evaluation: batch size must be >= 1, not {}", batch_size));
}

EvalBatch EvalBatches::Get(std::int64_t i) const {
  Dataset rows = Rows(i);
  return {std::move(rows.inputs), std::move(rows.labels), Weights(i)};
}

Dataset EvalBatches::Rows(std::int64_t i) const {
  TORCH_CHECK(i >= 0 && i < size(), "EvalBatches::Rows: batch ", i, " out of range [0, ", size(), ")");
  const std::int64_t begin = i * batch_size_;
  const std::int64_t end = std::min(begin + batch_size_, data_.size());
  const Dataset real = data_.Slice(begin, end);
  const std::int64_t padding = batch_size_ - (end - begin);
  if (padding == 0) return real;
  const auto padded = [padding](const torch::Tensor& rows) {
    std::vector<std::int64_t> shape = rows.sizes().vec();
    shape[0] = padding;
    return torch::cat({rows, torch::zeros(shape, rows.options())});
  };
  return {padded(real.inputs), padded(real.labels)};
}

torch::Tensor EvalBatches::Weights(std::int64_t i) const {
  TORCH_CHECK(i >= 0 && i < size(), "EvalBatches::Weights: batch ", i, " out of range [0, ", size(), ")");
  const std::int64_t real = std::min(batch_size_, data_.size() - i * batch_size_);
  const auto options = torch::TensorOptions().dtype(torch::kFloat32).device(data_.labels.device());
  if (real == batch_size_) return torch::ones({batch_size_}, options);
  return torch::cat({torch::ones({real}, options), torch::zeros({batch_size_ - real}, options)});
}

EvalBatches MakeEvalBatches(const Dataset& data, std::int64_t batch_size) { return EvalBatches(data, batch_size); }

Dataset FixedSample(const Dataset& data, std::int64_t count, std::uint64_t seed) {
  if (count == data.size()) return data;
  return SelectRows(data, FixedSampleRows(data.size(), count, seed));
}

Dataset InterleavedFixedSamples(const Dataset& data, std::int64_t count, const std::vector<std::uint64_t>& seeds) {
  const auto members = static_cast<std::int64_t>(seeds.size());
  std::vector<std::int64_t> rows(static_cast<std::size_t>(count * members));
  for (std::size_t m = 0; m < seeds.size(); ++m) {
    const std::vector<std::int64_t> own = FixedSampleRows(data.size(), count, seeds[m]);
    for (std::size_t i = 0; i < own.size(); ++i) rows[i * seeds.size() + m] = own[i];
  }
  const Dataset gathered = SelectRows(data, std::move(rows));
  std::vector<std::int64_t> shape = data.inputs.sizes().vec();
  shape[0] = members;
  shape.insert(shape.begin(), count);
  return {gathered.inputs.view(shape), gathered.labels.view({count, members})};
}

}  // namespace dltune
