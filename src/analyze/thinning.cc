#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "analysis_util.h"

namespace dltune::analysis_util {

std::vector<CurvePoint> Thin(const std::vector<CurvePoint>& points, std::size_t max_points,
                             const std::vector<std::size_t>& keep) {
  if (points.empty()) return points;
  const std::size_t n = points.size();
  std::set<std::size_t> must = {0, n - 1};
  for (const std::size_t index : keep) {
    if (index < n) must.insert(index);
  }
  const std::size_t m = std::max({max_points, std::size_t{3}, must.size()});
  if (n <= m) return points;
  // An even grid of m indices (distinct, since n > m), then each index that must be kept replaces the nearest grid
  // index that need not be.
  std::set<std::size_t> chosen;
  for (std::size_t k = 0; k < m; ++k) {
    chosen.insert(static_cast<std::size_t>(
        std::llround(static_cast<double>(k) * static_cast<double>(n - 1) / static_cast<double>(m - 1))));
  }
  for (const std::size_t index : must) {
    if (chosen.contains(index)) continue;
    std::optional<std::size_t> nearest;
    for (const std::size_t candidate : chosen) {
      if (must.contains(candidate)) continue;
      const auto distance = [index](std::size_t c) { return c > index ? c - index : index - c; };
      if (!nearest || distance(candidate) < distance(*nearest)) nearest = candidate;
    }
    if (nearest) chosen.erase(*nearest);
    chosen.insert(index);
  }
  std::vector<CurvePoint> thinned;
  thinned.reserve(chosen.size());
  for (const std::size_t index : chosen) thinned.push_back(points[index]);
  return thinned;
}

std::optional<std::size_t> IndexAtStep(const std::vector<CurvePoint>& points, std::int64_t step) {
  const auto after = std::upper_bound(points.begin(), points.end(), step,
                                      [](std::int64_t s, const CurvePoint& point) { return s < point.step; });
  if (after == points.begin()) return std::nullopt;
  return static_cast<std::size_t>(std::distance(points.begin(), after) - 1);
}

}  // namespace dltune::analysis_util
