// The playbook's experiment-tracking record of a study, computed from the store's records: trials by state, the
// best trial overall and per sub-study, and how to reproduce the study.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "dltune/core/statistics.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// The best trial of a set: its number, sub-study, best objective value and the step it was reached at. In a study
// with replicas, the best configuration by its mean over completed replicas: `value` is that mean, `stats` its
// spread, and `number` and `step` those of its median replica.
struct BestTrial {
  std::uint64_t number = 0;
  std::string substudy_label;
  double value = 0;
  std::optional<std::int64_t> step;
  std::optional<MeanInterval> stats;  // with replicas
  std::optional<std::uint64_t> configuration;

  // "0.03375 (single run, variance unknown)", or "mean 0.0367 ± 0.0041 (95% CI, 3 replicas)".
  std::string ValueText() const;
};

struct StudySummary {
  StudyRecord study;
  Objective objective;                         // from the study's spec (minimize valid/error_rate if unreadable)
  std::string goal;                            // the spec's goal: (the round's question), "" when it has none
  std::array<std::int64_t, 6> state_counts{};  // indexed by TrialState; trials not made yet count as pending
  std::int64_t trial_count = 0;                // every trial the study has or will make
  std::optional<BestTrial> best;               // over completed trials with a best value
  std::vector<BestTrial> best_per_substudy;    // in sub-study order, for sub-studies that have one
  bool more_substudies = false;                // best_per_substudy was cut at the limit asked for
  std::string reproduce;                       // the command that created the study

  std::int64_t Count(TrialState state) const { return state_counts[static_cast<std::size_t>(state)]; }
  // "12 completed, 2 running, 1 infeasible" (states with no trial left out; "no trials" when empty).
  std::string StateText() const;
};

// The record a new study starts with: the spec's name, description, text, SHA-256 and path, the command that
// creates it, this dltune's version, the commit of the git checkout of the working directory, if any, and how to
// reproduce it beyond that (core/reproduction.h: the uncommitted patch, versions, machine, environment).
NewStudy DescribeNewStudy(const StudySpec& spec, const std::string& command_line);

// The checkpoint that holds a trial's best step, as `dltune run`, `show` and the report name it: a kept one at
// `best_step` (the best pool first), else the newest kept best-pool checkpoint; nullopt when none is kept.
std::optional<CheckpointRecord> BestCheckpoint(const std::vector<CheckpointRecord>& checkpoints,
                                               std::optional<std::int64_t> best_step);

// Summarizes a study from its record and trials (as ListTrials returns them).
StudySummary SummarizeStudy(const StudyRecord& study, const std::vector<TrialRecord>& trials);
// The same from the store's counts and best trials, at a cost that does not grow with the study (for the tracking
// table, `dltune show` and the dashboard's first page); at most `max_substudies` sub-studies' bests.
StudySummary SummarizeStudy(Store& store, const StudyRecord& study, std::size_t max_substudies = 100);

// The study named `name`, or an Error naming the store and suggesting close names.
StudyRecord RequireStudy(Store& store, const std::string& name);

// Whether `parent` is the study `child` was planned from: the one its record names, created before it (the store's
// creation order: created_at, then id). A study is planned from one that exists, so a study that later takes a
// deleted parent's name is not that parent: the deleted one's children stay apart from it, and no two studies are
// each other's ancestors.
bool IsParentOf(const StudyRecord& parent, const StudyRecord& child);
// The study `child` was planned from among `studies` (as ListStudies returns them); nullptr when it is not there.
const StudyRecord* ParentAmong(const std::vector<StudyRecord>& studies, const StudyRecord& child);
// The study `child` was planned from, read from the store; nullopt when it is not there.
std::optional<StudyRecord> FindParentStudy(Store& store, const StudyRecord& child);

}  // namespace dltune
