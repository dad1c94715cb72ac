#include "dltune/report/study_data.h"

#include <set>

#include <fmt/format.h>

#include "dltune/analyze/diagnostics.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"

namespace dltune {

StudyData LoadStudyData(Store& store, const std::string& name, bool with_measurements) {
  StudyData data;
  data.study = RequireStudy(store, name);
  data.spec = RecordedSpec(data.study);
  if (const std::int64_t made = store.CountTrials(data.study.id).made; made > kMaxLoadedTrials) {
    throw Error(
        fmt::format("study '{}' has {} trials, more than the {} its report, dashboard page and checklist "
                    "read whole; dltune show {} lists its best trials, dltune export {} every one",
                    name, made, kMaxLoadedTrials, name, name));
  }
  data.trials = store.ListTrials(data.study.id);
  // A planned study's parent trials, for comparing against them; a parent no longer in this store leaves none.
  if (!data.spec.procedure.from_trials.empty()) {
    if (const auto parent = FindParentStudy(store, data.study)) {
      for (const ParentTrial& from : data.spec.procedure.from_trials) {
        if (auto trial = store.FindTrial(parent->id, from.trial)) data.parent_trials.push_back(std::move(*trial));
      }
    }
  }
  data.notes = store.ListNotes(data.study.id);
  data.launches = store.ListLaunches(data.study.id);
  data.evaluations = store.ListEvaluations(data.study.id);
  for (const StudyRecord& other : store.ListStudies()) {
    if (IsParentOf(data.study, other)) data.children.push_back(other.name);
  }
  if (!with_measurements) return data;
  for (auto& row : store.StudyEvaluations(data.study.id)) data.evals[row.trial_number].push_back(std::move(row.eval));
  for (const auto& row : store.StudyTraining(data.study.id)) data.train[row.trial_number].push_back(row.train);
  return data;
}

std::string LineageRootOf(Store& store, const std::string& name) {
  StudyRecord root = RequireStudy(store, name);
  std::set<std::int64_t> seen = {root.id};
  while (auto parent = FindParentStudy(store, root)) {
    if (!seen.insert(parent->id).second) break;  // a cycle of parents: stop on it
    root = std::move(*parent);
  }
  return root.name;
}

namespace {

LineageNode LoadLineageFrom(Store& store, const StudyRecord& root, const std::vector<StudyRecord>& studies,
                            std::set<std::int64_t>& seen) {
  LineageNode node;
  node.data = LoadStudyData(store, root.name);
  node.diagnostics = Diagnose(node.data);
  seen.insert(root.id);
  for (const StudyRecord& other : studies) {  // by creation time: oldest child first
    if (IsParentOf(root, other) && seen.count(other.id) == 0)
      node.children.push_back(LoadLineageFrom(store, other, studies, seen));
  }
  return node;
}

}  // namespace

LineageNode LoadLineage(Store& store, const std::string& root) {
  std::set<std::int64_t> seen;
  return LoadLineageFrom(store, RequireStudy(store, root), store.ListStudies(), seen);
}

}  // namespace dltune
