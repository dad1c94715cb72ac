// What a study's trials recorded, read from its store, for the tests that compare two runs of a study.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "dltune/store/store.h"

namespace dltune::test {

// A trial's state and reason, its training losses ("step loss") and evaluations ("step split metric value") as
// lines that compare whole, and how many checkpoints it keeps.
struct TrialResult {
  TrialState state = TrialState::kPending;
  std::string reason;
  std::vector<std::string> losses;
  std::vector<std::string> evals;
  std::size_t checkpoints = 0;
};

// Study `study`'s trials in the store at `url`, by trial number.
inline std::map<std::uint64_t, TrialResult> StudyResults(const std::string& url, const std::string& study) {
  const auto store = OpenStore(url);
  std::map<std::uint64_t, TrialResult> results;
  for (const TrialRecord& trial : store->ListTrials(store->FindStudy(study)->id)) {
    TrialResult& result = results[trial.number];
    result.state = trial.state;
    result.reason = trial.reason;
    for (const TrainMeasurement& m : store->TrainSeries(trial.id)) {
      result.losses.push_back(std::to_string(m.step) + " " + (m.loss ? std::to_string(*m.loss) : "-"));
    }
    for (const EvalMeasurement& e : store->EvalSeries(trial.id)) {
      result.evals.push_back(std::to_string(e.step) + " " + e.split + " " + e.metric + " " + std::to_string(e.value));
    }
    result.checkpoints = store->ListCheckpoints(trial.id).size();
  }
  return results;
}

}  // namespace dltune::test
