#include "dltune/run/run_study.h"

#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "core/machine.h"
#include "dltune/core/error.h"
#include "dltune/run/study_session.h"
#include "run/gpu_placement.h"
#include "run/parallel_layout.h"
#include "run/trial_setup.h"
#include "run/worker.h"
#include "run/worker_gang.h"
#include "store/tracking.h"
#include "trial/trial_environment.h"
#include "trial/trial_process.h"
#include "trial/trial_server.h"

namespace dltune {
namespace {

WorkerOptions ToWorkerOptions(const RunOptions& options) {
  return {.parallel = options.parallel,
          .stale_after = options.stale_after,
          .max_retries = options.max_retries,
          .dltune_executable = options.dltune_executable,
          .worker_id = options.worker_id,
          .max_consecutive_failures = options.max_consecutive_failures,
          .retry_failed = options.retry_failed,
          .gpus = options.gpus,
          .mps = options.mps};
}

std::filesystem::path DltuneExecutable(const RunOptions& options) {
  return options.dltune_executable.empty() ? SelfExecutable() : options.dltune_executable;
}

// Chooses the layout of the study's trials (measuring it if need be) and sets it in `worker`. The probe's processes
// are forked by `trial_server`, which then forks the study's trials too: it is started once, for both, here. `gpus`
// says whether its trials train on GPUs (then the layout is not measured on the CPU).
ParallelLayout ApplyLayout(Store& store, const StudySession& session, const RunOptions& options,
                           const GpuPlacement& gpus, WorkerOptions& worker, TrialServer& trial_server,
                           RunObserver& observer) {
  const TrialCounts counts = store.CountTrials(session.study().id);
  const auto ended = static_cast<std::uint64_t>(
      counts.Count(TrialState::kCompleted) + counts.Count(TrialState::kInfeasible) + counts.Count(TrialState::kFailed));
  const std::uint64_t planned = StudyPlan(session.spec()).TrialCount();
  const LayoutRequest request{.parallel = options.parallel,
                              .trials_to_run = planned > ended ? planned - ended : 0,
                              .dltune_executable = DltuneExecutable(options),
                              .progress = [&observer](const std::string& what) { observer.MeasuringLayout(what); },
                              .trial_server = &trial_server,
                              .trials_on_gpus = gpus.GpusFor(session.spec()) > 0,
                              .gpu_models = gpus.Models()};
  BecomeSubreaper();  // warm probe processes are re-parented to this process, as warm trials are
  worker.trial_server = &trial_server;
  const StudySpec& spec = session.spec();
  if (spec.command.empty() && !spec.workload.name.empty()) {
    // Loaded and its data decoded while the layout is chosen and the worker starts: the first trial (or probe) is
    // forked at once.
    trial_server.Warm(DltuneExecutable(options), LoadEnvironmentOf(SharedTrialEnvironment(/*builtin=*/true)),
                      {{"DLTUNE_WORKLOAD", spec.workload.name}, {"DLTUNE_WORKLOAD_ARGS", spec.workload.args.dump()}});
  }
  ParallelLayout layout = ChooseParallelLayout(session.spec(), request);
  observer.LayoutChosen(layout);
  worker.parallel = layout.trials * layout.processes;  // the worker counts processes
  worker.threads_per_trial = layout.threads;
  // Left out, training.fuse is measured only where fusion can win and the probe is cheap; silent otherwise.
  const bool on_cuda = request.trials_on_gpus || (spec.training.device == "cuda" && spec.training.processes == 1);
  const FusionPlan plan = PlanFusion(spec, on_cuda, request.trials_to_run, FusibleStudy);
  if (plan.probe) {
    const FusionChoice fusion = ChooseFusion(spec, request, layout);
    worker.fuse_auto = fusion.members;
    const std::string why =
        (spec.training.fuse == "auto" ? "training.fuse auto: " : "training.fuse (default; " + plan.why + "): ") +
        fusion.basis;
    observer.Notice(why);
    store.AddNote(session.study().id, {.text = why, .author = "dltune run"});  // the decision log keeps why
  }
  return layout;
}

// The study of `spec`, created when the store has none (checked first: a mistake costs no study). Workers of one job
// start together: when another created it a moment before (the store refuses a second study of the name), it is
// opened.
StudySession OpenOrCreateStudy(Store& store, const StudySpec& spec, const RunOptions& options) {
  if (!store.FindStudy(spec.name)) CheckSpecBeforeCreating(spec);
  try {
    return StudySession::OpenOrCreate(store, spec, options.command_line, options.extend);
  } catch (const Error&) {
    if (options.extend) throw;  // only `dltune run` extends, and it runs alone
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return StudySession::OpenOrCreate(store, spec, options.command_line, false);
  }
}

// The exit status, from how the loop ended and what the studies' trials are now.
int ExitStatusOf(Store& store, const RunSummary& summary, const std::vector<StudyRecord>& studies) {
  if (summary.interrupted) return kExitStopped;
  if (!summary.halted.empty()) return summary.halted_resumable ? kExitStopped : kExitHalted;
  std::int64_t left = 0, failed = 0;
  for (const auto& study : studies) {
    const StudySummary counts = SummarizeStudy(store, study, 0);  // counts the trials not made yet as pending
    left +=
        counts.Count(TrialState::kPending) + counts.Count(TrialState::kRunning) + counts.Count(TrialState::kStopped);
    failed += counts.Count(TrialState::kFailed);
  }
  if (left > 0) return kExitStopped;
  return failed > 0 ? kExitSomeFailed : kExitDone;
}

// Runs the worker loop over study `study_id` (0: every study a worker of this program can train) and sums it up.
RunSummary RunLoop(Store& store, const WorkerOptions& options, std::int64_t study_id, RunObserver& observer,
                   const std::atomic<int>& stop_requests) {
  observer.TrialsStarting(store, study_id, options.parallel > 0 ? options.parallel : DefaultParallelism(1));
  RunSummary run;
  try {
    run = RunWorker(store, options, observer, stop_requests);
  } catch (const StoreUnavailableError& e) {
    observer.TrialsEnded();
    run.store_unavailable = e.what();
    run.exit_status = kExitStopped;
    return run;
  } catch (...) {
    observer.TrialsEnded();
    throw;
  }
  observer.TrialsEnded();
  for (auto& study : store.ListStudies()) {
    if (study_id != 0 ? study.id == study_id : WorkerCanTrain(study)) run.studies.push_back(std::move(study));
  }
  if (study_id != 0 && run.studies.empty()) {
    throw StudyDeletedError(
        fmt::format("{}: study '{}' was deleted (dltune delete) while this command was using it; its records are gone",
                    store.url(), options.study));
  }
  run.exit_status = ExitStatusOf(store, run, run.studies);
  return run;
}

// Throws Error unless a launcher job of gang.size workers can train `spec`'s trials as one gang.
void CheckGangFits(const StudySpec& spec, const WorkerGang& gang) {
  if (spec.training.processes != gang.size) {
    throw Error(
        fmt::format("this worker is task {} of {} of a launcher's job, whose workers train each trial as one "
                    "gang: study '{}' has training.processes {}, not {} (docs/data-parallel.md)",
                    gang.rank, gang.size, spec.name, spec.training.processes, gang.size));
  }
}

// A launcher's tasks form one gang for a data-parallel study; for any other each task is a worker of its own.
WorkerGang GangOf(const StudySpec& spec) {
  return spec.training.processes > 1 ? WorkerGangFromEnvironment(spec.training.collective_timeout_seconds)
                                     : WorkerGang{};
}

// A gang's worker other than rank 0 (worker_gang.h), until rank 0's says no trial is left.
RunSummary RunAsGangMember(const StudySpec& spec, const WorkerGang& gang, RunObserver& observer,
                           const std::atomic<int>& stop_requests) {
  CheckGangFits(spec, gang);
  RunSummary summary;
  summary.exit_status =
      RunGangMember(gang, stop_requests, [&observer](const std::string& line) { observer.Notice(line); });
  return summary;
}

}  // namespace

RunSummary RunStudy(Store& store, const StudySpec& spec, const RunOptions& options, RunObserver& observer,
                    const std::atomic<int>& stop_requests) {
  CheckWorkerCanTrain(spec);
  const GpuPlacement gpus(options.gpus, 1, {});
  gpus.CheckCanRun(spec);  // GPUs it asks for and this machine lacks: refused before the study is made
  const StudySession session = OpenOrCreateStudy(store, spec, options);
  observer.StudyOpened(store, session.study(), session.spec());
  WorkerOptions worker = ToWorkerOptions(options);
  worker.study = spec.name;
  worker.opened = &session;  // the worker claims from this session rather than opening the study again
  worker.trials_per_gpu = session.spec().resources.trials_per_gpu;
  TrialServer trial_server;  // outlives the loop's trial processes
  const ParallelLayout layout = ApplyLayout(store, session, options, gpus, worker, trial_server, observer);
  RunSummary summary = RunLoop(store, worker, session.study().id, observer, stop_requests);
  summary.layout = layout;
  return summary;
}

RunSummary RunWorkerJob(const WorkerJob& job, const RunOptions& options, RunObserver& observer,
                        const std::atomic<int>& stop_requests) {
  // A gang's ranks other than 0 need only the spec's training settings: they start the ranks of the trials rank 0's
  // worker publishes, and never touch the store.
  if (job.spec) {
    if (const WorkerGang gang = GangOf(*job.spec); gang.size > 1 && gang.rank != 0) {
      return RunAsGangMember(*job.spec, gang, observer, stop_requests);
    }
  }
  const GpuPlacement gpus(options.gpus, 1, {});
  if (job.spec) {  // what this machine cannot train is refused before the study is made, as dltune run refuses it
    CheckWorkerCanTrain(*job.spec);
    gpus.CheckCanRun(*job.spec);
  }
  const auto store = OpenStore(job.store_url, job.spec.has_value());  // with a spec, created as dltune run creates it
  WorkerOptions worker = ToWorkerOptions(options);
  TrialServer trial_server;  // outlives the loop's trial processes
  // The session opened here is the worker's: the study is not looked up, nor its spec read, again.
  std::optional<StudySession> session;
  if (job.spec) {
    session = OpenOrCreateStudy(*store, *job.spec, options);
  } else if (!job.study.empty()) {
    session = StudySession::Open(*store, job.study);
  }
  std::int64_t study_id = 0;
  std::optional<ParallelLayout> layout;
  if (session) {
    study_id = session->study().id;
    worker.study = session->study().name;
    worker.opened = &*session;
    worker.trials_per_gpu = session->spec().resources.trials_per_gpu;
    if (const WorkerGang gang = GangOf(session->spec()); gang.size > 1) {
      if (gang.rank != 0) return RunAsGangMember(session->spec(), gang, observer, stop_requests);
      CheckGangFits(session->spec(), gang);
      worker.gang = gang;
      worker.parallel = gang.size;  // one trial at a time: the gang's
      // auto: the cores Slurm gave each task, else this machine's (a gang has one task per machine).
      worker.threads_per_trial = session->spec().training.threads > 0
                                     ? session->spec().training.threads
                                     : WholeNumberVariable("SLURM_CPUS_PER_TASK").value_or(AvailableCores());
      observer.Notice(fmt::format("gang of {} workers at {}:{}: this worker is rank 0 and claims the trials", gang.size,
                                  gang.address, gang.port));
    } else {
      layout = ApplyLayout(*store, *session, options, gpus, worker, trial_server, observer);
    }
  }
  RunSummary summary = RunLoop(*store, worker, study_id, observer, stop_requests);
  summary.layout = layout;
  return summary;
}

}  // namespace dltune
