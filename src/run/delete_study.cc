#include "run/delete_study.h"

#include <fstream>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/study/study_spec.h"
#include "run/trial_setup.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"

namespace dltune {

bool StudyDeletion::HasResults() const {
  return trials.Count(TrialState::kCompleted) + trials.Count(TrialState::kInfeasible) > 0 || launches > 0;
}

std::string StudyDeletion::Describe() const {
  std::string text = fmt::format(
      "study {}: {} trial{} ({} completed, {} infeasible, {} failed, {} running, {} pending or stopped), {} kept "
      "checkpoint record{}, {} note{} or decision{}, {} evaluation{}, {} launch{}\n",
      study.name, trials.made, trials.made == 1 ? "" : "s", trials.Count(TrialState::kCompleted),
      trials.Count(TrialState::kInfeasible), trials.Count(TrialState::kFailed), trials.Count(TrialState::kRunning),
      trials.Count(TrialState::kPending) + trials.Count(TrialState::kStopped), checkpoints, checkpoints == 1 ? "" : "s",
      notes, notes == 1 ? "" : "s", notes == 1 ? "" : "s", evaluations, evaluations == 1 ? "" : "s", launches,
      launches == 1 ? "" : "es");
  text += directory.empty() ? "its files: none of its own to remove\n"
                            : fmt::format("its files: {} (trial directories, checkpoints, logs, exported models)\n",
                                          directory.string());
  if (!children.empty()) {
    text += fmt::format(
        "studies planned from it keep their records, their parent shown as not here (a study made later under "
        "the name {} is not their parent): {}\n",
        study.name, fmt::join(children, ", "));
  }
  return text;
}

StudyDeletion PlanStudyDeletion(Store& store, const std::string& name) {
  StudyDeletion deletion;
  deletion.study = RequireStudy(store, name);
  const std::int64_t id = deletion.study.id;
  deletion.trials = store.CountTrials(id);
  for (const TrialRecord& trial : store.ListTrials(id)) {
    for (const CheckpointRecord& checkpoint : store.ListCheckpoints(trial.id)) {
      deletion.checkpoints += checkpoint.deleted ? 0 : 1;
    }
  }
  deletion.notes = static_cast<std::int64_t>(store.ListNotes(id).size());
  deletion.evaluations = static_cast<std::int64_t>(store.ListEvaluations(id).size());
  deletion.launches = static_cast<std::int64_t>(store.ListLaunches(id).size());
  for (const StudyRecord& other : store.ListStudies()) {
    if (IsParentOf(deletion.study, other)) deletion.children.push_back(other.name);
  }
  try {
    const StudySpec spec = RecordedSpec(deletion.study);
    const std::filesystem::path dir = StudyDirectory(spec, deletion.study);
    std::ifstream in(dir / "study.json");
    const auto recorded = nlohmann::json::parse(in, nullptr, false);
    if (recorded.is_object() && recorded.value("uid", "") == deletion.study.uid) deletion.directory = dir;
  } catch (const Error&) {
    // A spec this dltune cannot read: its directory is not known, and nothing is removed.
  }
  return deletion;
}

void DeleteStudy(Store& store, const StudyDeletion& deletion, bool force, bool remove_files) {
  const std::string& name = deletion.study.name;
  if (deletion.HasResults() && !force) {
    throw Error(fmt::format(
        "study '{}' has results ({} completed, {} infeasible trials, {} launches): pass --force to delete them too",
        name, deletion.trials.Count(TrialState::kCompleted), deletion.trials.Count(TrialState::kInfeasible),
        deletion.launches));
  }
  if (deletion.trials.Count(TrialState::kRunning) > 0 && !force) {
    throw Error(fmt::format("study '{}' has {} running trial{}: stop its runs first (or pass --force when their "
                            "workers are gone)",
                            name, deletion.trials.Count(TrialState::kRunning),
                            deletion.trials.Count(TrialState::kRunning) == 1 ? "" : "s"),
                ErrorKind::kConflict);
  }
  store.DeleteStudy(deletion.study.id);
  if (!remove_files || deletion.directory.empty()) return;
  std::error_code error;
  RemoveTreeInUse(deletion.directory, error);  // runners still running its trials stop them when they see it gone
  if (error) {
    throw IoError(fmt::format("study '{}' is deleted from the store, but {} could not be removed: {}", name,
                              deletion.directory.string(), error.message()));
  }
}

}  // namespace dltune
