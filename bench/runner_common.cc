#include "runner_common.h"

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "core/clock.h"
#include "dltune/store/store.h"
#include "store/tracking.h"

namespace dltune::bench {

namespace fs = std::filesystem;

double Timed(const std::string& command) {
  const double start = SteadySeconds();
  const int status = std::system(command.c_str());
  const double elapsed = SteadySeconds() - start;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "failed (status %d): %s\n", status, command.c_str());
    return -1;
  }
  return elapsed;
}

std::string Python() {
  if (const char* python = std::getenv("DLTUNE_PYTHON")) return python;
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

std::map<std::string, double> BestPerSubstudy(const fs::path& db, const std::string& study_name) {
  const auto store = OpenStore("sqlite://" + db.string(), false);
  const auto study = store->FindStudy(study_name);
  std::map<std::string, double> best;
  if (!study) return best;
  const auto summary = SummarizeStudy(*store, *study);
  for (const auto& b : summary.best_per_substudy)
    best[b.substudy_label.substr(b.substudy_label.find('=') + 1)] = b.value;
  return best;
}

StudyRecordSummary ReadStudy(const fs::path& db, const std::string& study_name) {
  StudyRecordSummary summary;
  const auto store = OpenStore("sqlite://" + db.string(), false);
  const auto study = store->FindStudy(study_name);
  if (!study) return summary;
  const auto trials = store->ListTrials(study->id);
  summary.trials = static_cast<int>(trials.size());
  double first_start = 0, last_end = 0;
  for (const auto& trial : trials) {
    for (const auto& [phase, seconds] : trial.time_split) summary.phase[phase] += seconds;
    if (trial.started_at && (first_start == 0 || *trial.started_at < first_start)) first_start = *trial.started_at;
    if (trial.ended_at) last_end = std::max(last_end, *trial.ended_at);
    if (trial.started_at && trial.ended_at) summary.trial_seconds_summed += *trial.ended_at - *trial.started_at;
  }
  summary.trials_seconds = last_end > first_start ? last_end - first_start : 0;
  std::map<std::uint64_t, std::int64_t> last_step;
  for (const auto& row : store->StudyTraining(study->id)) {
    last_step[row.trial_number] = std::max(last_step[row.trial_number], row.train.step);
  }
  for (const auto& [trial, step] : last_step) summary.work.train_steps += static_cast<double>(step);
  // Every metric of a split's evaluation has a row; its examples count once.
  for (const auto& row : store->StudyEvaluations(study->id)) {
    if (row.eval.metric == "error_rate") summary.work.eval_examples += static_cast<double>(row.eval.examples);
  }
  return summary;
}

}  // namespace dltune::bench
