// The ask/tell API: how a training loop — dltune's own workers, or a user's LibTorch program — takes part in a
// study. Open the study (creating it from its spec if needed), Ask for a trial (claimed atomically, with its params),
// report what it measures, and tell how it ended:
//
//   auto store = dltune::OpenStore("sqlite:///tmp/dltune.db");
//   auto session = dltune::StudySession::OpenOrCreate(*store, dltune::LoadStudySpec("study.yaml"), "my_trainer");
//   while (auto trial = session.Ask("my-host:1")) {
//     trial->Begin(0);
//     for (...) trial->ReportTrain({.step = step, .loss = loss});
//     trial->ReportEval(step, "valid", {{"error_rate", error}});
//     trial->Complete();
//   }
//
// Not thread-safe: a session and its trials use their Store from one thread (Store's contract). Several processes
// may each open a session of the same study; no trial is ever handed to two of them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// A study name already in the store with a different spec. The message shows the difference and how to start a
// new study.
class SpecChangedError : public Error {
 public:
  explicit SpecChangedError(const std::string& message) : Error(message, ErrorKind::kConflict) {}
};

class ActiveTrial;

class StudySession {
 public:
  // Opens the study named by `spec` in `store`. A new study is created with its first planned trials, pending (the
  // others are made as workers ask for them: MakeNextTrials); `command_line` is recorded as the command that
  // reproduces the study. An existing study must have the same spec (comments and formatting aside), or
  // SpecChangedError is thrown. A gp sampler's warm_start study must exist in the store and measure the same
  // objective, or Error is thrown. With `extend`, an existing study whose spec differs only by a larger `trials:`
  // takes the new spec and makes the added trials as workers ask: the same trials, params and seeds, that the larger
  // spec would have made from the start (SpecChangedError when its sampler would place the made trials elsewhere).
  static StudySession OpenOrCreate(Store& store, const StudySpec& spec, const std::string& command_line,
                                   bool extend = false);
  // Opens an existing study by name, with the spec recorded in the store. Throws Error when there is none.
  static StudySession Open(Store& store, const std::string& name);

  const StudyRecord& study() const { return study_; }
  const StudySpec& spec() const { return spec_; }
  Store& store() const { return *store_; }

  // Claims the lowest-numbered pending trial for `worker` (an id unique among the study's workers, e.g.
  // "host:pid"). With none pending, makes the study's next trials (MakeNextTrials) and claims one; nullopt when the
  // study has made all its trials and none is pending. A trial that must not run (a throughput sweep's batch size
  // above one that ran out of memory) is recorded as infeasible with the reason, and the next one claimed.
  // With `substudy`, a trial of that sub-study only (a fused group's next member), making new trials for a few
  // rounds at most.
  std::optional<ActiveTrial> Ask(const std::string& worker, std::optional<std::size_t> substudy = std::nullopt);
  // Adds the study's next trials to the store: the next planned ones (up to a few hundred), or, when the next one
  // is an adaptive sampler's (gp), that one, made from the results so far (the sub-study's finished trials, its
  // pending and running ones as points already being tried, and the warm-start study's). False when the study has
  // made all its trials. Safe against other processes making the same trials at once.
  bool MakeNextTrials();
  // What an adaptive sampler knows when it makes trial `number`: its sub-study's trials (and the warm-start
  // study's), by number; objectives oriented so that lower is better.
  std::vector<Observation> History(std::uint64_t number, const std::vector<TrialRecord>& trials) const;
  // Every trial of the study, ordered by number.
  std::vector<TrialRecord> Trials() const { return store_->ListTrials(study_.id); }

 private:
  StudySession(Store& store, StudyRecord study, StudySpec spec);
  // Why a claimed trial should end as infeasible without running: in a throughput sweep, a smaller batch size that
  // already ran out of memory. nullopt to run it.
  std::optional<std::string> SkipReason(const TrialRecord& trial) const;

  Store* store_;
  StudyRecord study_;
  StudySpec spec_;
  std::shared_ptr<const StudyPlan> plan_;
  std::vector<TrialRecord> warm_start_;  // the warm_start study's trials (read once: that study is finished)
};

// A claimed trial: report its measurements, then tell how it ended (exactly once). Measurements are buffered and
// written in batches (at each evaluation, each checkpoint, Flush and the end), each batch in one transaction with
// the best step so far. Every write throws LeaseLostError once the trial was reclaimed by another worker.
class ActiveTrial {
 public:
  ActiveTrial(Store& store, StudySpec spec, TrialRecord record, TrialLease lease);

  const TrialRecord& record() const { return record_; }
  const TrialLease& lease() const { return lease_; }
  std::uint64_t number() const { return record_.number; }
  // The params by the names the training code reads (conditional params sharing a name resolve to the active one).
  std::map<std::string, Value> ParamsByName() const;

  // Where training starts: 0, or the step of the checkpoint it resumed from. Deletes the trial's recorded
  // measurements after that step and recomputes the best so far, so a resumed series has no gap and no duplicate.
  // Without a call, the first measurement implies Begin(0).
  void Begin(std::int64_t from_step);
  // Training measurements; steps must increase.
  void ReportTrain(const TrainMeasurement& measurement);
  // An evaluation of `split` at `step`: metric name -> value. Updates the best step when it holds the objective.
  void ReportEval(std::int64_t step, const std::string& split, const std::map<std::string, double>& metrics,
                  std::int64_t examples = 0);
  // Records a checkpoint (after writing what is buffered); returns its id for MarkCheckpointDeleted.
  std::int64_t ReportCheckpoint(const CheckpointRecord& checkpoint);
  void MarkCheckpointDeleted(std::int64_t checkpoint_id);
  // Writes what is buffered and stamps the heartbeat. Call at least every few seconds while training is silent.
  void Flush();

  // The last step reported, the best objective so far and its step, and the objective at the last evaluation.
  std::int64_t last_step() const { return last_step_; }
  std::optional<std::int64_t> best_step() const { return best_step_; }
  std::optional<double> best_value() const { return best_value_; }
  std::optional<double> final_value() const { return final_value_; }

  // Ends the trial. Complete() records it failed instead when no evaluation of the objective was reported (there
  // is nothing to judge it by); it returns the state recorded.
  TrialState Complete();
  void Infeasible(const std::string& reason);
  void Fail(const std::string& reason, std::optional<int> exit_status = std::nullopt,
            const std::string& stderr_tail = "");
  // Stopped and resumable: it goes back to pending the next time the study is run.
  void Stop(const std::string& reason);
  bool finished() const { return finished_; }

  // Where this attempt's time went (TimeSplit's phases): added to, then recorded with the trial's end. The store
  // writes the trial makes through this object are counted as "store" themselves.
  void AddTime(const TimeSplit& seconds);
  const TimeSplit& time_split() const { return time_split_; }
  // The resources this attempt used (TrialRecord::resources' JSON object), recorded with the trial's end.
  void SetResources(std::string json) { resources_ = std::move(json); }
  const std::string& resources() const { return resources_; }
  // The versions of the trial process's runtime (its runtime line), recorded with the trial's end under its
  // resources' "runtime", whatever else sets the resources.
  void SetRuntime(std::map<std::string, std::string> runtime) { runtime_ = std::move(runtime); }

 private:
  void EnsureBegun();
  void Tell(const TrialOutcome& outcome);

  Store* store_;
  StudySpec spec_;
  TrialRecord record_;
  TrialLease lease_;
  MeasurementBatch pending_;
  bool begun_ = false;
  bool finished_ = false;
  std::int64_t last_step_ = -1;
  std::optional<std::int64_t> best_step_;
  std::optional<double> best_value_;
  std::optional<double> final_value_;
  bool best_changed_ = false;
  TimeSplit time_split_;
  std::string resources_;
  std::map<std::string, std::string> runtime_;
};

// A trial's params (by param id) by the names the training code reads; params sharing a name resolve to the one
// present in the trial.
std::map<std::string, Value> ParamsByName(const SearchSpace& space, const Assignment& params);

// The directory of a study's trials: <run_dir>/<study uid>, run_dir relative to the working directory. The uid makes
// it the study's own even when studies share a run_dir, or have the same name in two stores.
std::filesystem::path StudyDirectory(const StudySpec& spec, const StudyRecord& study);
// The directory of trial `number` of a study: <StudyDirectory>/trial_<number>: where its checkpoints go.
std::filesystem::path TrialDirectory(const StudySpec& spec, const StudyRecord& study, std::uint64_t number);

// "<hostname>:<pid>" of this process: a worker's name in the store unless given one.
std::string DefaultWorkerId();

}  // namespace dltune
