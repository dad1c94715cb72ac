#include "dltune/run/study_session.h"

#include <cmath>

#include <fmt/format.h>

#include "dltune/core/rng.h"
#include "dltune/core/strings.h"
#include "dltune/space/yaml_node.h"
#include "dltune/store/tracking.h"

namespace dltune {
namespace {

// Specs are the same study when their YAML means the same thing: comments, quoting and layout may differ.
bool SameSpec(const std::string& a, const std::string& b) {
  if (a == b) return true;
  try {
    return YamlNode::Parse(a, "a").AsJson() == YamlNode::Parse(b, "b").AsJson();
  } catch (const Error&) {
    return false;
  }
}

std::vector<NewTrial> PlannedTrials(const StudySpec& spec, const std::vector<TrialRecord>& existing) {
  const StudyPlan plan(spec);
  std::vector<bool> present(plan.TrialCount(), false);
  for (const auto& trial : existing) {
    if (trial.number < present.size()) present[trial.number] = true;
  }
  std::vector<NewTrial> trials;
  for (std::uint64_t number = 0; number < plan.TrialCount(); ++number) {
    if (present[number]) continue;
    const PlannedTrial planned = plan.Trial(number);
    trials.push_back({.number = number,
                      .substudy = planned.substudy,
                      .substudy_label = plan.substudies()[planned.substudy].label,
                      .params = planned.params,
                      .seed = TrialSeed(spec.seed, number)});
  }
  return trials;
}

}  // namespace

std::pair<std::string, std::string> SplitObjective(const std::string& objective) {
  const auto slash = objective.find('/');
  if (slash == std::string::npos) return {"valid", objective};
  return {objective.substr(0, slash), objective.substr(slash + 1)};
}

std::uint64_t TrialSeed(std::uint64_t study_seed, std::uint64_t trial_number) {
  // Below 2^63 so that every language reads it as a signed 64-bit integer.
  return MixSeed(study_seed, trial_number) >> 1;
}

StudySession::StudySession(Store& store, StudyRecord study, StudySpec spec)
    : store_(&store), study_(std::move(study)), spec_(std::move(spec)) {}

StudySession StudySession::OpenOrCreate(Store& store, const StudySpec& spec, const std::string& command_line) {
  std::optional<StudyRecord> study = store.FindStudy(spec.name);
  if (!study) {
    try {
      study = store.CreateStudy(DescribeNewStudy(spec, command_line));
    } catch (const Error&) {
      study = store.FindStudy(spec.name);  // another process created it first
      if (!study) throw;
    }
  }
  if (!SameSpec(study->spec_text, spec.text)) {
    throw SpecChangedError(fmt::format(
        "study '{}' already exists in {} with a different spec (recorded from {}); an existing study's spec cannot "
        "change, since its trials were made and judged by it. Differences (- recorded, + {}):\n{}"
        "To start a new study, give it another name: change name: in the spec (or pass --name NEW_NAME); to "
        "continue this one, restore the recorded spec (dltune show {} prints it).",
        spec.name, store.url(), study->spec_path.empty() ? "an unknown file" : study->spec_path, spec.file,
        LineDiff(study->spec_text, spec.text), spec.name));
  }
  const auto missing = PlannedTrials(spec, store.ListTrials(study->id));
  if (!missing.empty()) {
    try {
      store.AddTrials(study->id, missing);
    } catch (const Error&) {
      // Another process added them at the same time; whatever is still missing now is a real failure.
      const auto still_missing = PlannedTrials(spec, store.ListTrials(study->id));
      if (!still_missing.empty()) store.AddTrials(study->id, still_missing);
    }
  }
  return StudySession(store, *study, spec);
}

StudySession StudySession::Open(Store& store, const std::string& name) {
  StudyRecord study = RequireStudy(store, name);
  StudySpec spec = ParseStudySpec(study.spec_text, study.spec_path.empty() ? study.name : study.spec_path);
  return StudySession(store, std::move(study), std::move(spec));
}

std::optional<ActiveTrial> StudySession::Ask(const std::string& worker) {
  auto claim = store_->ClaimNext(study_.id, worker);
  if (!claim) return std::nullopt;
  return ActiveTrial(*store_, spec_, std::move(claim->first), std::move(claim->second));
}

ActiveTrial::ActiveTrial(Store& store, StudySpec spec, TrialRecord record, TrialLease lease)
    : store_(&store), spec_(std::move(spec)), record_(std::move(record)), lease_(std::move(lease)) {
  std::tie(objective_split_, objective_metric_) = SplitObjective(spec_.objective.metric);
}

std::map<std::string, Value> ParamsByName(const SearchSpace& space, const Assignment& params) {
  std::map<std::string, Value> by_name;
  for (const auto& [id, value] : params) {
    const Param* param = space.Find(id);
    by_name[param ? param->name : id] = value;
  }
  return by_name;
}

std::map<std::string, Value> ActiveTrial::ParamsByName() const {
  return dltune::ParamsByName(*spec_.space, record_.params);
}

void ActiveTrial::Begin(std::int64_t from_step) {
  if (begun_) throw Error(fmt::format("trial {}: Begin was called twice", record_.number));
  if (from_step < 0) throw Error(fmt::format("trial {}: cannot begin at step {}", record_.number, from_step));
  begun_ = true;
  last_step_ = from_step;
  store_->TruncateAfter(lease_, from_step);
  // The best so far is what the kept evaluations say.
  for (const auto& eval : store_->EvalSeries(lease_.trial_id)) {
    if (eval.split != objective_split_ || eval.metric != objective_metric_) continue;
    final_value_ = eval.value;
    if (!best_value_ || IsBetter(eval.value, *best_value_, spec_.objective.direction)) {
      best_value_ = eval.value;
      best_step_ = eval.step;
    }
  }
}

void ActiveTrial::EnsureBegun() {
  if (finished_) throw Error(fmt::format("trial {} has already ended", record_.number));
  if (!begun_) Begin(0);
}

void ActiveTrial::ReportTrain(const TrainMeasurement& measurement) {
  EnsureBegun();
  if (measurement.step <= last_step_) {
    throw Error(fmt::format("trial {}: training step {} reported after step {}; steps must increase", record_.number,
                            measurement.step, last_step_));
  }
  last_step_ = measurement.step;
  pending_.train.push_back(measurement);
  if (pending_.train.size() >= 4096) Flush();
}

void ActiveTrial::ReportEval(std::int64_t step, const std::string& split, const std::map<std::string, double>& metrics,
                             std::int64_t examples) {
  EnsureBegun();
  for (const auto& [metric, value] : metrics) {
    if (!std::isfinite(value)) {
      throw Error(fmt::format("trial {}: evaluation {}/{} at step {} is {}; evaluations must be finite", record_.number,
                              split, metric, step, value));
    }
    pending_.evals.push_back({.step = step, .split = split, .metric = metric, .value = value, .examples = examples});
    if (split != objective_split_ || metric != objective_metric_) continue;
    final_value_ = value;
    if (!best_value_ || IsBetter(value, *best_value_, spec_.objective.direction)) {
      best_value_ = value;
      best_step_ = step;
      best_changed_ = true;
    }
  }
  Flush();
}

std::int64_t ActiveTrial::ReportCheckpoint(const CheckpointRecord& checkpoint) {
  EnsureBegun();
  Flush();
  return store_->AddCheckpoint(lease_, checkpoint);
}

void ActiveTrial::MarkCheckpointDeleted(std::int64_t checkpoint_id) {
  store_->MarkCheckpointDeleted(lease_, checkpoint_id);
}

void ActiveTrial::Flush() {
  if (finished_) return;
  if (pending_.train.empty() && pending_.evals.empty() && !best_changed_) {
    store_->Heartbeat(lease_);
    return;
  }
  if (best_changed_) {
    pending_.best_step = best_step_;
    pending_.best_value = best_value_;
  }
  store_->Record(lease_, pending_);
  pending_ = {};
  best_changed_ = false;
}

TrialState ActiveTrial::Complete() {
  EnsureBegun();
  if (!final_value_) {
    Fail(fmt::format("training ended without reporting the objective {} (an evaluation of split '{}', metric '{}')",
                     spec_.objective.metric, objective_split_, objective_metric_));
    return TrialState::kFailed;
  }
  Tell({.state = TrialState::kCompleted, .final_value = final_value_});
  return TrialState::kCompleted;
}

void ActiveTrial::Infeasible(const std::string& reason) {
  Tell({.state = TrialState::kInfeasible, .reason = reason, .final_value = final_value_});
}

void ActiveTrial::Fail(const std::string& reason, std::optional<int> exit_status, const std::string& stderr_tail) {
  Tell({.state = TrialState::kFailed,
        .reason = reason,
        .final_value = final_value_,
        .exit_status = exit_status,
        .stderr_tail = stderr_tail});
}

void ActiveTrial::Stop(const std::string& reason) {
  Tell({.state = TrialState::kStopped, .reason = reason, .final_value = final_value_});
}

void ActiveTrial::Tell(const TrialOutcome& outcome) {
  if (finished_) throw Error(fmt::format("trial {} has already ended", record_.number));
  if (!pending_.train.empty() || !pending_.evals.empty() || best_changed_) Flush();
  store_->Finish(lease_, outcome);
  finished_ = true;
}

}  // namespace dltune
