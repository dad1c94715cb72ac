#include "analyze/pareto.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "analysis_util.h"
#include "store/trial_resources.h"

namespace dltune {
namespace {

bool Positive(double value) { return std::isfinite(value) && value > 0; }

// The median of a per-step measurement over the trial's recorded steps with a positive value, after the first fifth
// (at least 1) of them when there are 2 or more.
std::optional<double> StepMedian(const StudyData& data, std::uint64_t trial,
                                 std::optional<double> TrainMeasurement::*field) {
  std::vector<double> values;
  for (const TrainMeasurement& m : analysis_util::TrainOf(data, trial)) {
    if ((m.*field) && Positive(*(m.*field))) values.push_back(*(m.*field));
  }
  if (values.empty()) return std::nullopt;
  const std::size_t warmup = values.size() >= 2 ? std::max<std::size_t>(1, values.size() / 5) : 0;
  values.erase(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(warmup));
  std::sort(values.begin(), values.end());
  return analysis_util::Quantile(values, 0.5);
}

std::optional<double> ParameterCount(const std::string& resources) {
  const nlohmann::json record = nlohmann::json::parse(resources, nullptr, /*allow_exceptions=*/false);
  if (!record.is_object()) return std::nullopt;
  const auto it = record.find("parameter_count");
  if (it == record.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// Trials that are points of the view: completed with a best objective, or infeasible.
bool Placed(const StudyData& data, const TrialRecord& trial) {
  if (trial.state == TrialState::kInfeasible) return true;
  return trial.state == TrialState::kCompleted && BestObjectiveOf(data, trial).has_value();
}

// Marks the front of `points` (completed ones only) and returns its trials, cheapest first.
std::vector<std::uint64_t> MarkFront(std::vector<ParetoPoint>& points, const ParetoCostInfo& cost,
                                     Direction direction) {
  // Both measures turned into "lower is better", so that one sweep over ascending cost finds the front.
  struct Key {
    double cost, objective;
    std::uint64_t trial;
    ParetoPoint* point;
  };
  std::vector<Key> keys;
  for (ParetoPoint& point : points) {
    if (point.infeasible || !point.objective) continue;
    keys.push_back({cost.higher_is_better ? -point.cost : point.cost,
                    direction == Direction::kMaximize ? -*point.objective : *point.objective, point.trial, &point});
  }
  std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
    return std::tie(a.cost, a.objective, a.trial) < std::tie(b.cost, b.objective, b.trial);
  });
  std::vector<std::uint64_t> front;
  double best = std::numeric_limits<double>::infinity();  // the best objective of every cheaper trial
  for (std::size_t i = 0; i < keys.size();) {
    std::size_t end = i;
    while (end < keys.size() && keys[end].cost == keys[i].cost) ++end;
    // Within a group of equal cost the best objective comes first; it is on the front unless a cheaper trial was at
    // least as good, and so is every trial of the group that equals it.
    const double group_best = keys[i].objective;
    if (group_best < best) {
      for (std::size_t j = i; j < end && keys[j].objective == group_best; ++j) {
        keys[j].point->on_front = true;
        front.push_back(keys[j].trial);
      }
      best = group_best;
    }
    i = end;
  }
  return front;
}

}  // namespace

const std::vector<ParetoCostInfo>& ParetoCosts() {
  static const std::vector<ParetoCostInfo> kCosts = {
      {ParetoCost::kTrainingSeconds, "training_seconds", "training seconds", false,
       "no trial recorded the time of its training steps (a trial program's timing line; dltune's trainer sends it)"},
      {ParetoCost::kSecondsPerStep, "seconds_per_step", "seconds per step", false,
       "no trial recorded the time of its steps (step_time of its training steps)"},
      {ParetoCost::kExamplesPerSecond, "examples_per_second", "examples per second", true,
       "no trial recorded its examples per second (examples_per_second of its training steps)"},
      {ParetoCost::kParameters, "parameters", "parameter count", false,
       "no trial recorded its model's parameter count (parameter_count in its resources record: dltune's trainer does "
       "not record it yet)"},
      {ParetoCost::kPeakGpuMemory, "peak_gpu_memory", "peak GPU memory", false,
       "no trial recorded a GPU's peak memory (a study on the CPU has none)"},
  };
  return kCosts;
}

const ParetoCostInfo& CostInfo(ParetoCost cost) { return ParetoCosts().at(static_cast<std::size_t>(cost)); }

std::optional<ParetoCost> ParseParetoCost(std::string_view name) {
  for (const ParetoCostInfo& info : ParetoCosts()) {
    if (name == info.name) return info.cost;
  }
  return std::nullopt;
}

std::optional<double> TrialCost(const StudyData& data, const TrialRecord& trial, ParetoCost cost) {
  std::optional<double> value;
  switch (cost) {
    case ParetoCost::kTrainingSeconds:
      if (const auto it = trial.time_split.find("train"); it != trial.time_split.end()) value = it->second;
      break;
    case ParetoCost::kSecondsPerStep: value = StepMedian(data, trial.number, &TrainMeasurement::step_time); break;
    case ParetoCost::kExamplesPerSecond:
      value = StepMedian(data, trial.number, &TrainMeasurement::examples_per_second);
      break;
    case ParetoCost::kParameters: value = ParameterCount(trial.resources); break;
    case ParetoCost::kPeakGpuMemory:
      if (const auto usage = ParseGpuUsage(trial.resources)) value = usage->peak_memory_bytes;
      break;
  }
  if (value && !Positive(*value)) return std::nullopt;
  return value;
}

ParetoView AnalyzePareto(const StudyData& data, ParetoCost cost) {
  const ParetoCostInfo& info = CostInfo(cost);
  ParetoView view{.cost = cost};
  std::map<std::size_t, ParetoSubStudy> by_index;
  for (const TrialRecord& trial : data.trials) {
    ParetoSubStudy& sub = by_index[trial.substudy];
    sub.index = trial.substudy;
    sub.substudy = trial.substudy_label;
    if (!Placed(data, trial)) {
      ++sub.unfinished;
      continue;
    }
    const std::optional<double> value = TrialCost(data, trial, cost);
    if (!value) {
      ++sub.without_cost;
      continue;
    }
    view.recorded = true;
    const bool infeasible = trial.state == TrialState::kInfeasible;
    sub.points.push_back({.trial = trial.number,
                          .cost = *value,
                          .objective = infeasible ? std::nullopt : BestObjectiveOf(data, trial),
                          .infeasible = infeasible});
  }
  for (auto& [index, sub] : by_index) {
    std::sort(sub.points.begin(), sub.points.end(),
              [](const ParetoPoint& a, const ParetoPoint& b) { return a.trial < b.trial; });
    sub.front = MarkFront(sub.points, info, data.spec.objective.direction);
    view.substudies.push_back(std::move(sub));
  }
  return view;
}

std::vector<ParetoCost> RecordedCosts(const StudyData& data) {
  std::vector<ParetoCost> costs;
  for (const ParetoCostInfo& info : ParetoCosts()) {
    const bool any = std::any_of(data.trials.begin(), data.trials.end(), [&](const TrialRecord& trial) {
      return Placed(data, trial) && TrialCost(data, trial, info.cost).has_value();
    });
    if (any) costs.push_back(info.cost);
  }
  return costs;
}

std::string NotRecordedText(const StudyData& data, ParetoCost cost) {
  if (cost == ParetoCost::kPeakGpuMemory) {
    const bool on_gpus = std::any_of(data.trials.begin(), data.trials.end(), [](const TrialRecord& trial) {
      return ParseGpuUsage(trial.resources).has_value();
    });
    if (on_gpus) return "no trial recorded a GPU's peak memory (its trials ran on GPUs whose memory NVML did not give)";
  }
  return CostInfo(cost).not_recorded;
}

}  // namespace dltune
