#include "dltune/core/strings.h"

#include <algorithm>
#include <cctype>

namespace dltune {

std::size_t EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of neighbours each cost 1.
  const std::size_t columns = b.size() + 1;
  std::vector<std::size_t> d((a.size() + 1) * columns);
  for (std::size_t i = 0; i <= a.size(); ++i) d[i * columns] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t best =
          std::min({d[(i - 1) * columns + j] + 1, d[i * columns + j - 1] + 1, d[(i - 1) * columns + j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        best = std::min(best, d[(i - 2) * columns + j - 2] + 1);
      }
      d[i * columns + j] = best;
    }
  }
  return d[a.size() * columns + b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  std::string lowered(word);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    const std::size_t distance = EditDistance(lowered, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // A typo changes at most about a third of a word, and never all of a short one.
  const std::size_t allowed = std::max<std::size_t>(1, std::min(word.size(), best.size()) / 3);
  return best_distance <= allowed ? best : std::string();
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = ClosestMatch(word, candidates);
  return match.empty() ? std::string() : " (did you mean '" + match + "'?)";
}

std::string JoinAlternatives(const std::vector<std::string>& items, bool quote) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += (i + 1 == items.size()) ? " or " : ", ";
    text += quote ? "'" + items[i] + "'" : items[i];
  }
  return text;
}

}  // namespace dltune
