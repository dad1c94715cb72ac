#include "analysis_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <map>
#include <set>

namespace dltune::analysis_util {

std::vector<CurvePoint> ObjectiveSeries(const StudyData& data, std::uint64_t trial, const Objective& objective) {
  std::vector<CurvePoint> series;
  const auto it = data.evals.find(trial);
  if (it == data.evals.end()) return series;
  for (const EvalMeasurement& eval : it->second) {
    if (eval.split == objective.split && eval.metric == objective.metric && std::isfinite(eval.value)) {
      series.push_back({eval.step, eval.value});
    }
  }
  std::stable_sort(series.begin(), series.end(),
                   [](const CurvePoint& a, const CurvePoint& b) { return a.step < b.step; });
  return series;
}

const std::vector<TrainMeasurement>& TrainOf(const StudyData& data, std::uint64_t trial) {
  static const std::vector<TrainMeasurement> kNone;
  const auto it = data.train.find(trial);
  return it == data.train.end() ? kNone : it->second;
}

double Quantile(const std::vector<double>& sorted, double q) {
  assert(!sorted.empty());
  const double h = static_cast<double>(sorted.size() - 1) * q;
  const auto lo = static_cast<std::size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

double UnitPosition(const Param& param, double value) {
  if (param.scale == Scale::kLog) {
    return (std::log(value) - std::log(param.min)) / (std::log(param.max) - std::log(param.min));
  }
  return (value - param.min) / (param.max - param.min);
}

double FromUnitPosition(const Param& param, double u) {
  if (param.scale == Scale::kLog)
    return std::exp(std::log(param.min) + u * (std::log(param.max) - std::log(param.min)));
  return param.min + u * (param.max - param.min);
}

bool IsRange(const Param& param) { return param.kind == ParamKind::kFloat || param.kind == ParamKind::kInt; }

bool IsLearningRate(const Param& param) {
  const auto ends_with = [](const std::string& text, const std::string& suffix) {
    return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  return param.id.find("learning_rate") != std::string::npos || param.name.find("learning_rate") != std::string::npos ||
         param.name == "lr" || ends_with(param.name, "_lr");
}

std::string Num(double value) { return fmt::format("{:.3g}", value); }

std::string Percent(double fraction) { return fmt::format("{:.0f}%", 100.0 * fraction); }

std::string TrialList(const std::vector<std::uint64_t>& trials, std::size_t limit) {
  const std::size_t shown = std::min(trials.size(), limit);
  std::string text;
  for (std::size_t i = 0; i < shown; ++i) {
    if (i > 0) text += (i + 1 == shown && shown == trials.size()) ? " and " : ", ";
    text += fmt::format("{}", trials[i]);
  }
  if (shown < trials.size()) text += fmt::format(" and {} more", trials.size() - shown);
  return text;
}

std::size_t SubStudyCount(const StudyData& data) {
  std::set<std::size_t> indices;
  for (const auto& trial : data.trials) indices.insert(trial.substudy);
  return indices.size();
}

std::vector<std::vector<RankedTrial>> RankedBySubStudy(const StudyData& data) {
  const Direction direction = data.spec.objective.direction;
  std::map<std::size_t, std::vector<RankedTrial>> groups;
  for (const auto& trial : data.trials) {
    if (trial.state != TrialState::kCompleted) continue;
    if (const auto objective = BestObjectiveOf(data, trial)) groups[trial.substudy].push_back({&trial, *objective});
  }
  std::vector<std::vector<RankedTrial>> ranked;
  for (auto& [index, group] : groups) {
    std::stable_sort(group.begin(), group.end(), [direction](const RankedTrial& a, const RankedTrial& b) {
      if (IsBetter(a.objective, b.objective, direction)) return true;
      if (IsBetter(b.objective, a.objective, direction)) return false;
      return a.trial->number < b.trial->number;
    });
    ranked.push_back(std::move(group));
  }
  return ranked;
}

}  // namespace dltune::analysis_util
