#include <algorithm>
#include <cmath>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {

using analysis_util::Better;

ObjectiveRef ObjectiveOf(const StudySpec& spec) {
  ObjectiveRef objective;
  const std::string& metric = spec.objective.metric;
  const auto slash = metric.find('/');
  objective.split = slash == std::string::npos ? "valid" : metric.substr(0, slash);
  objective.metric = slash == std::string::npos ? metric : metric.substr(slash + 1);
  objective.direction = spec.objective.direction;
  return objective;
}

namespace {

// The trial's best evaluation of the objective (the earliest on ties), if any.
std::optional<CurvePoint> BestEvaluation(const StudyData& data, const TrialRecord& trial) {
  const ObjectiveRef objective = ObjectiveOf(data.spec);
  std::optional<CurvePoint> best;
  for (const CurvePoint& point : analysis_util::ObjectiveSeries(data, trial.number, objective)) {
    if (!best || Better(point.value, best->value, objective.direction)) best = point;
  }
  return best;
}

}  // namespace

std::optional<double> BestObjectiveOf(const StudyData& data, const TrialRecord& trial) {
  if (trial.best_value && std::isfinite(*trial.best_value)) return trial.best_value;
  if (const auto best = BestEvaluation(data, trial)) return best->value;
  return std::nullopt;
}

std::optional<std::int64_t> BestStepOf(const StudyData& data, const TrialRecord& trial) {
  if (trial.best_step) return trial.best_step;
  if (const auto best = BestEvaluation(data, trial)) return best->step;
  return std::nullopt;
}

std::vector<std::uint64_t> TopTrials(const StudyData& data, int count) {
  std::vector<std::uint64_t> top;
  for (const auto& group : analysis_util::RankedBySubStudy(data)) {
    const std::size_t n = std::min(group.size(), static_cast<std::size_t>(std::max(count, 0)));
    for (std::size_t i = 0; i < n; ++i) top.push_back(group[i].trial->number);
  }
  return top;
}

}  // namespace dltune
