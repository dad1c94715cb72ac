// Made-up studies for the analyze module's tests: a spec parsed from YAML, trials and measurements by hand.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune::testing {

inline StudyData MakeData(const std::string& yaml) {
  StudyData data;
  data.spec = ParseStudySpec(yaml, "study.yaml");
  data.study.name = data.spec.name;
  data.study.spec_text = yaml;
  return data;
}

// Adds a trial; completed trials get `best` as their best value (best_step too when given).
inline TrialRecord& AddTrial(StudyData& data, std::uint64_t number, TrialState state, Assignment params,
                             std::optional<double> best = std::nullopt, std::optional<std::int64_t> best_step = {},
                             std::size_t substudy = 0, const std::string& label = "all") {
  TrialRecord trial;
  trial.id = static_cast<std::int64_t>(number) + 1;
  trial.number = number;
  trial.substudy = substudy;
  trial.substudy_label = label;
  trial.params = std::move(params);
  trial.state = state;
  trial.best_value = best;
  trial.best_step = best_step;
  data.trials.push_back(std::move(trial));
  return data.trials.back();
}

// Evaluations of one split/metric at (step, value) pairs.
inline void AddEvals(StudyData& data, std::uint64_t trial, const std::string& split, const std::string& metric,
                     const std::vector<std::pair<std::int64_t, double>>& points) {
  for (const auto& [step, value] : points) {
    data.evals[trial].push_back({.step = step, .split = split, .metric = metric, .value = value, .examples = 100});
  }
}

// Training losses at steps 1..n.
inline void AddLosses(StudyData& data, std::uint64_t trial, const std::vector<double>& losses) {
  for (std::size_t i = 0; i < losses.size(); ++i) {
    data.train[trial].push_back({.step = static_cast<std::int64_t>(i) + 1, .loss = losses[i]});
  }
}

}  // namespace dltune::testing
