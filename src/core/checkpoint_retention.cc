#include "core/checkpoint_retention.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numeric>
#include <string>

#include "core/files.h"

namespace dltune {
namespace {

std::vector<std::size_t> Indices(std::size_t count) {
  std::vector<std::size_t> indices(count);
  std::iota(indices.begin(), indices.end(), std::size_t{0});
  return indices;
}

// Marks the first `keep` of `order` (all of them when fewer).
std::vector<bool> FirstOf(const std::vector<std::size_t>& order, int keep, std::size_t count) {
  std::vector<bool> marked(count, false);
  const std::size_t taken = std::min(order.size(), static_cast<std::size_t>(std::max(0, keep)));
  for (std::size_t i = 0; i < taken; ++i) marked[order[i]] = true;
  return marked;
}

}  // namespace

std::vector<std::size_t> RankByObjective(const std::vector<RetentionCandidate>& checkpoints, Direction direction) {
  std::vector<std::size_t> ranked;
  for (const std::size_t i : Indices(checkpoints.size())) {
    if (checkpoints[i].objective && std::isfinite(*checkpoints[i].objective)) ranked.push_back(i);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [&](std::size_t a, std::size_t b) {
    const double value_a = *checkpoints[a].objective, value_b = *checkpoints[b].objective;
    if (value_a == value_b) return checkpoints[a].step < checkpoints[b].step;
    return IsBetter(value_a, value_b, direction);
  });
  return ranked;
}

RetainedCheckpoints RetainCheckpoints(const std::vector<RetentionCandidate>& checkpoints,
                                      const CheckpointRetention& retention) {
  std::vector<std::size_t> newest_first = Indices(checkpoints.size());
  std::stable_sort(newest_first.begin(), newest_first.end(), [&](std::size_t a, std::size_t b) {
    if (checkpoints[a].step == checkpoints[b].step) return a > b;
    return checkpoints[a].step > checkpoints[b].step;
  });
  return {.latest = FirstOf(newest_first, retention.keep_latest, checkpoints.size()),
          .best = FirstOf(RankByObjective(checkpoints, retention.direction), retention.keep_best, checkpoints.size())};
}

void WriteRecordedCheckpointStep(const std::filesystem::path& file, std::int64_t step) {
  WriteFileAtomically(file, std::to_string(step) + "\n", /*sync=*/false);
}

std::optional<std::int64_t> ReadRecordedCheckpointStep(const std::filesystem::path& file) {
  const std::optional<std::string> text = ReadFileIfReadable(file);
  if (!text) return std::nullopt;
  std::int64_t step = 0;
  if (std::from_chars(text->data(), text->data() + text->size(), step).ec != std::errc() || step < 0) {
    return std::nullopt;
  }
  return step;
}

}  // namespace dltune
