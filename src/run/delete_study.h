// Deleting a study: its records and its trial directories, so that its name can be used again (a study refuses a
// changed spec under its name). A study with results — completed or infeasible trials, launches — is deleted only when
// asked with force, and what goes is said first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "dltune/store/store.h"

namespace dltune {

// What deleting a study removes.
struct StudyDeletion {
  StudyRecord study;
  TrialCounts trials;
  std::int64_t checkpoints = 0;  // kept (not deleted) checkpoint records
  std::int64_t notes = 0;        // notes and decisions
  std::int64_t evaluations = 0;  // evaluations of chosen checkpoints, launches' included
  std::int64_t launches = 0;
  std::vector<std::string> children;  // studies planned from it: they keep their records, their parent named only
  // Its trial directories (<run_dir>/<uid>) when they exist and are the study's own (their study.json names it);
  // empty otherwise: nothing else is ever removed.
  std::filesystem::path directory;

  // Completed or infeasible trials, or launches: what a study is kept for.
  bool HasResults() const;
  // Lines that say what goes, for a person to confirm.
  std::string Describe() const;
};

// What deleting study `name` would remove; nothing is changed. Throws Error for an unknown study.
StudyDeletion PlanStudyDeletion(Store& store, const std::string& name);

// Deletes the study's records (Store::DeleteStudy) and, with `remove_files`, its directory. Refuses (Error) a study
// with results or with running trials unless `force`. Throws IoError when the directory cannot be removed (the
// records are deleted by then: run it again, or remove the directory by hand).
void DeleteStudy(Store& store, const StudyDeletion& deletion, bool force, bool remove_files);

}  // namespace dltune
