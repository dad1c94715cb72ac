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
  std::vector<std::int64_t> input_shape = real.inputs.sizes().vec();
  input_shape[0] = padding;
  return {torch::cat({real.inputs, torch::zeros(input_shape, real.inputs.options())}),
          torch::cat({real.labels, torch::zeros({padding}, real.labels.options())})};
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
  const std::int64_t size = data.size();
  if (count < 0 || count > size) {
    throw Error(fmt::format("evaluation sample: cannot take {} examples from a split of {}", count, size));
  }
  if (count == size) return data;
  // The first `count` steps of a Fisher-Yates shuffle pick a uniform random subset.
  std::vector<std::int64_t> order(static_cast<std::size_t>(size));
  std::iota(order.begin(), order.end(), std::int64_t{0});
  Rng rng(MixSeed(seed, kSampleStream));
  for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
    const std::size_t j = i + static_cast<std::size_t>(rng.Below(order.size() - i));
    std::swap(order[i], order[j]);
  }
  order.resize(static_cast<std::size_t>(count));
  std::sort(order.begin(), order.end());
  const torch::Tensor rows = torch::from_blob(order.data(), {count}, torch::kInt64).to(data.labels.device());
  return {data.inputs.index_select(0, rows), data.labels.index_select(0, rows)};
}

}  // namespace dltune
