#include <algorithm>
#include <cmath>
#include <set>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {

namespace {

// The trial's best evaluation of the objective (the earliest on ties), if any.
std::optional<CurvePoint> BestEvaluation(const StudyData& data, const TrialRecord& trial) {
  const Objective objective = data.spec.objective;
  std::optional<CurvePoint> best;
  for (const CurvePoint& point : analysis_util::ObjectiveSeries(data, trial.number, objective)) {
    if (!best || IsBetter(point.value, best->value, objective.direction)) best = point;
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

std::vector<std::uint64_t> CurveTrials(const StudyData& data, std::size_t limit) {
  std::vector<std::uint64_t> chosen;
  std::size_t with_measurements = 0;
  for (const TrialRecord& trial : data.trials) {
    if (data.evals.contains(trial.number) || data.train.contains(trial.number)) ++with_measurements;
  }
  if (with_measurements <= limit) {
    for (const TrialRecord& trial : data.trials) chosen.push_back(trial.number);
    return chosen;
  }
  // Running trials first: a live view must show what is training now.
  for (const TrialRecord& trial : data.trials) {
    if (trial.state == TrialState::kRunning && chosen.size() < limit) chosen.push_back(trial.number);
  }
  // Then the sub-studies' best trials, taken in rounds (each sub-study's next best) so every sub-study gets a share.
  const auto groups = analysis_util::RankedBySubStudy(data);
  for (std::size_t rank = 0; chosen.size() < limit; ++rank) {
    bool any = false;
    for (const auto& group : groups) {
      if (rank >= group.size() || chosen.size() >= limit) continue;
      any = true;
      const std::uint64_t number = group[rank].trial->number;
      if (std::find(chosen.begin(), chosen.end(), number) == chosen.end()) chosen.push_back(number);
    }
    if (!any) break;
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

StudyData SubsetOfTrials(const StudyData& data, const std::vector<std::uint64_t>& numbers) {
  StudyData subset{.study = data.study, .spec = data.spec, .trials = {}, .evals = {}, .train = {}};
  const std::set<std::uint64_t> wanted(numbers.begin(), numbers.end());
  for (const TrialRecord& trial : data.trials) {
    if (!wanted.contains(trial.number)) continue;
    subset.trials.push_back(trial);
    if (const auto it = data.evals.find(trial.number); it != data.evals.end()) subset.evals.insert(*it);
    if (const auto it = data.train.find(trial.number); it != data.train.end()) subset.train.insert(*it);
  }
  return subset;
}

}  // namespace dltune
