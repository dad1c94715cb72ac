#include "store/tracking.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>

#include "core/git.h"
#include "core/reproduction.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "dltune/version.h"
#include "store/recorded_spec.h"

namespace dltune {

std::string StudySummary::StateText() const {
  std::string text;
  for (const TrialState state : {TrialState::kCompleted, TrialState::kRunning, TrialState::kPending,
                                 TrialState::kStopped, TrialState::kInfeasible, TrialState::kFailed}) {
    if (Count(state) == 0) continue;
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {}", Count(state), TrialStateName(state));
  }
  return text.empty() ? "no trials" : text;
}

std::string BestTrial::ValueText() const {
  if (!stats || !stats->HalfWidth()) return fmt::format("{:.6g} (single run, variance unknown)", value);
  return fmt::format("mean {:.6g} ± {:.2g} (95% CI, {} replicas)", value, *stats->HalfWidth(), stats->n);
}

NewStudy DescribeNewStudy(const StudySpec& spec, const std::string& command_line) {
  ReproductionCapture reproduction = CaptureReproduction(std::filesystem::current_path());
  return {.name = spec.name,
          .description = spec.description,
          .spec_text = spec.text,
          .spec_hash = Sha256Hex(spec.text),
          .spec_path = spec.file,
          .command_line = command_line,
          .dltune_version = kVersion,
          .git_commit = GitCommitOf(std::filesystem::current_path()).value_or(""),
          .git_dirty = GitDirtyOf(std::filesystem::current_path()),
          .parent = spec.procedure.parent,
          .reproduction = std::move(reproduction.record),
          .git_patch = std::move(reproduction.stored_patch)};
}

namespace {

// A summary with what the spec says: the objective, and how many trials the study will have in all (and, through
// `replicas`, whether its configurations are trained several times).
StudySummary SummaryFromSpec(const StudyRecord& study, std::int64_t* planned, std::uint64_t* replicas) {
  StudySummary summary;
  summary.study = study;
  summary.reproduce = study.command_line;
  *planned = 0;
  try {
    const StudySpec spec = RecordedSpec(study);
    summary.objective = spec.objective;
    summary.goal = spec.goal;
    *replicas = spec.replicas;
    *planned = static_cast<std::int64_t>(StudyPlan(spec).TrialCount());
  } catch (const Error&) {
    // A spec this dltune cannot read keeps the default objective; the records are still worth showing.
  }
  return summary;
}

// Trials a study has not made yet (it makes them as it goes) are pending.
void CountUnmade(StudySummary& summary, std::int64_t planned) {
  const std::int64_t unmade = std::max<std::int64_t>(0, planned - summary.trial_count);
  summary.state_counts[static_cast<std::size_t>(TrialState::kPending)] += unmade;
  summary.trial_count += unmade;
}

BestTrial BestOf(const TrialRecord& trial) {
  return {trial.number, trial.substudy_label, trial.best_value.value_or(0), trial.best_step};
}

// In a study with replicas, the best configurations by their means over completed replicas (`completed`: the
// study's completed trials), overall and per sub-study; each named by its median replica.
void BestByMeans(StudySummary& summary, const std::vector<TrialRecord>& completed) {
  struct Group {
    std::vector<const TrialRecord*> trials;
    std::vector<double> values;
  };
  std::map<std::uint64_t, Group> groups;
  for (const TrialRecord& trial : completed) {
    if (trial.state != TrialState::kCompleted || !trial.best_value) continue;
    groups[trial.configuration].trials.push_back(&trial);
    groups[trial.configuration].values.push_back(*trial.best_value);
  }
  summary.best.reset();
  summary.best_per_substudy.clear();
  std::map<std::size_t, BestTrial> per_substudy;
  for (const auto& [configuration, group] : groups) {
    const MeanInterval stats = SummarizeMean(group.values);
    const TrialRecord& median = *group.trials[MedianIndex(group.values, stats.mean)];
    BestTrial candidate{median.number, median.substudy_label, stats.mean, median.best_step, stats, configuration};
    const Direction direction = summary.objective.direction;
    if (!summary.best || IsBetter(candidate.value, summary.best->value, direction)) summary.best = candidate;
    const auto slot = per_substudy.find(median.substudy);
    if (slot == per_substudy.end()) {
      per_substudy.emplace(median.substudy, candidate);
    } else if (IsBetter(candidate.value, slot->second.value, direction)) {
      slot->second = candidate;
    }
  }
  for (const auto& [substudy, best] : per_substudy) summary.best_per_substudy.push_back(best);
}

}  // namespace

StudySummary SummarizeStudy(const StudyRecord& study, const std::vector<TrialRecord>& trials) {
  std::int64_t planned = 0;
  std::uint64_t replicas = 1;
  StudySummary summary = SummaryFromSpec(study, &planned, &replicas);
  std::vector<std::optional<BestTrial>> per_substudy;
  for (const auto& trial : trials) {
    ++summary.state_counts[static_cast<std::size_t>(trial.state)];
    ++summary.trial_count;
    if (trial.state != TrialState::kCompleted || !trial.best_value) continue;
    const BestTrial candidate = BestOf(trial);
    if (!summary.best || IsBetter(candidate.value, summary.best->value, summary.objective.direction)) {
      summary.best = candidate;
    }
    if (per_substudy.size() <= trial.substudy) per_substudy.resize(trial.substudy + 1);
    auto& slot = per_substudy[trial.substudy];
    if (!slot || IsBetter(candidate.value, slot->value, summary.objective.direction)) slot = candidate;
  }
  for (const auto& slot : per_substudy) {
    if (slot) summary.best_per_substudy.push_back(*slot);
  }
  if (replicas > 1) BestByMeans(summary, trials);
  CountUnmade(summary, planned);
  return summary;
}

StudySummary SummarizeStudy(Store& store, const StudyRecord& study, std::size_t max_substudies) {
  std::int64_t planned = 0;
  std::uint64_t replicas = 1;
  StudySummary summary = SummaryFromSpec(study, &planned, &replicas);
  const TrialCounts counts = store.CountTrials(study.id);
  summary.state_counts = counts.by_state;
  summary.trial_count = counts.made;
  const Direction direction = summary.objective.direction;
  if (const auto best = store.BestTrials(study.id, direction, 1, false); !best.empty()) summary.best = BestOf(best[0]);
  for (const auto& trial : store.BestTrials(study.id, direction, max_substudies + 1, true)) {
    summary.best_per_substudy.push_back(BestOf(trial));
  }
  // Replicated configurations are compared by their means: that needs their completed trials.
  if (replicas > 1) BestByMeans(summary, store.ListTrialsInState(study.id, TrialState::kCompleted));
  if (summary.best_per_substudy.size() > max_substudies) {
    summary.best_per_substudy.resize(max_substudies + 1);
    summary.best_per_substudy.pop_back();
    summary.more_substudies = true;
  }
  CountUnmade(summary, planned);
  return summary;
}

StudyRecord RequireStudy(Store& store, const std::string& name) {
  if (auto study = store.FindStudy(name)) return *study;
  std::vector<std::string> names;
  for (const auto& study : store.ListStudies()) names.push_back(study.name);
  if (names.empty())
    throw Error(fmt::format("{}: no study named '{}': the store has no studies yet", store.url(), name));
  throw Error(fmt::format("{}: no study named '{}'{}; studies: {}", store.url(), name, DidYouMean(name, names),
                          JoinAlternatives(names, false)));
}

bool IsParentOf(const StudyRecord& parent, const StudyRecord& child) {
  if (child.parent.empty() || parent.name != child.parent || parent.id == child.id) return false;
  return std::tie(parent.created_at, parent.id) < std::tie(child.created_at, child.id);
}

const StudyRecord* ParentAmong(const std::vector<StudyRecord>& studies, const StudyRecord& child) {
  for (const StudyRecord& study : studies) {
    if (IsParentOf(study, child)) return &study;
  }
  return nullptr;
}

std::optional<StudyRecord> FindParentStudy(Store& store, const StudyRecord& child) {
  if (child.parent.empty()) return std::nullopt;
  auto parent = store.FindStudy(child.parent);
  if (!parent || !IsParentOf(*parent, child)) return std::nullopt;
  return parent;
}

std::optional<CheckpointRecord> BestCheckpoint(const std::vector<CheckpointRecord>& checkpoints,
                                               std::optional<std::int64_t> best_step) {
  std::optional<CheckpointRecord> found;
  auto rank = [&](const CheckpointRecord& c) {
    // Higher is better: at the best step, then in the best pool, then newer.
    return std::make_tuple(best_step && c.step == *best_step, c.pool == CheckpointPool::kBest, c.step);
  };
  for (const auto& c : checkpoints) {
    if (c.deleted) continue;
    if (!(best_step && c.step == *best_step) && c.pool != CheckpointPool::kBest) continue;
    if (!found || rank(c) > rank(*found)) found = c;
  }
  return found;
}

}  // namespace dltune
