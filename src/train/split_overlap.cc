// Examples shared by a workload's splits, found by hashing each example's input bytes, and what they are as text.
#include "train/split_overlap.h"

#include <string_view>
#include <unordered_map>

#include <fmt/format.h>

#include "dltune/train/workload.h"

namespace dltune {
namespace {

// Each example's input bytes as a hash, with its label; examples are rows of a contiguous float tensor.
struct HashedSplit {
  std::unordered_multimap<std::size_t, std::int64_t> rows;  // hash -> row
  torch::Tensor inputs;
  torch::Tensor labels;
};

std::string_view RowBytes(const torch::Tensor& inputs, std::int64_t row) {
  const std::int64_t width = inputs.numel() / std::max<std::int64_t>(inputs.size(0), 1);
  const auto* base = static_cast<const char*>(inputs.data_ptr()) + row * width * inputs.element_size();
  return {base, static_cast<std::size_t>(width * inputs.element_size())};
}

HashedSplit Hash(const Dataset& split) {
  HashedSplit hashed{{}, split.inputs.contiguous(), split.labels.contiguous().to(torch::kInt64)};
  hashed.rows.reserve(static_cast<std::size_t>(split.size()));
  for (std::int64_t row = 0; row < split.size(); ++row) {
    hashed.rows.emplace(std::hash<std::string_view>{}(RowBytes(hashed.inputs, row)), row);
  }
  return hashed;
}

// Rows of `later` whose input is also in `earlier` (bytes compared, not only hashes); counts relabelled ones.
std::int64_t Shared(const HashedSplit& earlier, const HashedSplit& later, std::int64_t& relabelled) {
  std::int64_t shared = 0;
  const auto* later_labels = later.labels.data_ptr<std::int64_t>();
  const auto* earlier_labels = earlier.labels.data_ptr<std::int64_t>();
  for (const auto& [hash, row] : later.rows) {
    const std::string_view bytes = RowBytes(later.inputs, row);
    const auto [begin, end] = earlier.rows.equal_range(hash);
    for (auto it = begin; it != end; ++it) {
      if (RowBytes(earlier.inputs, it->second) != bytes) continue;
      ++shared;
      if (earlier_labels[it->second] != later_labels[row]) ++relabelled;
      break;
    }
  }
  return shared;
}

}  // namespace

SplitOverlap CheckSplitOverlap(Workload& workload) {
  const WorkloadData& data = workload.Data();
  const HashedSplit train = Hash(data.train);
  const HashedSplit valid = Hash(data.valid);
  const HashedSplit test = Hash(data.test);
  SplitOverlap overlap{.train = data.train.size(), .valid = data.valid.size(), .test = data.test.size()};
  overlap.valid_in_train = Shared(train, valid, overlap.relabelled);
  overlap.test_in_train = Shared(train, test, overlap.relabelled);
  overlap.test_in_valid = Shared(valid, test, overlap.relabelled);
  return overlap;
}

std::string SplitOverlapText(const SplitOverlap& o) {
  std::string out = fmt::format("data: {} train, {} valid, {} test examples", o.train, o.valid, o.test);
  if (!o.any()) return out + "; no example is in two splits\n";
  out += "\nwarning: examples are in two splits:";
  if (o.valid_in_train > 0) out += fmt::format(" {} valid in train;", o.valid_in_train);
  if (o.test_in_train > 0) out += fmt::format(" {} test in train;", o.test_in_train);
  if (o.test_in_valid > 0) out += fmt::format(" {} test in valid;", o.test_in_valid);
  if (o.relabelled > 0) out += fmt::format(" {} of them with another label there;", o.relabelled);
  out.back() = '\n';
  return out +
         "  An evaluation on a split that holds training examples overstates how well the model generalizes "
         "(the playbook: overlap of test with training data is an implementation bug to rule out).\n";
}

}  // namespace dltune
