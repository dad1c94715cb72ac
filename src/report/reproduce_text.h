// How to reproduce a study or one of its trials (`dltune show STUDY [TRIAL] --reproduce`): the commands that rebuild
// the code the study ran (its commit and its stored patch of uncommitted changes), the versions and environment
// variables it recorded, and the run that trains it again; and the brief lines `show` and the report give the record.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/store/store.h"

namespace dltune {

// The name of the study that trains trial `trial` of `study` again: "<study>-rerun-<trial>".
std::string RerunStudyName(const StudyRecord& study, const TrialRecord& trial);

// A spec that trains `trial` of `study` again, alone: the study's spec renamed RerunStudyName, its sampler a list of
// the trial's configuration, one replica, trained with the trial's seed (a list config's replica 0 trains with the
// seed of the trial its procedure's from_trials names; docs/study-spec.md, "procedure"). Throws Error when the
// recorded spec cannot be read.
std::string RerunSpec(const StudyRecord& study, const TrialRecord& trial);

// What `show --reproduce --format json` prints (docs/json-output.md, "show --reproduce"): the record, the trial's
// runtime and how it differs, the rerun spec for a trial, and the commands. `store_url` names the store in them.
nlohmann::json ReproduceJson(const StudyRecord& study, const std::optional<TrialRecord>& trial,
                             const std::string& store_url);

// The same as commands to paste into a shell, with comments. Safe to print.
std::string ReproduceText(const StudyRecord& study, const std::optional<TrialRecord>& trial,
                          const std::string& store_url);

// The record in brief, as rows of `dltune show STUDY` and the report's record section: the uncommitted patch, the
// versions and machine, the environment variables; none for a study created before dltune kept a record.
std::vector<std::pair<std::string, std::string>> ReproductionFacts(const StudyRecord& study);

// A trial's runtime in brief ("python 3.11.2, torch 2.1.0"), and, when it differs from the study's record, how; none
// when its process sent no runtime.
std::vector<std::pair<std::string, std::string>> TrialRuntimeFacts(const StudyRecord& study, const TrialRecord& trial);

// The runtimes the trials' processes sent, grouped: "python 3.11.2, torch 2.1.0 (every trial that sent one: 12)", or
// when they differ one group per runtime with its trials ("...; python 3.11.2, torch 2.0.1 (trials 5, 7)"); "" when
// none sent one.
std::string TrialRuntimesText(const std::vector<TrialRecord>& trials);

}  // namespace dltune
