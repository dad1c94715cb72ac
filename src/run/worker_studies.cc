#include "run/worker_studies.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <limits>
#include <thread>

#include <fmt/format.h>

#include "core/machine.h"
#include "run/trial_setup.h"

namespace dltune {
namespace {

// A worker id "host:pid" of this machine whose process no longer exists (and is not this one).
bool IsGoneLocalWorker(const std::string& worker) {
  const auto colon = worker.rfind(':');
  if (colon == std::string::npos) return false;
  static const std::string kHost = DefaultWorkerId().substr(0, DefaultWorkerId().rfind(':'));
  if (worker.substr(0, colon) != kHost) return false;
  pid_t pid = 0;
  try {
    pid = static_cast<pid_t>(std::stol(worker.substr(colon + 1)));
  } catch (const std::exception&) {
    return false;
  }
  if (pid <= 0 || pid == ::getpid()) return false;
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

StudySession& WorkerStudies::Session(const std::string& name) {
  auto it = sessions_.find(name);
  if (it == sessions_.end()) it = sessions_.emplace(name, StudySession::Open(store_, name)).first;
  return it->second;
}

std::vector<std::string> WorkerStudies::Names() {
  if (!options_.study.empty()) return {options_.study};
  std::vector<std::string> names;
  for (const auto& study : store_.ListStudies()) names.push_back(study.name);
  return names;
}

StudySession* WorkerStudies::SessionIfReadable(const std::string& name) {
  try {
    return &Session(name);
  } catch (const Error&) {
    if (!options_.study.empty()) throw;
    return nullptr;  // a study whose spec this dltune cannot read is not ours to run
  }
}

// An ask/tell study is its own program's to train: passed over without a word; an unknown workload is told, once.
bool WorkerStudies::CanTrain(const std::string& name, const StudySession& session) {
  try {
    CheckWorkerCanTrain(session.spec());
    return true;
  } catch (const Error& e) {
    if (!options_.study.empty()) throw;
    const bool ask_tell = session.spec().workload.name.empty() && session.spec().command.empty();
    if (!ask_tell && unknown_workloads_.insert(name).second) {
      observer_.Notice(fmt::format("{}: skipped: {}", name, e.what()));
    }
    return false;
  }
}

std::optional<WorkerStudies::Claimed> WorkerStudies::Claim(const std::string& worker,
                                                           const std::function<bool(const StudySession&)>& fits) {
  for (const auto& name : Names()) {
    StudySession* session = SessionIfReadable(name);
    if (session == nullptr || !CanTrain(name, *session) || !fits(*session)) continue;
    try {
      if (auto trial = session->Ask(worker)) return Claimed{session, std::move(*trial)};
    } catch (const StudyDeletedError&) {
      if (!options_.study.empty()) throw;  // the study this worker runs: a conflict that ends it
      sessions_.erase(name);               // one of every study, deleted since listed (a new one may take its name)
    }
  }
  return std::nullopt;
}

int WorkerStudies::SweepLostTrials(bool at_start) {
  int retried = 0;
  for (const auto& name : Names()) {
    StudySession* session = SessionIfReadable(name);
    if (session == nullptr) continue;
    const std::int64_t study_id = session->study().id;
    try {
      for (const auto& r : ReclaimLost(study_id)) {
        observer_.Notice(fmt::format("{} trial {}: worker {} was lost; {}", name, r.number, r.worker,
                                     r.new_state == TrialState::kPending ? "it will resume from its latest checkpoint"
                                                                         : "retried too often, recorded as failed"));
      }
      if (at_start) retried += ResumeAtStart(name, study_id);
    } catch (const StudyDeletedError&) {
      if (!options_.study.empty()) throw;
      sessions_.erase(name);
    }
  }
  return retried;
}

std::vector<ReclaimedTrial> WorkerStudies::ReclaimLost(std::int64_t study_id) {
  std::vector<ReclaimedTrial> reclaimed = store_.ReclaimStale(study_id, options_.stale_after, options_.max_retries);
  // A worker of this machine whose process is gone died while the machine stayed up when its trials heartbeated
  // since the machine started; after a restart (perhaps the trial's doing), they wait out stale_after, counted.
  static const double kBootTime = BootTime().value_or(std::numeric_limits<double>::infinity());
  std::set<std::string> gone;
  for (const auto& trial : store_.ListTrialsInState(study_id, TrialState::kRunning)) {
    if (trial.heartbeat_at.value_or(0) >= kBootTime && IsGoneLocalWorker(trial.worker)) gone.insert(trial.worker);
  }
  for (const auto& worker : gone) {
    for (auto& r : store_.ReclaimWorker(study_id, worker)) reclaimed.push_back(r);
  }
  return reclaimed;
}

// Stopped trials resume; with retry_failed, failed ones are tried again. Returns how many of those there were.
int WorkerStudies::ResumeAtStart(const std::string& name, std::int64_t study_id) {
  if (const int resumed = store_.ResumeStopped(study_id); resumed > 0) {
    observer_.Notice(fmt::format("{}: {} stopped trial{} will resume", name, resumed, resumed == 1 ? "" : "s"));
  }
  if (!options_.retry_failed) return 0;
  const int retried = store_.RetryFailed(study_id);
  if (retried > 0) {
    observer_.Notice(fmt::format("{}: {} failed trial{} will be tried again", name, retried, retried == 1 ? "" : "s"));
  }
  return retried;
}

bool WorkerStudies::TrialsLeft(bool announced) {
  std::int64_t running_elsewhere = 0, pending = 0;
  for (const auto& name : Names()) {
    if (!sessions_.count(name)) continue;
    const TrialCounts counts = store_.CountTrials(Session(name).study().id);
    running_elsewhere += counts.Count(TrialState::kRunning);
    pending += counts.Count(TrialState::kPending);
  }
  if (pending > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));  // claimed by others in the meantime, or soon ours
    return true;
  }
  if (!options_.wait_for_others || running_elsewhere == 0) return false;
  if (!announced) {
    observer_.Notice(
        fmt::format("waiting for {} trial{} running on other workers (they come back here if their "
                    "worker is lost)",
                    running_elsewhere, running_elsewhere == 1 ? "" : "s"));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return true;
}

}  // namespace dltune
