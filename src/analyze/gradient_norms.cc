// Gradient norms for "Gradient clipping": per-trial curves, a log-scale histogram, the 90th percentile and the
// share of clipped steps.
#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

std::vector<HistogramBin> LogHistogram(const std::vector<double>& positive, int bins) {
  std::vector<HistogramBin> histogram;
  if (positive.empty()) return histogram;
  const auto [lo_it, hi_it] = std::minmax_element(positive.begin(), positive.end());
  const double lo = *lo_it, hi = *hi_it;
  if (lo == hi) {
    histogram.push_back({lo / 1.1, lo * 1.1, static_cast<std::int64_t>(positive.size())});
    return histogram;
  }
  bins = std::max(bins, 1);
  std::vector<double> edges(static_cast<std::size_t>(bins) + 1);
  const double log_lo = std::log(lo), log_hi = std::log(hi);
  for (int k = 0; k <= bins; ++k) {
    edges[static_cast<std::size_t>(k)] = std::exp(log_lo + (log_hi - log_lo) * k / bins);
  }
  edges.front() = lo;
  edges.back() = hi;
  for (int k = 0; k < bins; ++k) {
    histogram.push_back({edges[static_cast<std::size_t>(k)], edges[static_cast<std::size_t>(k) + 1], 0});
  }
  for (const double v : positive) {
    const auto above = std::upper_bound(edges.begin(), edges.end(), v);
    const auto index = std::clamp<std::ptrdiff_t>(std::distance(edges.begin(), above) - 1, 0, bins - 1);
    ++histogram[static_cast<std::size_t>(index)].count;
  }
  return histogram;
}

}  // namespace

GradientNorms GradientNormAnalysis(const StudyData& data, int bins, std::size_t max_points) {
  GradientNorms result;
  const std::vector<std::uint64_t> top = TopTrials(data, 3);
  const std::set<std::uint64_t> highlighted(top.begin(), top.end());
  std::vector<double> pooled, positive;
  std::int64_t flagged = 0, clipped = 0;
  for (const TrialRecord& trial : data.trials) {
    std::vector<CurvePoint> norms;
    const bool pool = trial.state != TrialState::kInfeasible;
    for (const TrainMeasurement& m : analysis_util::TrainOf(data, trial.number)) {
      if (m.grad_norm && std::isfinite(*m.grad_norm) && *m.grad_norm >= 0) {
        norms.push_back({m.step, *m.grad_norm});
        if (pool) {
          pooled.push_back(*m.grad_norm);
          if (*m.grad_norm > 0) positive.push_back(*m.grad_norm);
        }
      }
      if (pool && m.clipped) {
        ++flagged;
        if (*m.clipped) ++clipped;
      }
    }
    if (norms.empty()) continue;
    std::stable_sort(norms.begin(), norms.end(),
                     [](const CurvePoint& a, const CurvePoint& b) { return a.step < b.step; });
    const std::optional<std::int64_t> best_step = BestStepOf(data, trial);
    std::vector<std::size_t> keep;
    if (best_step) {
      if (const auto index = analysis_util::IndexAtStep(norms, *best_step)) keep.push_back(*index);
    }
    const auto largest = std::max_element(norms.begin(), norms.end(),
                                          [](const CurvePoint& a, const CurvePoint& b) { return a.value < b.value; });
    keep.push_back(static_cast<std::size_t>(std::distance(norms.begin(), largest)));
    result.curves.push_back({.trial = trial.number,
                             .substudy = trial.substudy_label,
                             .state = trial.state,
                             .series = "grad_norm",
                             .source = CurveSource::kTrainingSteps,
                             .points = analysis_util::Thin(norms, max_points, keep),
                             .highlighted = highlighted.contains(trial.number),
                             .best_step = best_step});
  }
  result.steps = static_cast<std::int64_t>(pooled.size());
  if (!pooled.empty()) {
    std::sort(pooled.begin(), pooled.end());
    result.p90 = analysis_util::Quantile(pooled, 0.9);
  }
  result.histogram = LogHistogram(positive, bins);
  if (flagged > 0) result.clipped_fraction = static_cast<double>(clipped) / static_cast<double>(flagged);
  return result;
}

}  // namespace dltune
