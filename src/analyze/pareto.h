// Quality beside cost ("resource consumption per step x steps"): per sub-study, the Pareto front of the trials' best
// objective against one cost the trials recorded. Exploration is non-adaptive, so the front is a view computed after
// the fact over any recorded cost; the objective stays the one metric the study optimizes. Pure functions of a study's
// records; docs/analyses.md ("Quality against cost") is the user's reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune {

enum class ParetoCost { kTrainingSeconds, kSecondsPerStep, kExamplesPerSecond, kParameters, kPeakGpuMemory };

struct ParetoCostInfo {
  ParetoCost cost = ParetoCost::kTrainingSeconds;
  const char* name;          // "training_seconds": what `dltune show --pareto` and the JSON name it
  const char* label;         // "training seconds": as people read it
  bool higher_is_better;     // examples per second: more of it is cheaper
  const char* not_recorded;  // why a study may have none: "no trial recorded ..."
};
// Every cost, in the order above (training seconds, the default, first).
const std::vector<ParetoCostInfo>& ParetoCosts();
const ParetoCostInfo& CostInfo(ParetoCost cost);
// The cost named `name` (ParetoCostInfo::name); nullopt for any other text.
std::optional<ParetoCost> ParseParetoCost(std::string_view name);

// What trial `trial` recorded of `cost`, nullopt when it recorded none (or nothing finite and positive):
// - training seconds: its time split's "train" phase (the training steps, over every attempt);
// - seconds per step, examples per second: the median over its recorded training steps with a positive value, after
//   the first fifth (at least 1) of them when there are 2 or more (allocation and start-up);
// - parameters: its resources record's "parameter_count";
// - peak GPU memory: its resources record's GPU peak memory, in bytes.
std::optional<double> TrialCost(const StudyData& data, const TrialRecord& trial, ParetoCost cost);

struct ParetoPoint {
  std::uint64_t trial = 0;
  double cost = 0;
  std::optional<double> objective;  // its best objective; absent for an infeasible trial
  bool infeasible = false;          // drawn, marked, never on the front
  bool on_front = false;
};

struct ParetoSubStudy {
  std::size_t index = 0;
  std::string substudy;              // its label
  std::vector<ParetoPoint> points;   // by trial number
  std::vector<std::uint64_t> front;  // the trials on the front, cheapest first (equal costs: by trial number)
  int without_cost = 0;              // completed (with a best objective) or infeasible trials without the cost
  int unfinished = 0;                // pending, running, stopped, failed or without a best objective: left out
};

struct ParetoView {
  ParetoCost cost = ParetoCost::kTrainingSeconds;
  bool recorded = false;                   // some completed or infeasible trial recorded the cost
  std::vector<ParetoSubStudy> substudies;  // by sub-study index, those with trials
};

// The Pareto front of each sub-study: its points are its completed trials with a best objective and the cost, and its
// infeasible trials with the cost (marked, without an objective). A completed trial is on the front when no other
// completed trial of the sub-study is at least as good in both (the objective by its direction, the cost by its own:
// lower, or higher for examples per second) and better in one: of trials with equal cost and objective all are on it.
ParetoView AnalyzePareto(const StudyData& data, ParetoCost cost);

// The costs some completed or infeasible trial of the study recorded, in ParetoCosts order.
std::vector<ParetoCost> RecordedCosts(const StudyData& data);

// Why the study has no `cost`: the cost's not_recorded text, more precise where the records say more (trials on GPUs
// whose peak memory NVML did not give).
std::string NotRecordedText(const StudyData& data, ParetoCost cost);

}  // namespace dltune
