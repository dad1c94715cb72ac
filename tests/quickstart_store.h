// A store holding the quickstart study as a finished run leaves it, for tests and benchmarks of the commands that
// read a store (show, studies, next, export).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune::test {

// Creates the quickstart study (examples/quickstart.yaml) in the store at `url` with 4 trials: trial 0 (nesterov)
// completed at 0.2, trial 1 (adam) at 0.15, each with a train step, two evaluations and a best checkpoint; trial 2
// infeasible (its loss NaN at step 37); trial 3 waiting.
inline void FillQuickstartStore(const std::string& url) {
  auto store = OpenStore(url);
  const StudySpec spec = LoadStudySpec(DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
  const StudyRecord study = store->CreateStudy({.name = spec.name,
                                                .description = spec.description,
                                                .spec_text = spec.text,
                                                .spec_hash = "0123456789abcdef",
                                                .spec_path = "examples/quickstart.yaml",
                                                .command_line = "dltune run examples/quickstart.yaml",
                                                .dltune_version = "0.1.0"});
  const StudyPlan plan(spec);
  std::vector<NewTrial> trials;
  for (std::uint64_t n = 0; n < 4; ++n) {
    const PlannedTrial t = plan.Trial(n);
    trials.push_back({n, t.substudy, plan.SubStudyAt(t.substudy).label, t.params, 1000 + n});
  }
  store->AddTrials(study.id, trials);
  const double best[] = {0.2, 0.15};
  for (int i = 0; i < 2; ++i) {
    const auto claim = store->ClaimNext(study.id, "worker-a");
    MeasurementBatch batch;
    batch.train.push_back({.step = 100, .loss = 0.9, .learning_rate = 0.01});
    batch.evals.push_back({1000, "valid", "error_rate", best[i] + 0.05, 10000});
    batch.evals.push_back({2000, "valid", "error_rate", best[i], 10000});
    batch.best_step = 2000;
    batch.best_value = best[i];
    store->Record(claim->second, batch);
    store->AddCheckpoint(claim->second, {.step = 2000,
                                         .path = "/ckpt/t" + std::to_string(i) + "/2000",
                                         .objective = best[i],
                                         .checksum = "abc",
                                         .pool = CheckpointPool::kBest});
    store->Finish(claim->second, {.state = TrialState::kCompleted, .final_value = best[i]});
  }
  const auto diverged = store->ClaimNext(study.id, "worker-b");
  store->Finish(diverged->second, {.state = TrialState::kInfeasible, .reason = "loss is NaN at step 37"});
}

}  // namespace dltune::test
