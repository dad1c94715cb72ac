#include "run/worker.h"

#include <poll.h>
#include <signal.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <deque>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "dltune/run/study_session.h"
#include "run/trial_gang.h"
#include "run/trial_process.h"
#include "run/trial_report.h"
#include "run/trial_server.h"
#include "run/trial_setup.h"
#include "run/worker_gang.h"
#include "store/tracking.h"
#include "tfevents.h"

namespace dltune {
namespace {

double Now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

// A checkpoint of a trial whose retention dltune manages.
struct KeptCheckpoint {
  std::int64_t id = 0;
  std::int64_t step = 0;
  std::optional<double> objective;
  std::filesystem::path path;
};

// One trial running in this worker.
struct Slot {
  StudySession* session = nullptr;
  std::optional<ActiveTrial> trial;
  std::unique_ptr<TrialGang> process;  // its processes: one, or its data-parallel ranks
  int processes = 1;                   // of --parallel's count
  ReportReader reader;
  std::filesystem::path trial_dir;
  bool manages_checkpoints = false;
  std::vector<KeptCheckpoint> checkpoints;  // recorded and not deleted, by step
  std::optional<ReportEnd> end;
  std::string protocol_error;
  std::optional<TfEventsWriter>
      tensorboard;         // the trial's scalars for `tensorboard --logdir`; gone after a write fails
  std::string disk_fault;  // a write of the worker's for the trial failed (a full disk): it is stopped, to resume
  bool lease_lost = false;
  bool term_sent = false;
  bool kill_sent = false;
  bool timed_out = false;  // past training.timeout: stopped, then recorded as failed
  double term_sent_at = 0;
  double last_flush = 0;
  double spawned_at = 0;  // when its process started
  bool start_seen = false;
  TrialProgress progress;
};

// How long a trial asked to stop (SIGTERM) after its timeout may take to write its checkpoint before it is killed:
// a tenth of its timeout, between 2 s and this.
constexpr double kTimeoutGraceSeconds = 30;

class Worker {
 public:
  Worker(Store& store, const WorkerOptions& options, RunObserver& observer, const std::atomic<int>& stops)
      : store_(store), options_(options), observer_(observer), stops_(stops) {
    worker_id_ = options.worker_id.empty() ? DefaultWorkerId() : options.worker_id;
    dltune_ = options.dltune_executable.empty() ? SelfExecutable() : options.dltune_executable;
    heartbeat_every_ = std::clamp(options.stale_after / 4, 0.05, 5.0);
    if (!options.study.empty()) CheckWorkerCanTrain(Session(options.study).spec());
    if (options.gang.size > 1) gang_ = std::make_unique<GangLeader>(options.gang);
    parallel_ = options.parallel > 0
                    ? options.parallel
                    : DefaultParallelism(options.study.empty() ? 1 : Session(options.study).spec().training.threads);
  }

  WorkerSummary Run() {
    BecomeSubreaper();  // a trial's orphaned descendants stay ours, to be ended with it
    free_since_.assign(static_cast<std::size_t>(parallel_), Now());
    SweepLostTrials(true);
    double next_claim = 0, next_sweep = Now() + options_.stale_after / 2, next_tick = 0;
    bool announced_wait = false;
    while (true) {
      try {
        HandleStopRequests();
        const double now = Now();
        if (!stopping_ && UsedProcesses() < parallel_ && now >= next_claim) {
          while (UsedProcesses() < parallel_ && ClaimAndStart()) {
          }
          if (UsedProcesses() < parallel_) next_claim = now + 0.5;  // nothing pending: ask again soon
        }
        if (slots_.empty()) {
          if (stopping_ || !TrialsLeft(announced_wait)) break;
          announced_wait = true;
        }
        Poll();
        ReapFinished();
        EnforceTimeouts();
        HeartbeatAll();
        if (!stopping_ && now >= next_sweep) {
          SweepLostTrials(false);
          ReapOrphans();  // descendants of trials that outlived their parents and have ended since
          next_sweep = now + std::max(0.5, options_.stale_after / 2);
        }
        if (now >= next_tick) {
          std::vector<TrialProgress> running;
          for (const auto& slot : slots_) running.push_back(slot->progress);
          observer_.Tick(running);
          next_tick = now + 0.5;
        }
        if (store_down_since_ > 0) {
          observer_.Notice(fmt::format("the store is back after {:.0f} s", Now() - store_down_since_));
          store_down_since_ = 0;
        }
      } catch (const StoreUnavailableError& e) {
        WaitForStore(e);
      }
    }
    summary_.interrupted = stops_.load() > 0;
    return summary_;
  }

 private:
  StudySession& Session(const std::string& name) {
    auto it = sessions_.find(name);
    if (it == sessions_.end()) it = sessions_.emplace(name, StudySession::Open(store_, name)).first;
    return it->second;
  }

  std::vector<std::string> StudiesOfInterest() {
    if (!options_.study.empty()) return {options_.study};
    std::vector<std::string> names;
    for (const auto& study : store_.ListStudies()) names.push_back(study.name);
    return names;
  }

  // Puts back trials of lost workers: those of this machine whose process is gone at once, others once their
  // heartbeat is older than stale_after; and, at start-up, stopped trials.
  void SweepLostTrials(bool at_start) {
    for (const auto& name : StudiesOfInterest()) {
      StudySession* session = nullptr;
      try {
        session = &Session(name);
      } catch (const Error& e) {
        if (!options_.study.empty()) throw;
        continue;  // a study whose spec this dltune cannot read is not ours to run
      }
      const std::int64_t study_id = session->study().id;
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
      for (const auto& r : reclaimed) {
        observer_.Notice(fmt::format("{} trial {}: worker {} was lost; {}", name, r.number, r.worker,
                                     r.new_state == TrialState::kPending ? "it will resume from its latest checkpoint"
                                                                         : "retried too often, recorded as failed"));
      }
      if (at_start) {
        if (const int resumed = store_.ResumeStopped(study_id); resumed > 0) {
          observer_.Notice(fmt::format("{}: {} stopped trial{} will resume", name, resumed, resumed == 1 ? "" : "s"));
        }
        if (options_.retry_failed) {
          if (const int retried = store_.RetryFailed(study_id); retried > 0) {
            summary_.retried += retried;
            observer_.Notice(
                fmt::format("{}: {} failed trial{} will be tried again", name, retried, retried == 1 ? "" : "s"));
          }
        }
      }
    }
  }

  // A worker id "host:pid" of this machine whose process no longer exists (and is not this one).
  bool IsGoneLocalWorker(const std::string& worker) const {
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

  // Whether the loop should keep waiting with no trial of its own: pending trials exist (another worker may be
  // slow to release them) or, with wait_for_others, trials run elsewhere and may come back.
  bool TrialsLeft(bool announced) {
    std::int64_t running_elsewhere = 0, pending = 0;
    for (const auto& name : StudiesOfInterest()) {
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

  bool ClaimAndStart() {
    for (const auto& name : StudiesOfInterest()) {
      StudySession* session = nullptr;
      try {
        session = &Session(name);
      } catch (const Error&) {
        if (!options_.study.empty()) throw;
        continue;
      }
      try {
        CheckWorkerCanTrain(session->spec());
      } catch (const Error& e) {
        if (!options_.study.empty()) throw;
        // An ask/tell study is its own program's to train: passed over without a word; an unknown workload is told.
        const bool ask_tell = session->spec().workload.name.empty() && session->spec().command.empty();
        if (!ask_tell && unknown_workloads_.insert(name).second) {
          observer_.Notice(fmt::format("{}: skipped: {}", name, e.what()));
        }
        continue;
      }
      // A data-parallel trial's ranks must fit beside the processes running (alone, it runs however many it has).
      if (UsedProcesses() > 0 && UsedProcesses() + session->spec().training.processes > parallel_) continue;
      if (auto trial = session->Ask(worker_id_)) {
        Start(*session, std::move(*trial));
        return true;
      }
    }
    return false;
  }

  // Processes of --parallel's count that the running trials take.
  int UsedProcesses() const {
    int used = 0;
    for (const auto& slot : slots_) used += slot->processes;
    return used;
  }

  // When the trial started now could have started: when the last of the `count` longest-free slots it takes came
  // free (the run's start for slots never used). Those slots are taken.
  double TakeFreeSlotTime(int count) {
    if (free_since_.empty()) return Now();
    double since = 0;
    for (int i = 0; i < count && !free_since_.empty(); ++i) {
      since = std::max(since, free_since_.front());
      free_since_.pop_front();
    }
    return since;
  }

  void Start(StudySession& session, ActiveTrial trial) {
    const int processes = session.spec().training.processes;
    const double free_since = TakeFreeSlotTime(processes);
    // Any way out of here but a started trial leaves the slots free from now on.
    struct FreeUnlessStarted {
      std::deque<double>& free_since;
      int count;
      bool started = false;
      ~FreeUnlessStarted() {
        if (!started) free_since.insert(free_since.end(), static_cast<std::size_t>(count), Now());
      }
    } slot_guard{free_since_, processes};
    auto slot = std::make_unique<Slot>();
    slot->session = &session;
    slot->processes = processes;
    const StudySpec& spec = session.spec();
    slot->progress = {.study = spec.name,
                      .number = trial.number(),
                      .substudy = trial.record().substudy_label,
                      .max_steps = TrialMaxTrainSteps(spec, trial.record().params),
                      .started_at = Now()};
    slot->trial.emplace(std::move(trial));
    ActiveTrial& active = *slot->trial;
    bool resuming = false;
    try {
      const PreparedTrial prepared =
          PrepareTrial(spec, session.study(), active, dltune_, std::max(1, options_.threads_per_trial));
      slot->trial_dir = prepared.trial_dir;
      resuming = prepared.resuming;
      for (const auto& checkpoint : store_.ListCheckpoints(active.lease().trial_id)) {
        if (!checkpoint.deleted) {
          slot->checkpoints.push_back({checkpoint.id, checkpoint.step, checkpoint.objective, checkpoint.path});
        }
      }
      // A checkpoint is recorded only after the measurements before it, so resuming from the newest recorded one
      // leaves no gap in the series, even when the last worker died with a newer checkpoint on disk unrecorded.
      std::int64_t resume_limit = 0;
      for (const auto& checkpoint : slot->checkpoints) resume_limit = std::max(resume_limit, checkpoint.step);
      TrialCommand command = prepared.command;
      command.environment["DLTUNE_RESUME_MAX_STEP"] = std::to_string(resume_limit);
      slot->tensorboard.emplace(slot->trial_dir);
      slot->spawned_at = Now();
      active.AddTime({{"scheduling", slot->spawned_at - free_since}});
      if (gang_) {
        // The other ranks start on the other workers of the gang; this machine runs rank 0.
        command = gang_->Publish(command, slot->trial_dir);
        slot->process = std::make_unique<TrialGang>(command, 1, spec.training.collective_timeout_seconds);
      } else {
        slot->process = std::make_unique<TrialGang>(command, processes, spec.training.collective_timeout_seconds,
                                                    &TrialServerToUse());
      }
    } catch (const LeaseLostError&) {
      return;
    } catch (const StoreUnavailableError&) {
      throw;  // the trial stays claimed with no process; once its heartbeat is stale, a sweep puts it back
    } catch (const Error& e) {
      // A full or read-only disk is not the trial's fault: it is stopped, to start when run again.
      const std::string infrastructure =
          InfrastructureFailure(TrialDirectory(spec, session.study(), active.number()), e.what());
      if (!infrastructure.empty()) {
        active.Stop(fmt::format("could not start the trial: {}", infrastructure));
        Finished(*slot, TrialState::kStopped, infrastructure, FailureCause(infrastructure, ""));
        return;
      }
      const std::string reason = fmt::format("could not start the trial: {}", e.what());
      active.Fail(reason);
      Finished(*slot, TrialState::kFailed, reason, FailureCause(reason, ""));
      return;
    }
    // Heartbeat at the loop's next pass: starting the process (a trial server's first start, under load) may have
    // taken much of stale_after since the claim's heartbeat.
    slot->last_flush = -std::numeric_limits<double>::infinity();
    observer_.TrialStarted(slot->progress, resuming);
    slots_.push_back(std::move(slot));
    slot_guard.started = true;
  }

  void HandleStopRequests() {
    const int requests = stops_.load();
    if (requests >= 1 && !stopping_) {
      stopping_ = true;
      if (!slots_.empty()) {
        observer_.Notice(
            fmt::format("stopping: {} running trial{} will write a checkpoint and stop (resumable); "
                        "press Ctrl-C again to kill them",
                        slots_.size(), slots_.size() == 1 ? "" : "s"));
      }
    }
    for (auto& slot : slots_) {
      if (requests >= 1 && !slot->term_sent) {
        slot->process->Signal(SIGTERM);
        slot->term_sent = true;
        slot->progress.stopping = true;
      }
      if (requests >= 2 && !slot->kill_sent) {
        slot->process->Signal(SIGKILL);
        slot->kill_sent = true;
      }
    }
  }

  void Poll() {
    std::vector<pollfd> fds;
    bool exiting = false;  // a process closed its report: it is ending, to be reaped within milliseconds
    for (const auto& slot : slots_) {
      if (slot->process->report_fd() >= 0) {
        fds.push_back({slot->process->report_fd(), POLLIN, 0});
      } else {
        exiting = true;
      }
    }
    const int timeout_ms = exiting ? 2 : 100;
    if (fds.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(exiting ? 2 : 20));
    } else {
      ::poll(fds.data(), fds.size(), timeout_ms);
    }
    for (auto& slot : slots_) ReadLines(*slot, false);
  }

  void ReadLines(Slot& slot, bool at_eof) {
    std::string bytes;
    const bool open = slot.process->ReadReport(bytes);
    if (!slot.protocol_error.empty() || slot.lease_lost) return;  // what it writes now is not read, nor kept
    slot.reader.Feed(bytes);
    try {
      while (auto line = slot.reader.Next(at_eof || !open)) Handle(slot, *line);
    } catch (const LeaseLostError& e) {
      slot.lease_lost = true;
      slot.process->Signal(SIGKILL);
      observer_.Notice(
          fmt::format("{} trial {}: {}; abandoning this attempt", slot.progress.study, slot.progress.number, e.what()));
    } catch (const StoreUnavailableError&) {
      throw;  // not the trial's doing: the loop waits for the store (what the trial reported is kept to be written)
    } catch (const Error& e) {
      slot.protocol_error = e.what();  // ProtocolError, or a rule ActiveTrial enforces (steps must increase)
      slot.process->Signal(SIGKILL);
    }
  }

  void Handle(Slot& slot, const ReportLine& line) {
    ActiveTrial& trial = *slot.trial;
    if (line.start) {
      trial.AddTime({{"startup", Now() - slot.spawned_at}});
      slot.start_seen = true;
      trial.Begin(line.start->step);
      slot.manages_checkpoints = line.start->manages_checkpoints;
      slot.progress.step = line.start->step;
      // Checkpoints after the resume point belong to a future that will be trained again.
      std::erase_if(slot.checkpoints, [&](const KeptCheckpoint& c) { return c.step > line.start->step; });
    } else if (line.train) {
      trial.ReportTrain(*line.train);
      ToTensorBoard(slot, [&](TfEventsWriter& events) { events.AddTrainMeasurement(*line.train, Now()); });
      slot.progress.step = line.train->step;
    } else if (line.eval) {
      trial.ReportEval(line.eval->step, line.eval->split, line.eval->metrics, line.eval->examples);
      ToTensorBoard(slot, [&](TfEventsWriter& events) {
        for (const auto& [metric, value] : line.eval->metrics) {
          events.AddEvalMeasurement(
              {.step = line.eval->step, .split = line.eval->split, .metric = metric, .value = value}, Now());
        }
        events.Flush();
      });
      slot.progress.step = std::max(slot.progress.step, line.eval->step);
      slot.progress.objective = trial.final_value();
      slot.progress.best = trial.best_value();
      slot.last_flush = Now();
    } else if (line.checkpoint) {
      HandleCheckpoint(slot, *line.checkpoint);
    } else if (line.end) {
      slot.end = line.end;
    } else if (line.timing) {
      trial.AddTime(line.timing->seconds);
    }
  }

  // Writes the trial's TensorBoard scalars. A write that fails (a full disk) is the machine's fault, not the trial's:
  // the trial is asked to stop (it checkpoints if it can) and recorded as stopped, to resume when run again; what it
  // reports meanwhile is still recorded.
  template <typename Write>
  void ToTensorBoard(Slot& slot, Write&& write) {
    if (!slot.tensorboard) return;
    try {
      write(*slot.tensorboard);
    } catch (const IoError& e) {
      slot.tensorboard.reset();
      slot.disk_fault = e.what();
      slot.process->Signal(SIGTERM);
      observer_.Notice(fmt::format("{} trial {}: {}; stopping it, to resume when the study is run again",
                                   slot.progress.study, slot.progress.number, e.what()));
    }
  }

  void HandleCheckpoint(Slot& slot, const ReportCheckpoint& reported) {
    ActiveTrial& trial = *slot.trial;
    const std::filesystem::path path = CheckpointPathOf(slot.trial_dir, reported.path);  // or ProtocolError
    // A checkpoint saved again at the same place replaces the files of the one recorded there, and a deletion
    // removes them: either way, every record of that place is done with.
    for (auto it = slot.checkpoints.begin(); it != slot.checkpoints.end();) {
      if (it->path != path) {
        ++it;
        continue;
      }
      trial.MarkCheckpointDeleted(it->id);
      it = slot.checkpoints.erase(it);
    }
    if (reported.deleted) return;
    const std::int64_t id =
        trial.ReportCheckpoint({.step = reported.step,
                                .path = path.string(),
                                .objective = reported.objective,
                                .checksum = reported.checksum,
                                .pool = reported.best ? CheckpointPool::kBest : CheckpointPool::kLatest});
    slot.checkpoints.push_back({id, reported.step, reported.objective, path});
    if (!slot.manages_checkpoints) ApplyRetention(slot);
  }

  // Keeps the newest keep_latest checkpoints and the keep_best best ones; deletes the rest that lie inside the
  // trial directory.
  void ApplyRetention(Slot& slot) {
    const TrainingSettings& training = slot.session->spec().training;
    const Direction direction = slot.session->spec().objective.direction;
    std::vector<KeptCheckpoint*> by_step, by_objective;
    for (auto& c : slot.checkpoints) {
      by_step.push_back(&c);
      if (c.objective) by_objective.push_back(&c);
    }
    std::sort(by_step.begin(), by_step.end(), [](auto* a, auto* b) { return a->step > b->step; });
    std::stable_sort(by_objective.begin(), by_objective.end(), [&](auto* a, auto* b) {
      if (*a->objective == *b->objective) return a->step < b->step;
      return IsBetter(*a->objective, *b->objective, direction);
    });
    std::set<std::int64_t> keep;
    for (std::size_t i = 0; i < by_step.size() && i < static_cast<std::size_t>(training.keep_latest_checkpoints); ++i)
      keep.insert(by_step[i]->id);
    for (std::size_t i = 0; i < by_objective.size() && i < static_cast<std::size_t>(training.keep_best_checkpoints);
         ++i)
      keep.insert(by_objective[i]->id);
    for (auto it = slot.checkpoints.begin(); it != slot.checkpoints.end();) {
      if (keep.count(it->id) || !RemoveInsideTrialDirectory(slot.trial_dir, it->path)) {
        ++it;
        continue;
      }
      slot.trial->MarkCheckpointDeleted(it->id);
      it = slot.checkpoints.erase(it);
    }
  }

  // Removes the checkpoint at `path` when it really lies in `trial_dir`: the directories on its way are resolved
  // through symbolic links first, so that a link never leads retention out of the trial directory (or onto dltune's
  // own files in it), and a checkpoint that is itself a link loses the link, not what it points to. False when it
  // lies elsewhere: nothing is removed.
  static bool RemoveInsideTrialDirectory(const std::filesystem::path& trial_dir, const std::filesystem::path& path) {
    std::error_code error;
    const std::filesystem::path real_dir = std::filesystem::canonical(trial_dir, error);
    if (error) return false;
    const std::filesystem::path real_parent = std::filesystem::weakly_canonical(path.parent_path(), error);
    if (error || !path.has_filename()) return false;
    const std::filesystem::path real = real_parent / path.filename();
    const std::filesystem::path inside = real.lexically_relative(real_dir);
    if (inside.empty() || *inside.begin() == "..") return false;
    try {
      CheckpointPathOf(real_dir, real.string());
    } catch (const ProtocolError&) {
      return false;
    }
    std::filesystem::remove_all(real, error);
    return true;
  }

  // The store cannot be reached (a database restart, a lost connection, a full disk): the trials go on running (what
  // they report waits in their pipes and in memory), and the loop tries again, more slowly each time, for up to
  // store_patience seconds before it gives up.
  void WaitForStore(const StoreUnavailableError& error) {
    const double now = Now();
    if (store_down_since_ == 0) {
      store_down_since_ = now;
      store_backoff_ = 0.5;
      observer_.Notice(
          fmt::format("the store is unavailable ({}); the trials keep running and dltune tries again "
                      "for up to {:.0f} s",
                      error.what(), options_.store_patience));
    }
    if (now - store_down_since_ > options_.store_patience) throw;
    std::this_thread::sleep_for(std::chrono::duration<double>(store_backoff_));
    store_backoff_ = std::min(store_backoff_ * 2, 10.0);
  }

  // Stops trials running past their study's training.timeout: SIGTERM (they checkpoint), then SIGKILL after a
  // grace period. They are recorded as failed, with the reason.
  void EnforceTimeouts() {
    const double now = Now();
    for (auto& slot : slots_) {
      const double timeout = slot->session->spec().training.timeout_seconds;
      if (timeout <= 0 || slot->lease_lost) continue;
      if (!slot->timed_out && now - slot->progress.started_at > timeout) {
        slot->timed_out = true;
        slot->process->Signal(SIGTERM);
        slot->term_sent_at = now;
        observer_.Notice(fmt::format("{} trial {}: running for more than {} (training.timeout); stopping it",
                                     slot->progress.study, slot->progress.number, FormatSeconds(timeout)));
      } else if (slot->timed_out && !slot->kill_sent &&
                 now - slot->term_sent_at > std::clamp(timeout * 0.1, 2.0, kTimeoutGraceSeconds)) {
        slot->process->Signal(SIGKILL);
        slot->kill_sent = true;
      }
    }
  }

  static std::string FormatSeconds(double seconds) {
    if (seconds >= 3600) return fmt::format("{:.3g} h", seconds / 3600);
    if (seconds >= 60) return fmt::format("{:.3g} min", seconds / 60);
    return fmt::format("{:.3g} s", seconds);
  }

  void HeartbeatAll() {
    const double now = Now();
    for (auto& slot : slots_) {
      if (slot->lease_lost || now - slot->last_flush < heartbeat_every_) continue;
      slot->last_flush = now;
      try {
        slot->trial->Flush();
      } catch (const LeaseLostError& e) {
        slot->lease_lost = true;
        slot->process->Signal(SIGKILL);
        observer_.Notice(fmt::format("{} trial {}: {}; abandoning this attempt", slot->progress.study,
                                     slot->progress.number, e.what()));
      }
    }
  }

  void ReapFinished() {
    for (auto it = slots_.begin(); it != slots_.end();) {
      Slot& slot = **it;
      const auto status = slot.process->TryWait();
      if (!status) {
        ++it;
        continue;
      }
      while (slot.process->report_fd() >= 0) ReadLines(slot, false);
      ReadLines(slot, true);
      AccountProcessTime(slot);
      Conclude(slot, *status);
      free_since_.insert(free_since_.end(), static_cast<std::size_t>(slot.processes), Now());
      it = slots_.erase(it);
    }
  }

  // The process's lifetime not accounted for by its start-up and the phases it reported is "other"; a process that
  // never sent its start line spent all of it starting up.
  void AccountProcessTime(Slot& slot) {
    if (slot.lease_lost || !slot.trial) return;
    ActiveTrial& trial = *slot.trial;
    const double lifetime = Now() - slot.spawned_at;
    if (!slot.start_seen) {
      trial.AddTime({{"startup", lifetime}});
      return;
    }
    double accounted = 0;
    for (const char* phase : {"startup", "data_load", "train", "evaluation", "checkpoint"}) {
      const auto it = trial.time_split().find(phase);
      if (it != trial.time_split().end()) accounted += it->second;
    }
    trial.AddTime({{"other", std::max(0.0, lifetime - accounted)}});
  }

  // Records how the trial ended, from its exit status and what it reported.
  void Conclude(Slot& slot, const ExitStatus& status) {
    if (slot.lease_lost) return;
    ActiveTrial& trial = *slot.trial;
    const auto tail = [&] { return TailOfFile(slot.trial_dir / "stderr.log"); };
    const int exit_code = status.signal ? 128 + status.signal : status.code;
    TrialState state = TrialState::kFailed;
    std::string reason;
    std::string cause;
    try {
      const std::string stderr_tail = tail();
      const std::string infrastructure =
          status.ok() || slot.term_sent || slot.kill_sent ? "" : InfrastructureFailure(slot.trial_dir, stderr_tail);
      if (!slot.protocol_error.empty()) {
        reason = slot.protocol_error + " (see docs/trial-protocol.md)";
        trial.Fail(reason, exit_code, stderr_tail);
        cause = FailureCause(reason, "");
      } else if (!slot.disk_fault.empty() && !status.ok()) {
        state = TrialState::kStopped;
        reason = fmt::format("{}; the trial was stopped ({}) and resumes when the study is run again", slot.disk_fault,
                             status.Describe());
        trial.Stop(reason);
        cause = FailureCause(slot.disk_fault, "");
      } else if (slot.timed_out) {
        reason = fmt::format(
            "timed out: it ran longer than training.timeout ({}); it resumes from its latest "
            "checkpoint if retried (dltune run --retry-failed)",
            FormatSeconds(slot.session->spec().training.timeout_seconds));
        trial.Fail(reason, exit_code, stderr_tail);
        cause = "timeout";
      } else if (!infrastructure.empty()) {
        state = TrialState::kStopped;
        reason = fmt::format("{}; the trial ended with {} and resumes when the study is run again", infrastructure,
                             status.Describe());
        trial.Stop(reason);
        cause = FailureCause(infrastructure, "");
      } else if (status.code == kExitStopped && !status.signal) {
        state = TrialState::kStopped;
        reason = slot.term_sent
                     ? "stopped on request at step " + std::to_string(trial.last_step())
                     : "the trial stopped itself (exit status 75) at step " + std::to_string(trial.last_step());
        trial.Stop(reason);
      } else if (slot.kill_sent || (slot.term_sent && status.signal == SIGTERM)) {
        state = TrialState::kStopped;
        reason = slot.kill_sent ? "killed on request; it resumes from its latest checkpoint"
                                : "stopped on request (it ended on SIGTERM without exit status 75); it resumes from "
                                  "its latest checkpoint";
        trial.Stop(reason);
      } else if (status.ok()) {
        if (slot.end && slot.end->infeasible) {
          state = TrialState::kInfeasible;
          reason = slot.end->reason;
          trial.Infeasible(reason);
        } else {
          state = trial.Complete();
          if (state == TrialState::kFailed) reason = "it reported no evaluation of the objective";
        }
      } else {
        reason = "the trial program ended with " + status.Describe();
        // A data-parallel trial: the rank that ended first is the cause; rank 0 only lost its peer.
        if (const std::string& peer = slot.process->PeerFailure(); !peer.empty()) {
          reason = fmt::format("{}; rank 0 then ended with {} (see {})", peer, status.Describe(),
                               (slot.trial_dir / "rank_*.log").string());
        }
        trial.Fail(reason, exit_code, stderr_tail);
        cause = FailureCause(reason, stderr_tail);
      }
      if (state == TrialState::kFailed && cause.empty()) cause = FailureCause(reason, "");
    } catch (const LeaseLostError& e) {
      observer_.Notice(fmt::format("{} trial {}: {}", slot.progress.study, slot.progress.number, e.what()));
      return;
    }
    Finished(slot, state, reason, cause);
  }

  // `cause`: for a failed trial, or one stopped by a fault of the machine, what it has in common with others that
  // ended the same way.
  void Finished(Slot& slot, TrialState state, const std::string& reason, const std::string& cause) {
    switch (state) {
      case TrialState::kCompleted: ++summary_.completed; break;
      case TrialState::kInfeasible: ++summary_.infeasible; break;
      case TrialState::kStopped: ++summary_.stopped; break;
      default: ++summary_.failed; break;
    }
    CountFailure(slot, state, reason, cause);
    observer_.TrialFinished({.trial = slot.progress,
                             .state = state,
                             .reason = reason,
                             .best_step = slot.trial->best_step(),
                             .best_value = slot.trial->best_value(),
                             .seconds = Now() - slot.progress.started_at,
                             .trial_dir = slot.trial_dir.string()});
  }

  // Stops the loop when max_consecutive_failures trials in a row ended with the same cause: every further trial
  // would fail the same way. Trials stopped on request do not break a run of failures; any other ending does.
  void CountFailure(const Slot& slot, TrialState state, const std::string& reason, const std::string& cause) {
    if (state == TrialState::kStopped && cause.empty()) return;
    if (cause.empty() || cause != failure_cause_) {
      failure_cause_ = cause;
      same_failures_ = 0;
    }
    if (cause.empty()) return;
    ++same_failures_;
    if (options_.max_consecutive_failures <= 0 || same_failures_ < options_.max_consecutive_failures ||
        !summary_.halted.empty()) {
      return;
    }
    summary_.halted =
        fmt::format("{} trials in a row ended the same way, so the others would too: {}{}", same_failures_, reason,
                    slot.trial_dir.empty() ? "" : " (last: " + slot.trial_dir.string() + ")");
    summary_.halted_resumable = state == TrialState::kStopped;
    stopping_ = true;
    for (auto& other : slots_) {
      if (&*other == &slot || other->term_sent) continue;
      other->process->Signal(SIGTERM);  // they checkpoint and stop, to resume once the cause is fixed
      other->term_sent = true;
      other->progress.stopping = true;
    }
  }

  Store& store_;
  const WorkerOptions& options_;
  RunObserver& observer_;
  const std::atomic<int>& stops_;
  std::string worker_id_;
  std::filesystem::path dltune_;
  TrialServer& TrialServerToUse() { return options_.trial_server != nullptr ? *options_.trial_server : trial_server_; }

  TrialServer trial_server_;  // forks built-in trials warm; declared before slots_, so it outlives their processes
  std::unique_ptr<GangLeader> gang_;  // rank 0 of a launcher job's gang of workers; null when alone
  double heartbeat_every_ = 5;
  int parallel_ = 1;
  bool stopping_ = false;
  std::set<std::string> unknown_workloads_;  // studies skipped because this program cannot train their workload
  double store_down_since_ = 0;              // when the store became unavailable; 0 while it answers
  double store_backoff_ = 0.5;               // seconds until the next try while it does not
  std::string failure_cause_;                // of the latest trials that failed alike
  int same_failures_ = 0;
  std::map<std::string, StudySession> sessions_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::deque<double> free_since_;  // when each free slot came free, longest free first
  WorkerSummary summary_;
};

}  // namespace

WorkerSummary RunWorker(Store& store, const WorkerOptions& options, RunObserver& observer,
                        const std::atomic<int>& stop_requests) {
  return Worker(store, options, observer, stop_requests).Run();
}

std::string FailureCause(const std::string& reason, const std::string& stderr_tail) {
  std::string last_line = stderr_tail.substr(stderr_tail.find_last_of('\n') + 1);
  if (stderr_tail.find_last_of('\n') == std::string::npos) last_line = stderr_tail;
  std::string cause = reason + "\n" + last_line;
  for (char& c : cause) {
    if (c >= '0' && c <= '9') c = '#';
  }
  return cause;
}

std::string InfrastructureFailure(const std::filesystem::path& trial_dir, const std::string& stderr_tail) {
  struct statvfs disk {};
  for (std::filesystem::path dir = trial_dir; !dir.empty(); dir = dir.parent_path()) {
    if (::statvfs(dir.c_str(), &disk) == 0) {
      if ((disk.f_flag & ST_RDONLY) != 0) return fmt::format("{} is on a read-only file system", dir.string());
      // Less than 1 MiB, or 0.1% of the disk, free: not enough to write a checkpoint or a log line.
      const double free_bytes = static_cast<double>(disk.f_bavail) * static_cast<double>(disk.f_frsize);
      const double total_bytes = static_cast<double>(disk.f_blocks) * static_cast<double>(disk.f_frsize);
      if (free_bytes < std::max(1048576.0, total_bytes * 0.001)) {
        return fmt::format("the disk of {} is full ({:.0f} kB free)", dir.string(), free_bytes / 1024);
      }
      break;
    }
    if (dir == dir.parent_path()) break;
  }
  for (const char* error :
       {"No space left on device", "Disk quota exceeded", "Read-only file system", "File too large"}) {
    if (stderr_tail.find(error) != std::string::npos) return std::string("the disk failed: ") + error;
  }
  return "";
}

int DefaultParallelism(int threads_per_trial) { return std::max(1, AvailableCores() / std::max(1, threads_per_trial)); }

}  // namespace dltune
