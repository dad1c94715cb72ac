#include "run/worker.h"

#include <poll.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "builtin/fused_trial.h"
#include "core/clock.h"
#include "core/machine.h"
#include "dltune/run/study_session.h"
#include "dltune/study/study_spec.h"
#include "gpu/mps_daemon.h"
#include "run/failure_breaker.h"
#include "run/fused_group.h"
#include "run/gpu_placement.h"
#include "run/store_outage.h"
#include "run/trial_ending.h"
#include "run/trial_setup.h"
#include "run/trial_sink.h"
#include "run/warm_programs.h"
#include "run/worker_gang.h"
#include "run/worker_studies.h"
#include "store/tracking.h"
#include "store/trial_resources.h"
#include "trial/trial_environment.h"
#include "trial/trial_gang.h"
#include "trial/trial_process.h"
#include "trial/trial_server.h"

namespace dltune {
namespace {

struct FusedGroup;

// One trial running in this worker.
struct Slot {
  StudySession* session = nullptr;
  std::optional<ActiveTrial> trial;
  std::shared_ptr<TrialGang> process;  // its processes: one, or its data-parallel ranks; a fused group's, shared
  int processes = 1;                   // of --parallel's count (a fused group's first member counts its process)
  std::shared_ptr<FusedGroup> group;   // the fused group it trains in; null when it trains alone
  std::filesystem::path trial_dir;
  bool lease_lost = false;
  bool term_sent = false;
  bool kill_sent = false;
  bool timed_out = false;  // past training.timeout: stopped, then recorded as failed
  double term_sent_at = 0;
  double end_seen_at = 0;       // when its end line was read; 0: not yet
  bool hung_after_end = false;  // it did not exit within the grace after its end line: killed, recorded by the line
  // A fused member recorded as it ended (diverged) while its group trains on: its slot stays until the group's
  // process exits, and reads, records and counts nothing more.
  bool concluded = false;
  double last_flush = 0;
  TrialProgress progress;
  std::unique_ptr<TrialSink> sink;        // its report; null until the trial is prepared
  TrialCommand command;                   // what it was started with
  std::optional<GpuAssignment> gpu;       // its GPUs; none on the CPU
  std::unique_ptr<KeptLease> kept_alive;  // its heartbeat, stamped by the store's thread while this one is busy
  // The program server running its trial in its own process (reuse_process): busy with it until the slot goes.
  TrialServer* in_process_server = nullptr;
};

// The members of a fused group (training.fuse), by their index in it, and its process's report channel split among
// them. A member that failed to start is not one.
struct FusedGroup {
  explicit FusedGroup(std::size_t size) : splitter(size) {}
  std::vector<Slot*> members;
  std::vector<std::uint64_t> numbers;  // the members' trial numbers (kept: their slots go as they are concluded)
  GroupReportSplitter splitter;
  bool closed = false;           // the channel's end was given to every member (their slots may be gone after)
  bool failure_counted = false;  // its process's failure counted once for the failure breaker, not once a member
};

// How long a trial asked to stop (SIGTERM) after its timeout may take to write its checkpoint before it is killed:
// a tenth of its timeout, between 2 s and this.
constexpr double kTimeoutGraceSeconds = 30;

// How long the worker reads an ended trial's report channel that a process it could not kill still holds open.
constexpr double kReportDrainSeconds = 5;

// A trial that never started, or whose attempt is no longer ours, gives its GPUs back.
void ReleaseGpus(Slot& slot, GpuPlacement& gpus) {
  if (!slot.gpu) return;
  gpus.Ended(*slot.gpu, slot.process ? slot.process->pids() : std::vector<pid_t>{}, "", "", *slot.trial, WallSeconds());
  slot.gpu.reset();
}

// The GPUs' say in how the trial ended: a trial that ran out of GPU memory while sharing a GPU goes back to
// pending, to run alone; alone, it is infeasible. Records the trial's GPUs either way.
std::optional<GpuMemoryEnding> EndGpus(Slot& slot, GpuPlacement& gpus, const ExitStatus& status) {
  if (!slot.gpu) return std::nullopt;
  const auto& end = slot.sink->end();
  const bool infeasible = end && end->state == EndState::kInfeasible;
  const bool unsuccessful = !status.ok() || infeasible;
  auto ending =
      gpus.Ended(*slot.gpu, slot.process->pids(), unsuccessful ? TailOfFile(slot.trial_dir / "stderr.log") : "",
                 infeasible ? end->reason : "", *slot.trial, WallSeconds());
  slot.gpu.reset();
  return ending;
}

CheckpointRetention RetentionOf(const StudySpec& spec) {
  return {.keep_latest = spec.training.keep_latest_checkpoints,
          .keep_best = spec.training.keep_best_checkpoints,
          .direction = spec.objective.direction};
}

// SIGTERM: the trial writes a checkpoint and stops, to resume.
void AskToStop(Slot& slot) {
  slot.process->Signal(SIGTERM);
  slot.term_sent = true;
  slot.progress.stopping = true;
}

// Another worker holds the slot's trial now: this attempt's processes are killed and nothing more is recorded.
void AbandonAttempt(Slot& slot, const std::string& why, RunObserver& observer) {
  slot.lease_lost = true;
  slot.process->Signal(SIGKILL);
  observer.Notice(
      fmt::format("{} trial {}: {}; abandoning this attempt", slot.progress.study, slot.progress.number, why));
}

TrialSinkHooks SinkHooks(Slot& slot, RunObserver& observer) {
  return {.lease_lost = [&slot, &observer](const std::string& why) { AbandonAttempt(slot, why, observer); },
          .protocol_broken = [&slot] { slot.process->Signal(SIGKILL); },
          .disk_fault =
              [&slot, &observer](const std::string& why) {
                slot.process->Signal(SIGTERM);
                observer.Notice(fmt::format("{} trial {}: {}; stopping it, to resume when the study is run again",
                                            slot.progress.study, slot.progress.number, why));
              }};
}

// Reads a fused group's channel and gives each member its lines.
void ReadGroupReport(FusedGroup& group, TrialGang& process, bool at_eof) {
  if (group.closed) return;
  std::string bytes;
  const bool open = process.ReadReport(bytes);
  const bool ended = at_eof || !open;
  const std::vector<std::string> lines = group.splitter.Split(bytes);
  for (std::size_t m = 0; m < group.members.size(); ++m) {
    Slot& member = *group.members[m];
    if (!member.lease_lost && !member.concluded) member.sink->Feed(lines[m], ended);
  }
  group.closed = ended;
}

void ReadReport(Slot& slot, bool at_eof) {
  if (slot.group) {
    ReadGroupReport(*slot.group, *slot.process, at_eof);
    return;
  }
  std::string bytes;
  const bool open = slot.process->ReadReport(bytes);
  if (slot.lease_lost) return;  // what it writes now is not read, nor kept
  slot.sink->Feed(bytes, at_eof || !open);
}

// Waits up to 0.1 s for report lines from the running trials (a moment only when one is ending), then reads them.
void PollReports(std::vector<std::unique_ptr<Slot>>& slots) {
  std::vector<pollfd> fds;
  bool exiting = false;  // a process closed its report: it is ending, to be reaped within milliseconds
  for (const auto& slot : slots) {
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
  for (auto& slot : slots) ReadReport(*slot, false);
}

// Stops a trial running past its study's training.timeout: SIGTERM (it checkpoints), then SIGKILL after a grace
// period. It is recorded as failed, with the reason.
void EnforceTimeout(Slot& slot, double now, RunObserver& observer) {
  const double timeout = slot.session->spec().training.timeout_seconds;
  if (timeout <= 0 || slot.lease_lost) return;
  if (!slot.timed_out && now - slot.progress.started_at > timeout) {
    slot.timed_out = true;
    slot.process->Signal(SIGTERM);
    slot.term_sent_at = now;
    observer.Notice(fmt::format("{} trial {}: running for more than {} (training.timeout); stopping it",
                                slot.progress.study, slot.progress.number, FormatSeconds(timeout)));
  } else if (slot.timed_out && !slot.kill_sent &&
             now - slot.term_sent_at > std::clamp(timeout * 0.1, 2.0, kTimeoutGraceSeconds)) {
    slot.process->Signal(SIGKILL);
    slot.kill_sent = true;
  }
}

// Kills a trial whose processes have not exited `grace` seconds after its end line (a teardown that hangs: a process
// group's collective waiting on a rank already gone, a thread that never joins); it is recorded by its end line.
void EnforceEndGrace(Slot& slot, double now, double grace, RunObserver& observer) {
  if (slot.lease_lost || slot.hung_after_end || !slot.sink || !slot.sink->end()) return;
  if (slot.group) {  // a member that ended early waits for its mates: the grace runs from the group's last end
    for (const Slot* member : slot.group->members) {
      if (!member->lease_lost && (!member->sink || !member->sink->end())) return;
    }
  }
  if (slot.end_seen_at == 0) slot.end_seen_at = now;
  if (now - slot.end_seen_at <= grace) return;
  slot.hung_after_end = true;
  slot.process->Signal(SIGKILL);
  observer.Notice(
      fmt::format("{} trial {}: still running {} after its end line; killed, and recorded as its end line "
                  "says",
                  slot.progress.study, slot.progress.number, FormatSeconds(grace)));
}

// What RecordEnding needs of a slot whose processes ended with `status`.
EndedTrial EndedTrialOf(const Slot& slot, const ExitStatus& status) {
  return {.status = status,
          .trial_dir = slot.trial_dir,
          .protocol_error = slot.sink->protocol_error(),
          .disk_fault = slot.sink->disk_fault(),
          .end = slot.sink->end(),
          .term_sent = slot.term_sent,
          .kill_sent = slot.kill_sent,
          .timed_out = slot.timed_out,
          .hung_after_end = slot.hung_after_end,
          .timeout_seconds = slot.session->spec().training.timeout_seconds,
          .peer_failure = slot.process->PeerFailure()};
}

// When each free slot of --parallel's came free, longest free first: a trial started now could have started when
// the last of the slots it takes came free (its "scheduling" time).
class FreeSlots {
 public:
  void Open(int count, double at) { free_since_.assign(static_cast<std::size_t>(count), at); }
  void Release(int count, double at) { free_since_.insert(free_since_.end(), static_cast<std::size_t>(count), at); }

  // Takes the `count` longest-free slots; returns when the last of them came free (the run's start for slots never
  // used).
  double Take(int count) {
    if (free_since_.empty()) return WallSeconds();
    double since = 0;
    for (int i = 0; i < count && !free_since_.empty(); ++i) {
      since = std::max(since, free_since_.front());
      free_since_.pop_front();
    }
    return since;
  }

 private:
  std::deque<double> free_since_;
};

// Leaves a trial's --parallel slots free from now on unless it started.
struct FreeUnlessStarted {
  FreeUnlessStarted(FreeSlots& slots, int processes) : free_slots(slots), count(processes) {}
  FreeSlots& free_slots;
  int count;
  bool started = false;
  FreeUnlessStarted(const FreeUnlessStarted&) = delete;
  FreeUnlessStarted& operator=(const FreeUnlessStarted&) = delete;
  ~FreeUnlessStarted() {
    if (!started) free_slots.Release(count, WallSeconds());
  }
};

class Worker {
 public:
  Worker(Store& store, const WorkerOptions& options, RunObserver& observer, const std::atomic<int>& stops)
      : store_(store),
        options_(options),
        observer_(observer),
        stops_(stops),
        studies_(store, options, observer),
        outage_(options.store_patience, observer),
        breaker_(options.max_consecutive_failures),
        gpus_(options.gpus, options.trials_per_gpu, [&observer](const std::string& text) { observer.Notice(text); }) {
    worker_id_ = options.worker_id.empty() ? DefaultWorkerId() : options.worker_id;
    dltune_ = options.dltune_executable.empty() ? SelfExecutable() : options.dltune_executable;
    heartbeat_every_ = std::clamp(options.stale_after / 4, 0.05, 5.0);
    if (!options.study.empty()) CheckWorkerCanTrain(studies_.Session(options.study).spec());
    if (!options.study.empty()) gpus_.CheckCanRun(studies_.Session(options.study).spec());
    if (gpus_.has_gpus()) observer.Notice("GPUs: " + gpus_.Describe());
    if (options.mps) StartMps(observer);
    if (options.gang.size > 1) gang_ = std::make_unique<GangLeader>(options.gang);
    parallel_ =
        options.parallel > 0
            ? options.parallel
            : DefaultParallelism(options.study.empty() ? 1 : studies_.Session(options.study).spec().training.threads);
  }

  RunSummary Run() {
    BecomeSubreaper();  // a trial's orphaned descendants stay ours, to be ended with it
    free_slots_.Open(parallel_, WallSeconds());
    summary_.retried += studies_.SweepLostTrials(true);
    double next_claim = 0, next_sweep = WallSeconds() + options_.stale_after / 2, next_tick = 0;
    bool announced_wait = false;
    while (true) {
      try {
        HandleStopRequests();
        const double now = WallSeconds();
        if (!stopping_ && UsedProcesses() < parallel_ && now >= next_claim) {
          while (UsedProcesses() < parallel_ && ClaimAndStart()) {
          }
          if (UsedProcesses() < parallel_) next_claim = now + 0.5;  // nothing pending: ask again soon
        }
        if (slots_.empty()) {
          if (stopping_ || !studies_.TrialsLeft(announced_wait)) break;
          announced_wait = true;
        }
        PollReports(slots_);
        NoteWarmPrograms();
        UpdateGpus(now);
        ConcludeEndedMembers();
        ReapFinished();
        EnforceTimeouts();
        HeartbeatAll();
        if (!stopping_ && now >= next_sweep) {
          studies_.SweepLostTrials(false);
          ReapOrphans();  // descendants of trials that outlived their parents and have ended since
          next_sweep = now + std::max(0.5, options_.stale_after / 2);
        }
        if (now >= next_tick) {
          Tick();
          next_tick = now + 0.5;
        }
        outage_.Answered();
      } catch (const StoreUnavailableError& e) {
        if (!outage_.Wait(e)) throw;
      }
    }
    summary_.interrupted = stops_.load() > 0;
    return summary_;
  }

 private:
  bool ClaimAndStart() {
    // A data-parallel trial's ranks must fit beside the processes running (alone, it runs however many it has).
    auto claimed = studies_.Claim(worker_id_, [this](const StudySession& session) {
      const int processes = session.spec().training.processes;
      return (UsedProcesses() == 0 || UsedProcesses() + processes <= parallel_) &&
             gpus_.Fits(session.spec(), session.study().id);
    });
    if (!claimed) return false;
    StudySession& session = *claimed->session;
    if (!packings_read_ && gpus_.GpusFor(session.spec()) > 0) {
      packings_read_ = true;  // by the first study's trials: the GPUs' packing is one, whatever trains there
      gpus_.UsePackingsMeasuredBefore(session.spec(), options_.mps);
    }
    std::size_t limit = gang_ ? 0 : FuseLimit(session.spec(), options_.fuse_auto);
    if (TrainsAloneAfterItsGroup(claimed->trial)) limit = 0;
    // A trial with checkpoints joins a group only to resume with the group it was stopped in.
    const std::optional<std::int64_t> resumes_from = limit < 2 ? std::nullopt : NewestCheckpointStep(claimed->trial);
    if (limit >= 2 && !resumes_from) limit = ShareOfFreeSlots(session, limit);
    if (limit < 2) {
      Start(session, std::move(claimed->trial));
      return true;
    }
    const std::vector<std::uint64_t> stopped_group =
        resumes_from ? FusedGroupOf(claimed->trial.record().resources) : std::vector<std::uint64_t>{};
    if (resumes_from && stopped_group.size() < 2) {
      Start(session, std::move(claimed->trial));
      return true;
    }
    // A fused group: the next trials of its sub-study that differ only in fusible hyperparameters, fresh as the
    // first is, or stopped in its group at its step; then those of other sub-studies pending that may join it.
    const std::size_t substudy = claimed->trial.record().substudy;
    const std::string key = FusionKey(claimed->trial.ParamsByName());
    const auto joins = [&](const ActiveTrial& next) {
      return FusionKey(next.ParamsByName()) == key && NewestCheckpointStep(next) == resumes_from &&
             !TrainsAloneAfterItsGroup(next) &&
             (!resumes_from || FusedGroupOf(next.record().resources) == stopped_group);
    };
    std::vector<ActiveTrial> group;
    group.push_back(std::move(claimed->trial));
    std::optional<ActiveTrial> apart;  // claimed for the group, and not one to join it
    const auto fill_from = [&](std::size_t from) {
      while (group.size() < limit && !apart) {
        auto next = session.Ask(worker_id_, from);
        if (!next) return;
        if (joins(*next)) {
          group.push_back(std::move(*next));
        } else {
          apart.emplace(std::move(*next));
        }
      }
    };
    fill_from(substudy);
    if (group.size() < limit && !apart) {
      for (const std::size_t other : SubstudiesToFuse(
               session.spec(), store_.ListTrialsInState(session.study().id, TrialState::kPending), key, substudy)) {
        fill_from(other);
      }
    }
    // Members of one optimizer kind side by side: the array optimizer updates each such run together.
    std::stable_sort(group.begin(), group.end(), [](const ActiveTrial& a, const ActiveTrial& b) {
      return OptimizerKindOf(a.ParamsByName()) < OptimizerKindOf(b.ParamsByName());
    });
    StartGroup(session, std::move(group));
    if (apart) {
      if (UsedProcesses() < parallel_ && gpus_.Fits(session.spec(), session.study().id)) {
        Start(session, std::move(*apart));
      } else {  // back to pending, for the next claim
        apart->Stop("claimed for a fused group it could not join");
        store_.ResumeStopped(session.study().id);
      }
    }
    return true;
  }

  // On the CPU a group takes one slot of the parallel layout, one core's share of the machine: where more slots are
  // free, the trials still to start are shared among them (groups of at most those trials / free slots), so that no
  // core idles while one group trains them all. On a GPU a group fills the device, and keeps its size.
  std::size_t ShareOfFreeSlots(const StudySession& session, std::size_t limit) {
    const int free_slots = parallel_ - UsedProcesses();
    if (free_slots < 2 || gpus_.GpusFor(session.spec()) > 0) return limit;
    // Those pending, those the study has yet to make (a sampler may make them as it goes), and the one claimed.
    const TrialCounts counts = store_.CountTrials(session.study().id);
    const auto planned = static_cast<std::int64_t>(StudyPlan(session.spec()).TrialCount());
    const std::int64_t started = counts.made - counts.Count(TrialState::kPending);
    const auto trials = static_cast<std::size_t>(std::max<std::int64_t>(1, planned - started + 1));
    const auto slots = static_cast<std::size_t>(free_slots);
    return std::min(limit, (trials + slots - 1) / slots);
  }

  // The step of the trial's newest checkpoint, which it resumes from; nullopt when it starts afresh.
  // A trial whose fused group could not train together (recorded as a group of itself alone) trains alone since.
  static bool TrainsAloneAfterItsGroup(const ActiveTrial& trial) {
    return FusedGroupOf(trial.record().resources) == std::vector<std::uint64_t>{trial.record().number};
  }

  std::optional<std::int64_t> NewestCheckpointStep(const ActiveTrial& trial) {
    std::optional<std::int64_t> newest;
    for (const CheckpointRecord& checkpoint : store_.ListCheckpoints(trial.lease().trial_id)) {
      if (!checkpoint.deleted) newest = std::max(newest.value_or(checkpoint.step), checkpoint.step);
    }
    return newest;
  }

  // Processes of --parallel's count that the running trials take.
  int UsedProcesses() const {
    int used = 0;
    for (const auto& slot : slots_) used += slot->processes;
    return used;
  }

  std::unique_ptr<Slot> NewSlot(StudySession& session, ActiveTrial trial, int processes) {
    auto slot = std::make_unique<Slot>();
    slot->session = &session;
    slot->processes = processes;
    const StudySpec& spec = session.spec();
    slot->progress = {.study = spec.name,
                      .number = trial.number(),
                      .substudy = trial.record().substudy_label,
                      .max_steps = TrialMaxTrainSteps(spec, trial.record().params),
                      .started_at = WallSeconds()};
    slot->kept_alive = store_.KeepAlive(trial.lease(), heartbeat_every_);
    slot->trial.emplace(std::move(trial));
    return slot;
  }

  void Start(StudySession& session, ActiveTrial trial) {
    const int processes = session.spec().training.processes;
    const double free_since = free_slots_.Take(processes);
    FreeUnlessStarted slot_guard{free_slots_, processes};  // any way out but a started trial frees them
    auto slot = NewSlot(session, std::move(trial), processes);
    bool resuming = false;
    try {
      resuming = Launch(*slot, free_since);
    } catch (const LeaseLostError&) {
      ReleaseGpus(*slot, gpus_);
      return;
    } catch (const StoreUnavailableError&) {
      ReleaseGpus(*slot, gpus_);
      throw;  // the trial stays claimed with no process; once its heartbeat is stale, a sweep puts it back
    } catch (const Error& e) {
      ReleaseGpus(*slot, gpus_);
      CouldNotStart(*slot, e);
      return;
    }
    // Heartbeat at the loop's next pass: starting the process (a trial server's first start, under load) may have
    // taken much of stale_after since the claim's heartbeat.
    slot->last_flush = -std::numeric_limits<double>::infinity();
    observer_.TrialStarted(slot->progress, resuming);
    slots_.push_back(std::move(slot));
    slot_guard.started = true;
  }

  // Prepares the slot's trial and starts its processes; returns whether it resumes.
  bool Launch(Slot& slot, double free_since) {
    const StudySpec& spec = slot.session->spec();
    ActiveTrial& active = *slot.trial;
    slot.gpu = gpus_.Assign(spec, slot.session->study().id, active.number(), WallSeconds());
    const PreparedTrial prepared = PrepareTrial(spec, slot.session->study(), active, dltune_,
                                                std::max(1, options_.threads_per_trial), gpus_.VisibleTo(slot.gpu));
    slot.trial_dir = prepared.trial_dir;
    slot.sink = MakeSink(slot);
    TrialCommand command = prepared.command;
    AddMpsClient(command, slot.gpu.has_value());
    // Output files that were links to a fused group's (an earlier attempt trained in one) are its own again.
    for (const auto& log : {command.stdout_path, command.stderr_path}) {
      std::error_code error;
      if (std::filesystem::is_symlink(log, error)) std::filesystem::remove(log, error);
    }
    command.environment["DLTUNE_RESUME_MAX_STEP"] = std::to_string(slot.sink->ResumeLimit());
    const double spawned_at = WallSeconds();
    slot.sink->ProcessStarted(spawned_at);
    active.AddTime({{"scheduling", spawned_at - free_since}});
    slot.command = command;
    if (gang_) {
      // The other ranks start on the other workers of the gang; this machine runs rank 0.
      command = gang_->Publish(command, slot.trial_dir);
      slot.process = std::make_shared<TrialGang>(command, 1, spec.training.collective_timeout_seconds);
    } else {
      slot.process = std::make_shared<TrialGang>(command, slot.processes, spec.training.collective_timeout_seconds,
                                                 ServerFor(slot, command));
      ForgetFailedWarmProgram(slot);
    }
    if (slot.gpu) gpus_.Started(*slot.gpu, slot.process->pids());
    return prepared.resuming;
  }

  // The sink of the slot's trial, its directory prepared.
  std::unique_ptr<TrialSink> MakeSink(Slot& slot) {
    const std::int64_t trial_id = slot.trial->lease().trial_id;
    std::int64_t evaluated = 0;
    for (const auto& evaluation : store_.EvalSeries(trial_id)) evaluated = std::max(evaluated, evaluation.step);
    return std::make_unique<TrialSink>(*slot.trial, slot.progress, slot.trial_dir, RetentionOf(slot.session->spec()),
                                       store_.ListCheckpoints(trial_id), evaluated, SinkHooks(slot, observer_));
  }

  // Starts `trials` (trials of one sub-study that differ only in fusible hyperparameters, all fresh or all stopped
  // together in one group) as one fused group: one process, one --parallel slot, each member a trial of its own.
  void StartGroup(StudySession& session, std::vector<ActiveTrial> trials) {
    if (trials.size() == 1) {
      Start(session, std::move(trials.front()));
      return;
    }
    const double free_since = free_slots_.Take(1);
    FreeUnlessStarted slot_guard{free_slots_, 1};
    std::vector<std::unique_ptr<Slot>> members;
    members.reserve(trials.size());
    for (ActiveTrial& trial : trials) members.push_back(NewSlot(session, std::move(trial), members.empty() ? 1 : 0));
    try {
      LaunchGroup(members, free_since);
    } catch (const LeaseLostError&) {
      ReleaseGpus(*members.front(), gpus_);
      return;  // the members still held are put back by a sweep once their heartbeat is stale
    } catch (const StoreUnavailableError&) {
      ReleaseGpus(*members.front(), gpus_);
      throw;
    } catch (const Error& e) {
      ReleaseGpus(*members.front(), gpus_);
      for (auto& member : members) CouldNotStart(*member, e);
      return;
    }
    for (auto& member : members) {
      member->last_flush = -std::numeric_limits<double>::infinity();
      observer_.TrialStarted(member->progress, false);
      slots_.push_back(std::move(member));
    }
    slot_guard.started = true;
  }

  // Prepares the members' trials and starts the group's process (dltune run-fused), on the first member's GPUs.
  void LaunchGroup(std::vector<std::unique_ptr<Slot>>& members, double free_since) {
    Slot& first = *members.front();
    const StudySpec& spec = first.session->spec();
    first.gpu = gpus_.Assign(spec, first.session->study().id, first.trial->number(), WallSeconds());
    auto group = std::make_shared<FusedGroup>(members.size());
    TrialCommand command;
    std::string files;
    for (auto& member : members) {
      Slot& slot = *member;
      const PreparedTrial prepared = PrepareTrial(spec, slot.session->study(), *slot.trial, dltune_,
                                                  std::max(1, options_.threads_per_trial), gpus_.VisibleTo(first.gpu));
      slot.trial_dir = prepared.trial_dir;
      slot.sink = MakeSink(slot);
      slot.group = group;
      group->members.push_back(&slot);
      group->numbers.push_back(slot.progress.number);
      files += (prepared.trial_dir / "trial.json").string() + "\n";
      if (&slot == &first) {
        command = prepared.command;
      } else {
        PointLogsAtGroup(prepared.command, command);
      }
    }
    AddMpsClient(command, first.gpu.has_value());
    command.argv = {dltune_.string(), "run-fused"};
    command.environment[kFusedTrialsVariable] = files;
    std::string limits;  // each member's, as its lone trial's DLTUNE_RESUME_MAX_STEP
    for (const Slot* member : group->members) limits += std::to_string(member->sink->ResumeLimit()) + "\n";
    command.environment[kFusedResumeLimitsVariable] = limits;
    const double spawned_at = WallSeconds();
    for (auto& member : members) {
      member->sink->ProcessStarted(spawned_at);
      member->trial->AddTime({{"scheduling", spawned_at - free_since}});
    }
    auto process =
        std::make_shared<TrialGang>(command, 1, spec.training.collective_timeout_seconds, &TrialServerToUse());
    for (auto& member : members) member->process = process;
    if (first.gpu) gpus_.Started(*first.gpu, process->pids());
  }

  // A member's stdout and stderr are its group's: links to the first member's files, or where its own files exist
  // (an earlier attempt), a line there that says where this attempt's went.
  static void PointLogsAtGroup(const TrialCommand& member, const TrialCommand& group) {
    for (const auto& [own, shared] :
         {std::pair{member.stdout_path, group.stdout_path}, std::pair{member.stderr_path, group.stderr_path}}) {
      if (own.empty() || shared.empty()) continue;
      std::error_code error;
      // A link left by an earlier attempt in a group is replaced (writing through it would write the group's log).
      if (std::filesystem::is_symlink(own, error)) std::filesystem::remove(own, error);
      if (std::filesystem::exists(own, error)) {
        std::ofstream(own, std::ios::app)
            << "(this attempt trained in a fused group: its output is in " << shared.string() << ")\n";
      } else {
        std::filesystem::create_symlink(shared, own, error);
      }
    }
  }

  // The trial could not be started: a full or read-only disk is not the trial's fault, and it is stopped, to start
  // when run again; anything else fails it.
  void CouldNotStart(Slot& slot, const Error& error) {
    ActiveTrial& active = *slot.trial;
    const std::string infrastructure = InfrastructureFailure(
        TrialDirectory(slot.session->spec(), slot.session->study(), active.number()), error.what());
    if (!infrastructure.empty()) {
      active.Stop(fmt::format("could not start the trial: {}", infrastructure));
      Finished(slot, {TrialState::kStopped, infrastructure, FailureCause(infrastructure, "")});
      return;
    }
    const std::string reason = fmt::format("could not start the trial: {}", error.what());
    active.Fail(reason);
    Finished(slot, {TrialState::kFailed, reason, FailureCause(reason, "")});
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
      if (requests >= 1 && !slot->term_sent) AskToStop(*slot);
      if (requests >= 2 && !slot->kill_sent) {
        slot->process->Signal(SIGKILL);
        slot->kill_sent = true;
      }
    }
  }

  void EnforceTimeouts() {
    const double now = WallSeconds();
    for (auto& slot : slots_) {
      EnforceTimeout(*slot, now, observer_);
      EnforceEndGrace(*slot, now, options_.end_grace_seconds, observer_);
    }
  }

  // Writes what each trial reported since its last write, which tells the store it is alive; an evaluation is such
  // a write too.
  void HeartbeatAll() {
    const double now = WallSeconds();
    for (auto& slot : slots_) {
      if (slot->lease_lost || slot->concluded ||
          now - std::max(slot->last_flush, slot->sink->last_written_at()) < heartbeat_every_) {
        continue;
      }
      slot->last_flush = now;
      try {
        slot->trial->Flush();
      } catch (const LeaseLostError& e) {
        AbandonAttempt(*slot, e.what(), observer_);
      }
    }
  }

  void Tick() {
    std::vector<TrialProgress> running;
    for (const auto& slot : slots_) {
      if (!slot->concluded) running.push_back(slot->progress);
    }
    observer_.Tick(running);
  }

  void UpdateGpus(double now) {
    if (!gpus_.has_gpus()) return;
    for (auto& slot : slots_) {
      if (slot->gpu) gpus_.Progressed(*slot->gpu, slot->progress.step, now);
    }
    gpus_.Update(now);
    // Once: without MPS, processes sharing a GPU run their kernels in turns.
    if (!options_.mps && !told_of_mps_ && gpus_.Shares()) {
      told_of_mps_ = true;
      observer_.Notice(
          "GPU packing: trials sharing a GPU take turns on it; --mps runs their kernels side by side "
          "(docs/parallel-layout.md, \"GPUs\")");
    }
  }

  // Reads what an ended trial wrote, to its report channel's end. A process that still holds the channel after its
  // trial's leftovers were killed (one that left the process group and emptied its environment) is waited for
  // kReportDrainSeconds at most: the lines written before the trial ended are in the pipe already.
  void DrainReport(Slot& slot) {
    const double give_up = WallSeconds() + kReportDrainSeconds;
    while (slot.process->report_fd() >= 0 && WallSeconds() < give_up) {
      pollfd ready{slot.process->report_fd(), POLLIN, 0};
      ::poll(&ready, 1, 50);
      ReadReport(slot, false);
    }
    ReadReport(slot, true);
  }

  void ReapFinished() {
    for (auto it = slots_.begin(); it != slots_.end();) {
      Slot& slot = **it;
      const auto status = slot.process->TryWait();
      if (!status) {
        ++it;
        continue;
      }
      DrainReport(slot);
      NoteWarmProgram(slot);
      if (!slot.lease_lost) slot.sink->AccountProcessTime(WallSeconds());
      Conclude(slot, *status);
      free_slots_.Release(slot.processes, WallSeconds());
      it = slots_.erase(it);
    }
  }

  // A fused member that diverged is recorded infeasible at once, while its mates train on: a runner killed before
  // the group ends must not leave it running, without checkpoints beside mates that have some (so that the group
  // could never form again). Its end line says all: the group's exit status is its mates'.
  void ConcludeEndedMembers() {
    for (auto& slot : slots_) {
      if (!slot->group || slot->concluded || slot->lease_lost || !slot->sink) continue;
      const auto& end = slot->sink->end();
      if (!end || end->state != EndState::kInfeasible) continue;
      TrialEnding ending;
      try {
        slot->trial->SetResources(WithFusedGroup(slot->trial->resources(), slot->group->numbers));
        ending = RecordEnding(*slot->trial, EndedTrialOf(*slot, ExitStatus{}));
      } catch (const LeaseLostError& e) {
        AbandonAttempt(*slot, e.what(), observer_);
        continue;
      }
      slot->concluded = true;
      Finished(*slot, ending);
    }
  }

  // Records how the trial ended, from its exit status and what it reported.
  void Conclude(Slot& slot, const ExitStatus& status) {
    if (slot.lease_lost || slot.concluded) {
      ReleaseGpus(slot, gpus_);
      return;
    }
    TrialEnding ending;
    try {
      std::optional<GpuMemoryEnding> gpu_ending;
      if (slot.term_sent || slot.kill_sent) {
        ReleaseGpus(slot, gpus_);  // stopped on request: how it ended is not the GPUs' doing
      } else {
        gpu_ending = EndGpus(slot, gpus_, status);
      }
      if (gpu_ending && gpu_ending->state == TrialState::kStopped) {
        slot.trial->Stop(gpu_ending->reason);
        store_.ResumeStopped(slot.trial->record().study_id);  // back to pending at once, to run alone
        observer_.Notice(fmt::format("{} trial {}: {}", slot.progress.study, slot.progress.number, gpu_ending->reason));
        return;
      }
      if (slot.group && !slot.term_sent && !slot.kill_sent && !status.signal && status.code == kExitConflict &&
          !slot.sink->end()) {
        // The group could not form again (its members' checkpoints share no step): each member resumes alone, from
        // its own checkpoints, rather than the group failing every time it is run.
        const std::string reason = fmt::format("its fused group could not train together ({}): it resumes alone",
                                               LastLineOf(TailOfFile(slot.trial_dir / "stderr.log")));
        slot.trial->SetResources(WithFusedGroup(slot.trial->resources(), {slot.progress.number}));
        slot.trial->Stop(reason);
        store_.ResumeStopped(slot.trial->record().study_id);
        observer_.Notice(fmt::format("{} trial {}: {}", slot.progress.study, slot.progress.number, reason));
        return;
      }
      if (slot.group) slot.trial->SetResources(WithFusedGroup(slot.trial->resources(), slot.group->numbers));
      if (gpu_ending) {
        slot.trial->Infeasible(gpu_ending->reason);
        ending = {TrialState::kInfeasible, gpu_ending->reason, ""};
      } else {
        ending = RecordEnding(*slot.trial, EndedTrialOf(slot, status));
      }
    } catch (const LeaseLostError& e) {
      observer_.Notice(fmt::format("{} trial {}: {}", slot.progress.study, slot.progress.number, e.what()));
      return;
    }
    Finished(slot, ending);
  }

  void Finished(const Slot& slot, const TrialEnding& ending) {
    switch (ending.state) {
      case TrialState::kCompleted: ++summary_.completed; break;
      case TrialState::kInfeasible: ++summary_.infeasible; break;
      case TrialState::kStopped: ++summary_.stopped; break;
      default: ++summary_.failed; break;
    }
    // A fused group's process that failed fails each member with it: one failure of the study's, counted once.
    const bool counted_with_its_group =
        slot.group && ending.state == TrialState::kFailed && std::exchange(slot.group->failure_counted, true);
    if (!counted_with_its_group && breaker_.Count(ending.state, ending.cause)) Halt(slot, ending);
    observer_.TrialFinished({.trial = slot.progress,
                             .state = ending.state,
                             .reason = ending.reason,
                             .best_step = slot.trial->best_step(),
                             .best_value = slot.trial->best_value(),
                             .seconds = WallSeconds() - slot.progress.started_at,
                             .trial_dir = slot.trial_dir.string()});
  }

  // Stops the loop: trials keep ending the same way (the breaker tripped at `last`), so every further trial would
  // too. The other running trials checkpoint and stop, to resume once the cause is fixed.
  void Halt(const Slot& last, const TrialEnding& ending) {
    summary_.halted =
        fmt::format("{} trials in a row ended the same way, so the others would too: {}{}", breaker_.consecutive(),
                    ending.reason, last.trial_dir.empty() ? "" : " (last: " + last.trial_dir.string() + ")");
    summary_.halted_resumable = ending.state == TrialState::kStopped;
    stopping_ = true;
    for (auto& other : slots_) {
      if (&*other != &last && !other->term_sent) AskToStop(*other);
    }
  }

  // --mps: a control daemon of the worker's own for its GPUs. Without GPUs, or where it cannot start, trials share
  // GPUs as they would without it, and the run says why.
  void StartMps(RunObserver& observer) {
    if (!gpus_.has_gpus()) {
      observer.Notice("--mps: this worker has no GPU; trials run as without it");
      return;
    }
    try {
      mps_ = std::make_unique<MpsDaemon>(gpus_.Uuids());
      observer.Notice("MPS: " + mps_->Describe() + "; the trials on its GPUs are its clients");
    } catch (const Error& e) {
      observer.Notice(fmt::format("--mps: {}; trials sharing a GPU take turns on it", e.what()));
    }
  }

  // A trial on a GPU becomes a client of the worker's MPS daemon, where it runs one.
  void AddMpsClient(TrialCommand& command, bool on_gpu) const {
    if (!mps_ || !on_gpu) return;
    for (const auto& [name, value] : mps_->ClientEnvironment()) command.environment[name] = value;
  }

  TrialServer& TrialServerToUse() { return options_.trial_server != nullptr ? *options_.trial_server : trial_server_; }

  // The server that may start the trial of `command` warm: dltune's for a built-in trial; for a command: program that
  // answered the offer of warm trials (one process, not a launcher's ranks), the program's own, started on first use:
  // one for the study that forks every trial, or, for a program that runs its trials in its server's own process,
  // one per trial running at once. A program that answered it before on this machine, run the same way, is asked from
  // its study's first trial on.
  TrialServer* ServerFor(Slot& slot, TrialCommand& command) {
    const StudySession& session = *slot.session;
    const StudySpec& spec = session.spec();
    if (spec.command.empty() || spec.training.processes != 1) return &TrialServerToUse();
    const std::int64_t study = session.study().id;
    if (warm_checked_.insert(study).second && warm_programs_.count(study) == 0) {
      if (const auto mode = KnownWarmMode(WarmKeyOf(spec, command))) {
        warm_programs_[study] = *mode;
        warm_known_before_.insert(study);
        if (*mode == WarmMode::kInProcess) StartInProcessServersAhead(session, command);
      }
    }
    const auto program = warm_programs_.find(study);
    if (program == warm_programs_.end()) return &TrialServerToUse();
    command.warm_program = true;
    if (program->second == WarmMode::kForked) return ForkingServer(session);
    command.reuse_process = true;
    slot.in_process_server = IdleInProcessServer(session, ReusedProcessEnvironmentOf(command.environment));
    return slot.in_process_server;
  }

  // An in-process server of the study not running a trial: one started on the same GPUs when there is one (its CUDA
  // context stays), else another idle one (started again on these), else a new one.
  TrialServer* IdleInProcessServer(const StudySession& session, const std::map<std::string, std::string>& load) {
    auto& servers = program_servers_[session.study().id];
    const auto busy = [this](const TrialServer* server) {
      return std::any_of(slots_.begin(), slots_.end(),
                         [&](const auto& slot) { return slot->in_process_server == server; });
    };
    TrialServer* idle = nullptr;
    for (const auto& server : servers) {
      if (busy(server.get())) continue;
      if (server->load_environment() == load) return server.get();
      if (idle == nullptr) idle = server.get();
    }
    if (idle != nullptr) return idle;
    servers.push_back(NewProgramServer(session, WarmMode::kInProcess));
    return servers.back().get();
  }

  TrialServer* ForkingServer(const StudySession& session) {
    auto& servers = program_servers_[session.study().id];
    if (servers.empty()) servers.push_back(NewProgramServer(session, WarmMode::kForked));
    return servers.front().get();
  }

  static std::unique_ptr<TrialServer> NewProgramServer(const StudySession& session, WarmMode mode) {
    return std::make_unique<TrialServer>(StudyDirectory(session.spec(), session.study()) / "warm-server.log",
                                         mode == WarmMode::kInProcess);
  }

  static nlohmann::json WarmKeyOf(const StudySpec& spec, const TrialCommand& command) {
    return WarmProgramKey(spec.command, command.working_dir, LoadEnvironmentOf(command.environment));
  }

  // A server started because its program served warm before, that failed before it forked a trial: the program no
  // longer serves warm (its trials start by exec from now on), and later studies start cold until it answers again.
  void ForgetFailedWarmProgram(const Slot& slot) {
    const std::int64_t study = slot.session->study().id;
    const auto servers = program_servers_.find(study);
    if (warm_known_before_.count(study) == 0 || servers == program_servers_.end() || servers->second.empty()) return;
    const TrialServer* server =
        slot.in_process_server != nullptr ? slot.in_process_server : servers->second.front().get();
    if (!server->failed() || server->trials_started() > 0) return;
    warm_known_before_.erase(study);
    ForgetServesWarm(WarmKeyOf(slot.session->spec(), slot.command));
  }

  // The studies whose program answered the offer of warm trials in a report read so far. The first answer starts
  // the program's server at once, for the trials it offered: its set-up runs while they train. The machine cache
  // keeps that the program answered, for the studies after this one.
  void NoteWarmPrograms() {
    for (const auto& slot : slots_) NoteWarmProgram(*slot);
  }
  void NoteWarmProgram(Slot& slot) {
    if (!slot.sink || !slot.sink->warm_offered()) return;
    const WarmMode mode = slot.sink->warm_reuse() ? WarmMode::kInProcess : WarmMode::kForked;
    if (!warm_programs_.emplace(slot.session->study().id, mode).second) return;
    const TrialCommand& command = slot.command;
    if (!slot.sink->warm_program().empty()) {
      RememberServesWarm(WarmKeyOf(slot.session->spec(), command), slot.sink->warm_program(), mode);
    }
    if (slot.session->spec().training.processes != 1) return;
    if (mode == WarmMode::kInProcess) {
      StartInProcessServersAhead(*slot.session, command);
    } else {
      ForkingServer(*slot.session)
          ->StartAhead(CommandLineOf(command), command.working_dir.string(), LoadEnvironmentOf(command.environment));
    }
  }

  // A program that runs its trials in its servers' own processes has one server for each trial running at once: all
  // are started now (on `command`'s GPUs), so that their set-ups run side by side, not each in a trial's start.
  void StartInProcessServersAhead(const StudySession& session, const TrialCommand& command) {
    auto& servers = program_servers_[session.study().id];
    while (static_cast<int>(servers.size()) < parallel_) {
      servers.push_back(NewProgramServer(session, WarmMode::kInProcess));
    }
    const auto load = ReusedProcessEnvironmentOf(command.environment);
    for (const auto& server : servers) {
      if (server->servers_started() == 0) {
        server->StartAhead(CommandLineOf(command), command.working_dir.string(), load);
      }
    }
  }

  Store& store_;
  const WorkerOptions& options_;
  RunObserver& observer_;
  const std::atomic<int>& stops_;
  std::string worker_id_;
  std::filesystem::path dltune_;
  TrialServer trial_server_;  // forks built-in trials warm; declared before slots_, so it outlives their processes
  // The studies whose command: program answered the offer of warm trials, and each one's server (its own program),
  // by study id; declared before slots_ too.
  std::map<std::int64_t, WarmMode> warm_programs_;
  std::set<std::int64_t> warm_checked_;       // studies whose program was looked up in the machine cache
  std::set<std::int64_t> warm_known_before_;  // those it named: their server starts with their first trial
  std::map<std::int64_t, std::vector<std::unique_ptr<TrialServer>>> program_servers_;
  bool told_of_mps_ = false;          // that --mps would let the trials sharing a GPU run side by side
  bool packings_read_ = false;        // the packings measured before on these GPUs (UsePackingsMeasuredBefore)
  std::unique_ptr<MpsDaemon> mps_;    // --mps; declared before slots_, so it outlives their processes too
  std::unique_ptr<GangLeader> gang_;  // rank 0 of a launcher job's gang of workers; null when alone
  double heartbeat_every_ = 5;
  int parallel_ = 1;
  bool stopping_ = false;
  WorkerStudies studies_;
  StoreOutage outage_;
  FailureBreaker breaker_;
  GpuPlacement gpus_;  // declared before slots_: trials give their GPUs back as they end
  std::vector<std::unique_ptr<Slot>> slots_;
  FreeSlots free_slots_;
  RunSummary summary_;
};

}  // namespace

RunSummary RunWorker(Store& store, const WorkerOptions& options, RunObserver& observer,
                     const std::atomic<int>& stop_requests) {
  return Worker(store, options, observer, stop_requests).Run();
}

int DefaultParallelism(int threads_per_trial) { return std::max(1, AvailableCores() / std::max(1, threads_per_trial)); }

}  // namespace dltune
