#include "dltune/report/study_data.h"

#include <fmt/format.h>

#include "dltune/analyze/diagnostics.h"
#include "store/tracking.h"

namespace dltune {

StudyData LoadStudyData(Store& store, const std::string& name, bool with_measurements) {
  StudyData data;
  data.study = RequireStudy(store, name);
  data.spec = ParseStudySpec(data.study.spec_text, data.study.spec_path.empty() ? name : data.study.spec_path);
  if (const std::int64_t made = store.CountTrials(data.study.id).made; made > kMaxLoadedTrials) {
    throw Error(
        fmt::format("study '{}' has {} trials, more than the {} its report, dashboard page and checklist "
                    "read whole; dltune show {} lists its best trials, dltune export {} every one",
                    name, made, kMaxLoadedTrials, name, name));
  }
  data.trials = store.ListTrials(data.study.id);
  // A planned study's parent trials, for comparing against them; a parent no longer in this store leaves none.
  if (!data.spec.procedure.from_trials.empty()) {
    if (const auto parent = store.FindStudy(data.spec.procedure.parent)) {
      for (const ParentTrial& from : data.spec.procedure.from_trials) {
        if (auto trial = store.FindTrial(parent->id, from.trial)) data.parent_trials.push_back(std::move(*trial));
      }
    }
  }
  data.notes = store.ListNotes(data.study.id);
  data.launches = store.ListLaunches(data.study.id);
  data.evaluations = store.ListEvaluations(data.study.id);
  for (const StudyRecord& other : store.ListStudies()) {
    if (other.parent == data.study.name) data.children.push_back(other.name);
  }
  if (!with_measurements) return data;
  for (auto& row : store.StudyEvaluations(data.study.id)) data.evals[row.trial_number].push_back(std::move(row.eval));
  for (const auto& row : store.StudyTraining(data.study.id)) data.train[row.trial_number].push_back(row.train);
  return data;
}

std::string LineageRootOf(Store& store, const std::string& name) {
  std::string root = RequireStudy(store, name).name;
  for (int depth = 0; depth < 1000; ++depth) {
    const auto study = store.FindStudy(root);
    const auto parent = study ? store.FindStudy(study->parent) : std::nullopt;
    if (!parent) return root;
    root = parent->name;
  }
  return root;  // a cycle of parents: stop anywhere on it
}

namespace {

LineageNode LoadLineageFrom(Store& store, const std::string& root, const std::vector<StudyRecord>& studies) {
  LineageNode node;
  node.data = LoadStudyData(store, root);
  node.diagnostics = Diagnose(node.data);
  for (const StudyRecord& other : studies) {  // by creation time: oldest child first
    if (other.parent == root && other.name != root)
      node.children.push_back(LoadLineageFrom(store, other.name, studies));
  }
  return node;
}

}  // namespace

LineageNode LoadLineage(Store& store, const std::string& root) {
  return LoadLineageFrom(store, RequireStudy(store, root).name, store.ListStudies());
}

}  // namespace dltune
