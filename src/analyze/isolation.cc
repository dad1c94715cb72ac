// Isolation plots: the best trial per scientific value (or bucket), the nuisance params optimized away.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"
#include "dltune/analyze/trial_variance.h"

namespace dltune {
namespace {

using analysis_util::Num;

// The bucket of `value` among `buckets` equal buckets of the param's (log) range; values at max go to the last one.
std::optional<std::size_t> BucketOf(const Param& param, double value, int buckets) {
  if (!(value >= param.min && value <= param.max)) return std::nullopt;
  const double u = analysis_util::UnitPosition(param, value);
  const auto index = static_cast<std::size_t>(std::max(0.0, std::floor(u * buckets)));
  return std::min(index, static_cast<std::size_t>(buckets - 1));
}

IsolationPlot EmptyPlot(const Param& param, int buckets) {
  IsolationPlot plot;
  plot.param_id = param.id;
  plot.param_name = param.name;
  if (!analysis_util::IsRange(param)) {
    plot.categorical = true;
    for (std::size_t i = 0; i < param.values.size(); ++i) {
      plot.points.push_back({.label = FormatValue(param.values[i]), .position = static_cast<double>(i)});
    }
    return plot;
  }
  plot.log_scale = param.scale == Scale::kLog;
  for (int b = 0; b < buckets; ++b) {
    const double lower = analysis_util::FromUnitPosition(param, static_cast<double>(b) / buckets);
    const double upper = b + 1 == buckets ? param.max : analysis_util::FromUnitPosition(param, (b + 1.0) / buckets);
    const double lower_edge = b == 0 ? param.min : lower;
    const double middle = plot.log_scale ? std::sqrt(lower_edge * upper) : (lower_edge + upper) / 2;
    plot.points.push_back({.label = fmt::format("[{}, {}{}", Num(lower_edge), Num(upper), b + 1 == buckets ? "]" : ")"),
                           .position = middle,
                           .lower = lower_edge,
                           .upper = upper});
  }
  return plot;
}

// The point of `plot` that `params` fall on, if any.
std::optional<std::size_t> PointOf(const IsolationPlot& plot, const Param& param, const Assignment& params,
                                   int buckets) {
  const auto value = params.find(param.id);
  if (value == params.end()) return std::nullopt;
  if (plot.categorical) {
    for (std::size_t i = 0; i < param.values.size(); ++i) {
      if (SameValue(param.values[i], value->second)) return i;
    }
    return std::nullopt;
  }
  if (const auto number = NumericValue(value->second)) return BucketOf(param, *number, buckets);
  return std::nullopt;
}

}  // namespace

std::vector<IsolationPlot> IsolationPlots(const StudyData& data, int buckets) {
  std::vector<IsolationPlot> plots;
  if (!data.spec.space) return plots;
  buckets = std::max(buckets, 1);
  const Direction direction = data.spec.objective.direction;
  const bool replicated = data.spec.replicas > 1;
  const TrialVariance variance = replicated ? AnalyzeTrialVariance(data) : TrialVariance{};
  for (const Param* param : data.spec.space->WithRole(Role::kScientific)) {
    IsolationPlot plot = EmptyPlot(*param, buckets);
    for (const TrialRecord& trial : data.trials) {
      const auto index = PointOf(plot, *param, trial.params, buckets);
      if (!index) continue;
      IsolationPoint& point = plot.points[*index];
      ++point.trials;
      if (trial.state != TrialState::kCompleted) continue;
      ++point.completed;
      if (replicated) continue;
      const auto objective = BestObjectiveOf(data, trial);
      if (objective && (!point.best || IsBetter(*objective, *point.best, direction))) {
        point.best = objective;
        point.best_trial = trial.number;
      }
    }
    // With replicas a point is a configuration's mean over its seeds, never one lucky seed.
    for (const ConfigurationReplicas& c : variance.configurations) {
      const auto index = PointOf(plot, *param, c.params, buckets);
      if (!index || c.values.empty()) continue;
      IsolationPoint& point = plot.points[*index];
      if (point.best && !IsBetter(c.stats.mean, *point.best, direction)) continue;
      point.best = c.stats.mean;
      point.best_trial = c.median_trial;
      point.replicas = c.stats.n;
      point.low = c.stats.low;
      point.high = c.stats.high;
    }
    plots.push_back(std::move(plot));
  }
  return plots;
}

}  // namespace dltune
