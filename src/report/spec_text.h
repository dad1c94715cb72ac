// A study spec and the trials it plans as text, before anything runs: what `dltune space check` and `dltune space
// sample` print.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dltune/study/study_spec.h"

namespace dltune {

// The account of a valid spec: its summary, params and sub-studies, "FILE: the spec is valid", then `data_check`
// (what its workload's data holds; "" for none) and the warnings on its search budget. Safe to print.
std::string SpecCheckText(const StudySpec& spec, const StudyPlan& plan, const std::string& data_check);

// The trials a listing shows: the first `limit` of each sub-study (all when limit is 0), grouped by sub-study. An
// adaptive sampler's later trials are not known before the study runs and are left out.
std::vector<std::vector<PlannedTrial>> PlannedTrialsToShow(const StudyPlan& plan, std::uint64_t limit);

// Those trials as a table per sub-study, with the params they vary, the fixed ones and a word on an adaptive
// sampler. Safe to print.
std::string PlannedTrialsTable(const StudySpec& spec, const StudyPlan& plan,
                               const std::vector<std::vector<PlannedTrial>>& groups);
// The same as JSON: the study, its sampler and seed, and each sub-study's scientific values and trials.
std::string PlannedTrialsJson(const StudySpec& spec, const StudyPlan& plan,
                              const std::vector<std::vector<PlannedTrial>>& groups);
// The same as CSV, one row per trial with a column per param.
std::string PlannedTrialsCsv(const StudySpec& spec, const StudyPlan& plan,
                             const std::vector<std::vector<PlannedTrial>>& groups);

}  // namespace dltune
