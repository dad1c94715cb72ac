// Reading a study's records from the store into the StudyData the analyses take.
#pragma once

#include <string>

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/next_step.h"
#include "dltune/store/store.h"

namespace dltune {

// The most trials a study may have to be read whole (its report, its dashboard page, `dltune doctor`): the analyses
// hold every record in memory. Larger studies are read through the store's counts and best trials (`dltune show`,
// `dltune studies`, `dltune export`).
inline constexpr std::int64_t kMaxLoadedTrials = 100000;

// Every record of study `name`: its spec (parsed from the text the store keeps), trials, evaluations and training
// measurements (without `with_measurements`, `evals` and `train` stay empty: what the trial records alone show, read
// in a fraction of the time for a large study), and the parent trials a planned study names. Throws Error when there is
// no such study, its spec cannot be read by this dltune, or it has more than kMaxLoadedTrials trials.
StudyData LoadStudyData(Store& store, const std::string& name, bool with_measurements = true);

// The first study of study `name`'s lineage: up its procedure parents while they are studies in the store (a study
// created after its child under a deleted parent's name is not that parent).
std::string LineageRootOf(Store& store, const std::string& name);
// Study `root` with its findings and, recursively, the studies planned from it (what `dltune next` reads); each study
// appears once.
LineageNode LoadLineage(Store& store, const std::string& root);

}  // namespace dltune
