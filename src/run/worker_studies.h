// The studies a worker serves — the one it was given, or every study of the store — and what the worker asks of
// them between trials: a pending trial to claim, the trials of lost workers put back (a sweep), and whether any
// trial is left to wait for. Opens each study's session once and keeps it. A study whose spec this dltune cannot
// read, or whose workload it cannot train, is passed over, unless it is the one study the worker was given: then
// its error is thrown.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "dltune/run/run_types.h"
#include "dltune/run/study_session.h"
#include "dltune/store/store.h"
#include "run/worker_options.h"

namespace dltune {

class WorkerStudies {
 public:
  // Reads options.study, stale_after, max_retries, retry_failed and wait_for_others; all must outlive this.
  WorkerStudies(Store& store, const WorkerOptions& options, RunObserver& observer)
      : store_(store), options_(options), observer_(observer) {
    if (options.opened != nullptr) sessions_.emplace(options.study, *options.opened);
  }

  // The session of study `name`, opened at the first call.
  StudySession& Session(const std::string& name);

  struct Claimed {
    StudySession* session = nullptr;
    ActiveTrial trial;
  };
  // Claims a pending trial for `worker` of the first study this program can train whose trial `fits` (its
  // processes and GPUs are free). nullopt when none is pending.
  std::optional<Claimed> Claim(const std::string& worker, const std::function<bool(const StudySession&)>& fits);

  // Puts back trials of lost workers: those of this machine whose process is gone at once, others once their
  // heartbeat is older than stale_after; and, `at_start`, stopped trials, and with retry_failed failed ones. Returns
  // how many failed trials were put back.
  int SweepLostTrials(bool at_start);

  // Whether a worker with no trial of its own should keep waiting (after a short sleep): pending trials exist
  // (another worker may be slow to release them) or, with wait_for_others, trials run elsewhere and may come back.
  // `announced`: the wait was told before.
  bool TrialsLeft(bool announced);

 private:
  std::vector<std::string> Names();
  // Session(name), or null for a study that is not ours to run.
  StudySession* SessionIfReadable(const std::string& name);
  bool CanTrain(const std::string& name, const StudySession& session);
  std::vector<ReclaimedTrial> ReclaimLost(std::int64_t study_id);
  int ResumeAtStart(const std::string& name, std::int64_t study_id);

  Store& store_;
  const WorkerOptions& options_;
  RunObserver& observer_;
  std::map<std::string, StudySession> sessions_;
  std::set<std::string> unknown_workloads_;  // studies skipped because this program cannot train their workload
};

}  // namespace dltune
