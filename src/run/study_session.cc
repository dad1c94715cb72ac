#include "dltune/run/study_session.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <cstdio>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/rng.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "run/study_reproduction.h"
#include "space/yaml_node.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"
#include "store/trial_resources.h"

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

// Whether `raised` is `recorded` with only `trials:` or `replicas:` raised (comments, layout and the description
// aside; a planned study's procedure records its replicas too), so that it plans more trials.
bool OnlyTrialsRaised(const StudySpec& recorded, const StudySpec& raised) {
  nlohmann::json a = YamlNode::Parse(recorded.text, recorded.file).AsJson();
  nlohmann::json b = YamlNode::Parse(raised.text, raised.file).AsJson();
  if (!a.is_object() || !b.is_object()) return false;
  for (nlohmann::json* spec : {&a, &b}) {
    for (const char* key : {"trials", "replicas", "description"}) spec->erase(key);
    if (auto procedure = spec->find("procedure"); procedure != spec->end() && procedure->is_object()) {
      if (auto options = procedure->find("options"); options != procedure->end() && options->is_object()) {
        options->erase("replicas");
      }
    }
  }
  return a == b && StudyPlan(raised).TrialCount() > StudyPlan(recorded).TrialCount();
}

// Checks that the trials `store` made for the study are the first trials of `raised`'s plan, param for param (a
// sampler whose points depend on the trial count, such as grid, would change them), then records `raised`. Trial n is
// replica n / C of configuration n % C (C configurations): more replicas of the same configurations append whole
// rounds, while more configurations of a study with replicas would renumber every trial after the first round.
void ExtendRecordedStudy(Store& store, const StudyRecord& study, const StudySpec& recorded, const StudySpec& raised) {
  const StudyPlan plan(raised);
  const StudyPlan before(recorded);
  if (std::max(recorded.replicas, raised.replicas) > 1 && plan.ConfigurationCount() != before.ConfigurationCount()) {
    throw SpecChangedError(fmt::format(
        "study '{}' cannot be extended from {} to {} configurations: it trains each {} times (replicas:), and its "
        "trial numbers run replica by replica over all its configurations; raise replicas: alone, or run the larger "
        "study under another name",
        study.name, before.ConfigurationCount(), plan.ConfigurationCount(), recorded.replicas));
  }
  for (const TrialRecord& trial : store.ListTrials(study.id)) {
    if (!plan.IsPlanned(trial.number)) continue;  // an adaptive sampler's: chosen from the results, not the plan
    if (!(plan.Trial(trial.number).params == trial.params)) {
      throw SpecChangedError(fmt::format(
          "study '{}' cannot be extended to {} trials: with the new trials: its trial {} would have other params "
          "(the {} sampler places its points by the trial count); run the larger study under another name",
          study.name, plan.TrialCount(), trial.number, raised.sampler.name));
    }
  }
  store.ExtendStudy(study.id, raised.text, Sha256Hex(raised.text), raised.description);
}

// A study makes its planned trials as it goes, this many at a time: a study of a million trials costs no more to
// create than one of ten, and holds rows only for trials it got to.
constexpr std::uint64_t kTrialsMadeAhead = 256;

NewTrial ToNewTrial(const StudyPlan& plan, const PlannedTrial& planned) {
  return {.number = planned.number,
          .substudy = planned.substudy,
          .substudy_label = plan.SubStudyAt(planned.substudy).label,
          .params = planned.params,
          .seed = planned.seed,
          .configuration = planned.configuration,
          .replica = planned.replica};
}

// The first number the study has not made yet (numbers are made in order).
std::uint64_t NextNumber(Store& store, std::int64_t study_id) {
  const TrialCounts counts = store.CountTrials(study_id);
  return counts.max_number ? *counts.max_number + 1 : 0;
}

// Planned trials from `next` on, up to the first one that is not planned (an adaptive sampler's), at most
// kTrialsMadeAhead.
std::vector<NewTrial> NextPlannedTrials(const StudyPlan& plan, std::uint64_t next) {
  std::vector<NewTrial> trials;
  for (std::uint64_t number = next; number < plan.TrialCount() && number < next + kTrialsMadeAhead; ++number) {
    if (!plan.IsPlanned(number)) break;
    trials.push_back(ToNewTrial(plan, plan.Trial(number)));
  }
  return trials;
}

// How a trial counts for an adaptive sampler; nullopt for one that tells nothing (failed: the program broke, not
// the params; completed without an objective).
std::optional<Observation> Observe(const TrialRecord& trial, Direction direction) {
  switch (trial.state) {
    case TrialState::kCompleted:
      if (!trial.best_value || !std::isfinite(*trial.best_value)) return std::nullopt;
      return Observation{trial.params, ObservationKind::kCompleted,
                         direction == Direction::kMaximize ? -*trial.best_value : *trial.best_value};
    case TrialState::kInfeasible: return Observation{trial.params, ObservationKind::kInfeasible, 0};
    case TrialState::kPending:
    case TrialState::kRunning:
    case TrialState::kStopped: return Observation{trial.params, ObservationKind::kPending, 0};
    case TrialState::kFailed: break;
  }
  return std::nullopt;
}

// The warm_start study's trials, checked to measure what this study measures.
std::vector<TrialRecord> WarmStartTrials(Store& store, const StudySpec& spec) {
  const std::string& name = spec.sampler.warm_start;
  if (name.empty()) return {};
  const std::optional<StudyRecord> earlier = store.FindStudy(name);
  if (!earlier) {
    throw Error(fmt::format("{}: sampler.warm_start names study '{}', which is not in {} (dltune studies lists them)",
                            spec.sampler.where.ToString(), name, store.url()));
  }
  const StudySpec earlier_spec = RecordedSpec(*earlier);
  if (earlier_spec.objective != spec.objective) {
    throw Error(
        fmt::format("{}: sampler.warm_start study '{}' has objective {}, this study {}: its results cannot start this "
                    "study's model",
                    spec.sampler.where.ToString(), name, earlier_spec.objective.Describe(), spec.objective.Describe()));
  }
  return store.ListTrials(earlier->id);
}

}  // namespace

StudySession::StudySession(Store& store, StudyRecord study, StudySpec spec)
    : store_(&store),
      study_(std::move(study)),
      spec_(std::move(spec)),
      plan_(std::make_shared<const StudyPlan>(spec_)),
      warm_start_(WarmStartTrials(store, spec_)) {}

StudySession StudySession::OpenOrCreate(Store& store, const StudySpec& spec, const std::string& command_line,
                                        bool extend) {
  std::optional<StudyRecord> study = store.FindStudy(spec.name);
  if (!study) {
    try {
      study = store.CreateStudy(WithMachineGpus(DescribeNewStudy(spec, command_line)));
    } catch (const Error&) {
      study = store.FindStudy(spec.name);  // another process created it first
      if (!study) throw;
    }
  }
  if (!SameSpec(study->spec_text, spec.text)) {
    const StudySpec recorded = RecordedSpec(*study);
    const bool appends = OnlyTrialsRaised(recorded, spec);
    if (extend && appends) {
      ExtendRecordedStudy(store, *study, recorded, spec);
      study = store.FindStudy(spec.name);
    } else {
      throw SpecChangedError(fmt::format(
          "study '{}' already exists in {} with a different spec (recorded from {}); an existing study's spec "
          "cannot change, since its trials were made and judged by it. Differences (- recorded, + {}):\n{}{}",
          spec.name, store.url(), study->spec_path.empty() ? "an unknown file" : study->spec_path, spec.file,
          LineDiff(study->spec_text, spec.text),
          appends ? fmt::format(
                        "Only trials: or replicas: is raised: run with --extend to add the new trials to study '{}'.",
                        spec.name)
                  : fmt::format("To start a new study, give it another name (name: in the spec); to continue this "
                                "one, restore the recorded spec (dltune show {} --spec prints it).",
                                spec.name)));
    }
  }
  StudySession session(store, *study, spec);
  // The first planned trials, so that a new study shows them (an adaptive sampler's wait for a worker to ask).
  if (const auto first = NextPlannedTrials(*session.plan_, 0); store.CountTrials(study->id).made == 0) {
    try {
      store.AddTrials(study->id, first);
    } catch (const Error&) {
      if (!store.FindTrial(study->id, 0)) throw;  // not another process making them first
    }
  }
  return session;
}

StudySession StudySession::Open(Store& store, const std::string& name) {
  StudyRecord study = RequireStudy(store, name);
  StudySpec spec = RecordedSpec(study);
  return StudySession(store, std::move(study), std::move(spec));
}

std::optional<ActiveTrial> StudySession::Ask(const std::string& worker, std::optional<std::size_t> substudy) {
  // For one sub-study, a few batches of new trials at most: the plan may have none of it left.
  constexpr int kRoundsForASubstudy = 3;
  for (int round = 0;; ++round) {
    if (auto claim = store_->ClaimNext(study_.id, worker, substudy)) {
      ActiveTrial trial(*store_, spec_, std::move(claim->first), std::move(claim->second));
      if (const auto reason = SkipReason(trial.record())) {
        trial.Infeasible(*reason);
        continue;
      }
      return trial;
    }
    if ((substudy && round >= kRoundsForASubstudy) || !MakeNextTrials()) return std::nullopt;
  }
}

std::optional<std::string> StudySession::SkipReason(const TrialRecord& trial) const {
  // A throughput sweep stops at the first batch size that ran out of memory: a larger one would too.
  if (spec_.procedure.kind != "throughput") return std::nullopt;
  const auto batch_of = [](const TrialRecord& t) -> std::optional<double> {
    const auto it = t.params.find("batch_size");
    return it == t.params.end() ? std::nullopt : NumericValue(it->second);
  };
  const auto batch = batch_of(trial);
  if (!batch) return std::nullopt;
  for (const TrialRecord& other : store_->ListTrialsInState(study_.id, TrialState::kInfeasible)) {
    const auto other_batch = batch_of(other);
    if (other_batch && *other_batch <= *batch && other.reason.rfind("out of memory", 0) == 0) {
      return fmt::format("not run: batch size {:g} already ran out of memory (trial {})", *other_batch, other.number);
    }
  }
  return std::nullopt;
}

bool StudySession::MakeNextTrials() {
  const std::uint64_t next = NextNumber(*store_, study_.id);
  if (next >= plan_->TrialCount()) return false;
  std::vector<NewTrial> trials = NextPlannedTrials(*plan_, next);
  if (trials.empty()) {
    const std::vector<TrialRecord> made = store_->ListTrials(study_.id);
    trials.push_back(ToNewTrial(*plan_, plan_->TrialFromHistory(next, History(next, made))));
  }
  try {
    store_->AddTrials(study_.id, trials);
  } catch (const Error&) {
    if (!store_->FindTrial(study_.id, next)) throw;  // not another worker making the same trials first
  }
  return true;
}

std::vector<Observation> StudySession::History(std::uint64_t number, const std::vector<TrialRecord>& trials) const {
  const std::size_t substudy = plan_->SubStudyOf(number).first;
  const Assignment scientific = plan_->SubStudyAt(substudy).scientific;
  const Direction direction = spec_.objective.direction;
  std::vector<Observation> history;
  for (const TrialRecord& trial : warm_start_) {
    // An earlier trial of another scientific value says nothing about this sub-study's nuisance optimum.
    const bool other_value = std::any_of(scientific.begin(), scientific.end(), [&](const auto& entry) {
      const auto it = trial.params.find(entry.first);
      return it != trial.params.end() && !SameValue(it->second, entry.second);
    });
    if (other_value) continue;
    if (auto observation = Observe(trial, direction)) history.push_back(std::move(*observation));
  }
  for (const TrialRecord& trial : trials) {
    if (trial.substudy != substudy || trial.number == number) continue;
    if (auto observation = Observe(trial, direction)) history.push_back(std::move(*observation));
  }
  return history;
}

ActiveTrial::ActiveTrial(Store& store, StudySpec spec, TrialRecord record, TrialLease lease)
    : store_(&store), spec_(std::move(spec)), record_(std::move(record)), lease_(std::move(lease)) {}

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

namespace {

// Adds the seconds of its lifetime to `total`: the time of a store call.
class StoreTimer {
 public:
  explicit StoreTimer(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~StoreTimer() { total_ += Seconds(std::chrono::steady_clock::now() - start_); }
  StoreTimer(const StoreTimer&) = delete;
  StoreTimer& operator=(const StoreTimer&) = delete;

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

void ActiveTrial::AddTime(const TimeSplit& seconds) {
  for (const auto& [phase, value] : seconds) {
    if (std::isfinite(value) && value >= 0) time_split_[phase] += value;
  }
}

void ActiveTrial::Begin(std::int64_t from_step) {
  if (begun_) throw Error(fmt::format("trial {}: Begin was called twice", record_.number));
  if (from_step < 0) throw Error(fmt::format("trial {}: cannot begin at step {}", record_.number, from_step));
  begun_ = true;
  const StoreTimer timer(time_split_["store"]);
  last_step_ = from_step;
  store_->TruncateAfter(lease_, from_step);
  // The best so far is what the kept evaluations say.
  for (const auto& eval : store_->EvalSeries(lease_.trial_id)) {
    if (eval.split != spec_.objective.split || eval.metric != spec_.objective.metric) continue;
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
    if (split != spec_.objective.split || metric != spec_.objective.metric) continue;
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
  const StoreTimer timer(time_split_["store"]);
  return store_->AddCheckpoint(lease_, checkpoint);
}

void ActiveTrial::MarkCheckpointDeleted(std::int64_t checkpoint_id) {
  const StoreTimer timer(time_split_["store"]);
  store_->MarkCheckpointDeleted(lease_, checkpoint_id);
}

void ActiveTrial::Flush() {
  if (finished_) return;
  const StoreTimer timer(time_split_["store"]);
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
                     spec_.objective.Name(), spec_.objective.split, spec_.objective.metric));
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
  TrialOutcome with_time = outcome;
  with_time.time_split = time_split_;
  with_time.resources = WithRuntime(resources_, runtime_);
  store_->Finish(lease_, with_time);
  finished_ = true;
}

std::filesystem::path StudyDirectory(const StudySpec& spec, const StudyRecord& study) {
  assert(!study.uid.empty() && "a StudyRecord read through a Store has a uid");
  return std::filesystem::absolute(std::filesystem::path(spec.run_dir) / study.uid).lexically_normal();
}

std::filesystem::path TrialDirectory(const StudySpec& spec, const StudyRecord& study, std::uint64_t number) {
  return StudyDirectory(spec, study) / ("trial_" + std::to_string(number));
}

std::string DefaultWorkerId() {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) std::snprintf(host, sizeof(host), "localhost");
  return fmt::format("{}:{}", host, ::getpid());
}

}  // namespace dltune
