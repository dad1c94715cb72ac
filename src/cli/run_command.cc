// `dltune run` (a study on this machine), `dltune worker` (trials from a shared store) and `dltune run-trial` (the
// process of one built-in trial, started by a worker).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "commands.h"
#include "dltune/core/error.h"
#include "dltune/core/machine.h"
#include "dltune/core/strings.h"
#include "dltune/run/builtin_trial.h"
#include "dltune/run/parallel_layout.h"
#include "dltune/run/study_session.h"
#include "dltune/run/trial_process.h"
#include "dltune/run/trial_report.h"
#include "dltune/run/trial_setup.h"
#include "dltune/run/worker.h"
#include "dltune/run/worker_gang.h"
#include "dltune/store/tracking.h"
#include "progress_view.h"

namespace dltune::cli {
namespace {

std::atomic<int> stop_requests{0};
std::atomic<bool> trial_stop_requested{false};

// First Ctrl-C (or SIGTERM): stop after checkpoints; second: kill the trials.
extern "C" void CountStopRequest(int) { stop_requests.fetch_add(1); }
extern "C" void RequestTrialStop(int) { trial_stop_requested.store(true); }

// SIGHUP (the terminal closed) stops like Ctrl-C: trials checkpoint and stop, resumable.
void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = CountStopRequest;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGHUP, &action, nullptr);
}

struct WorkerArgs {
  std::string storage;
  std::string study;
  std::string spec;  // dltune worker --spec: the study to create when the store lacks it, then work on
  int parallel = 0;
  double stale_after = 60;
  int max_retries = 3;
  int max_consecutive_failures = 5;
  bool retry_failed = false;
  std::string worker_id;
};

// What `dltune run` and `dltune worker` exit with (documented in their --help and the README).
constexpr int kExitAllDone = 0;     // every trial completed or infeasible
constexpr int kExitSomeFailed = 1;  // every trial ended, some failed
constexpr int kExitHalted = 3;      // stopped: trials kept failing the same way
constexpr const char* kExitStatusHelp =
    "\n\nExit status: 0 every trial completed (or is infeasible); 1 every trial ended but some failed (dltune show "
    "lists them; --retry-failed retries them); 3 stopped because trials kept failing the same way (the cause is "
    "printed); 75 stopped and resumable (Ctrl-C, a closed terminal, SIGTERM, trials left stopped, a full disk): run "
    "the same command again; 2 a mistake in the command or the spec.";

void AddWorkerOptions(CLI::App* command, WorkerArgs& args) {
  AddStorageOption(command, args.storage);
  command
      ->add_option("--parallel", args.parallel,
                   "Trials at once (default: the layout measured for the study's model on this machine, or the cores "
                   "available divided by the spec's training.threads when it gives them; docs/parallel-layout.md). A "
                   "data-parallel trial (training.processes: N) counts as N")
      ->check(WholeNumberIn(1, 4096));
  command
      ->add_option("--stale-after", args.stale_after,
                   "Seconds without a heartbeat after which another worker's running trial is taken over and "
                   "resumed from its latest checkpoint (default 60)")
      ->check(FiniteNumberIn(0.1, 86400 * 7));
  command
      ->add_option("--max-retries", args.max_retries,
                   "Times a trial is resumed after its worker was lost before it got any further, before it is "
                   "recorded as failed (default 3; a trial that made progress is always resumed)")
      ->check(WholeNumberIn(0, 1000));
  command
      ->add_option("--max-consecutive-failures", args.max_consecutive_failures,
                   "Stop once this many trials in a row failed the same way, printing the cause, rather than spend "
                   "the study's budget failing (default 5; 0: never stop)")
      ->check(WholeNumberIn(0, 1000000));
  command->add_flag("--retry-failed", args.retry_failed,
                    "Try the failed trials again (they resume from their latest checkpoint): after fixing what made "
                    "them fail");
  command->add_option("--worker-id", args.worker_id,
                      "This worker's name in the store, unique among the workers of a study (default: host:pid; "
                      "a worker of this machine whose process is gone is recognized at once)");
}

WorkerOptions ToWorkerOptions(const WorkerArgs& args) {
  return {.study = args.study,
          .parallel = args.parallel,
          .stale_after = args.stale_after,
          .max_retries = args.max_retries,
          .worker_id = args.worker_id,
          .max_consecutive_failures = args.max_consecutive_failures,
          .retry_failed = args.retry_failed};
}

// Sets how many trials run at once and the threads of each (ChooseParallelLayout) for the study's trials, and says
// which layout and why.
// Throws Error unless a launcher job of gang.size workers can train `spec`'s trials as one gang.
void CheckGangFits(const StudySpec& spec, const WorkerGang& gang) {
  if (spec.training.processes != gang.size) {
    throw Error(
        fmt::format("this worker is task {} of {} of a launcher's job, whose workers train each trial as one "
                    "gang: study '{}' has training.processes {}, not {} (docs/data-parallel.md)",
                    gang.rank, gang.size, spec.name, spec.training.processes, gang.size));
  }
}

// A gang's worker other than rank 0 (worker_gang.h), until rank 0's says no trial is left.
void RunAsGangMember(const StudySpec& spec, const WorkerGang& gang) {
  CheckGangFits(spec, gang);
  InstallStopHandlers();
  const int status = RunGangMember(gang, stop_requests, [](const std::string& line) {
    std::printf("%s\n", TerminalSafe(line).c_str());
    std::fflush(stdout);
  });
  if (status != 0) throw CLI::RuntimeError(status);
}

// The study of `spec`, created when the store has none. Workers of one job start together: when another created it
// a moment before (the store refuses a second study of the name), it is opened.
StudySession OpenOrCreateStudy(Store& store, const StudySpec& spec) {
  if (!store.FindStudy(spec.name)) CheckSpecBeforeCreating(spec);
  try {
    return StudySession::OpenOrCreate(store, spec, CommandLineText(), false);
  } catch (const Error&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    return StudySession::OpenOrCreate(store, spec, CommandLineText(), false);
  }
}

// Chooses the layout (measuring it if need be) and sets it in `options`. The probe's processes are forked by
// `trial_server`, which then forks the study's trials too: it is started once, for both.
void ApplyLayout(Store& store, const StudySession& session, WorkerOptions& options, TrialServer& trial_server) {
  const TrialCounts counts = store.CountTrials(session.study().id);
  const auto ended = static_cast<std::uint64_t>(
      counts.Count(TrialState::kCompleted) + counts.Count(TrialState::kInfeasible) + counts.Count(TrialState::kFailed));
  const std::uint64_t planned = StudyPlan(session.spec()).TrialCount();
  LayoutRequest request{.parallel = options.parallel,
                        .trials_to_run = planned > ended ? planned - ended : 0,
                        .dltune_executable = SelfExecutable(),
                        .trial_server = &trial_server};
  BecomeSubreaper();  // warm probe processes are re-parented to this process, as warm trials are
  options.trial_server = &trial_server;
  const bool tty = ::isatty(STDOUT_FILENO) == 1;
  request.progress = [tty](const std::string& what) {
    std::printf(tty ? "\rparallel layout: %s...\x1b[K" : "parallel layout: %s...\n", what.c_str());
    std::fflush(stdout);
  };
  const ParallelLayout layout = ChooseParallelLayout(session.spec(), request);
  if (tty) std::printf("\r\x1b[K");
  const std::string each = layout.processes > 1
                               ? fmt::format("{} ranks of {} thread{} each", layout.processes, layout.threads,
                                             layout.threads == 1 ? "" : "s")
                               : fmt::format("{} thread{} each", layout.threads, layout.threads == 1 ? "" : "s");
  std::printf("parallel layout: %d trial%s at once, %s: %s\n", layout.trials, layout.trials == 1 ? "" : "s",
              each.c_str(), TerminalSafe(layout.basis).c_str());
  std::fflush(stdout);
  options.parallel = layout.trials * layout.processes;  // the worker counts processes
  options.threads_per_trial = layout.threads;
}

// The study's tracking row, and for each sub-study its best trial: value, best step, checkpoint, reproduction.
void PrintOutcome(Store& store, const StudySession& session) {
  std::printf("\n%s", TrackingTable(store, {session.study()}).c_str());
  constexpr std::size_t kShownBests = 20;
  const StudySummary summary = SummarizeStudy(store, session.study(), kShownBests);
  if (summary.best_per_substudy.empty()) {
    std::printf("\nno trial completed yet\n");
    return;
  }
  for (const auto& best : summary.best_per_substudy) {
    const TrialRecord trial = *store.FindTrial(session.study().id, best.number);
    std::printf("\nbest of %s: %s%llu, %s %s, best step %lld of %lld\n", best.substudy_label.c_str(),
                best.stats ? "configuration's median replica, trial " : "trial ",
                static_cast<unsigned long long>(best.number), summary.objective.Name().c_str(),
                best.ValueText().c_str(), static_cast<long long>(best.step.value_or(0)),
                static_cast<long long>(session.spec().max_train_steps));
    std::string params;
    for (const auto& [name, value] : ParamsByName(*session.spec().space, trial.params)) {
      params += fmt::format("{}{}={}", params.empty() ? "" : ", ", name, FormatValue(value));
    }
    std::printf("  params:     %s\n", params.c_str());
    const auto checkpoint = BestCheckpoint(store.ListCheckpoints(trial.id), best.step);
    std::printf("  checkpoint: %s\n", checkpoint ? checkpoint->path.c_str() : "-");
    std::printf("  reproduce:  %s\n", ReproduceCommand(session.spec(), session.study(), trial).c_str());
  }
  if (summary.more_substudies) {
    std::printf("\n(the best of the first %zu sub-studies; dltune show %s lists more)\n", kShownBests,
                session.study().name.c_str());
  }
}

void PrintStartLine(Store& store, const StudySession& session) {
  const StudySummary summary = SummarizeStudy(store, session.study(), 0);
  if (summary.Count(TrialState::kPending) == summary.trial_count) {
    const StudyPlan plan(session.spec());
    std::uint64_t planned = 0;
    for (std::uint64_t n = 0; plan.IsAdaptive() && n < plan.TrialCount() && plan.IsPlanned(n); ++n) ++planned;
    const std::string adaptive =
        plan.IsAdaptive() ? fmt::format(" ({} planned, the others chosen from the results as they come in)", planned)
                          : "";
    std::printf("study %s: %llu trials%s in %s; trial directories in %s\n", session.study().name.c_str(),
                static_cast<unsigned long long>(plan.TrialCount()), adaptive.c_str(), store.url().c_str(),
                StudyDirectory(session.spec(), session.study()).c_str());
  } else {
    std::printf("study %s: resuming in %s (%s)\n", session.study().name.c_str(), store.url().c_str(),
                summary.StateText().c_str());
  }
  std::fflush(stdout);
}

// Whether a worker of this dltune trains the study's trials (not an ask/tell study, nor an unknown workload's).
bool WorkerCanTrain(const StudyRecord& study) {
  try {
    const StudySpec spec = ParseStudySpec(study.spec_text, study.spec_path.empty() ? study.name : study.spec_path);
    CheckWorkloadKnown(spec);
    return !spec.workload.name.empty() || !spec.command.empty();
  } catch (const Error&) {
    return false;
  }
}

// The exit status, from how the loop ended and what the studies' trials are now.
int ExitStatusOf(Store& store, const WorkerSummary& summary, const std::vector<StudyRecord>& studies) {
  if (summary.interrupted) return kTrialStoppedExitStatus;
  if (!summary.halted.empty()) return summary.halted_resumable ? kTrialStoppedExitStatus : kExitHalted;
  std::int64_t left = 0, failed = 0;
  for (const auto& study : studies) {
    const StudySummary counts = SummarizeStudy(store, study, 0);
    left +=
        counts.Count(TrialState::kPending) + counts.Count(TrialState::kRunning) + counts.Count(TrialState::kStopped);
    failed += counts.Count(TrialState::kFailed);
  }
  if (left > 0) return kTrialStoppedExitStatus;
  return failed > 0 ? kExitSomeFailed : kExitAllDone;
}

// Runs the loop over `studies` (the one study, or every study of the store) and returns the exit status.
int RunLoop(Store& store, const WorkerOptions& options, std::int64_t study_id, int parallel_for_view) {
  ProgressView view(store, study_id, parallel_for_view, ::isatty(STDOUT_FILENO) == 1);
  InstallStopHandlers();
  WorkerSummary summary;
  try {
    summary = RunWorker(store, options, view, stop_requests);
  } catch (const StoreUnavailableError& e) {
    view.Close();
    std::printf(
        "\nstopped: the store stayed unavailable (%s); the running trials were ended and resume from their "
        "latest checkpoint when the same command runs again\n",
        TerminalSafe(e.what()).c_str());
    return kTrialStoppedExitStatus;
  }
  view.Close();
  std::vector<StudyRecord> studies;  // the ones this loop ran: of every study, those a worker can train
  for (auto& study : store.ListStudies()) {
    if (study_id != 0 ? study.id == study_id : WorkerCanTrain(study)) studies.push_back(std::move(study));
  }
  const int status = ExitStatusOf(store, summary, studies);
  if (summary.interrupted) {
    std::printf("stopped: %d trial%s stopped with a checkpoint; run the same command again to resume\n",
                summary.stopped, summary.stopped == 1 ? "" : "s");
  } else if (!summary.halted.empty()) {
    std::printf(summary.halted_resumable
                    ? "\nstopped: %s\nFix the cause, then run the same command again: the stopped trials resume.\n"
                    : "\nstopped: %s\nFix the cause, then run the same command again with --retry-failed to try the "
                      "failed trials again (the others resume).\n",
                TerminalSafe(summary.halted).c_str());
  } else if (status == kTrialStoppedExitStatus) {
    std::printf(
        "\nsome trials are left stopped (dltune show lists them and why); run the same command again to "
        "resume them\n");
  }
  return status;
}

}  // namespace

void RegisterRunCommands(CLI::App& app) {
  {
    struct Args : WorkerArgs {
      std::string spec;
      bool no_report = false;
      bool extend = false;
    };
    auto args = std::make_shared<Args>();
    auto* run = app.add_subcommand(
        "run",
        "Run a study on this machine: create it in the store (or resume it), train its trials in parallel, each in "
        "its own process, and print the best trial of each sub-study with its best step, checkpoint and the command "
        "that reproduces it, and writes its HTML report (./STUDY-report.html). Running it again resumes: finished "
        "trials stay, stopped and lost ones resume from their "
        "latest checkpoint. Ctrl-C once: trials checkpoint and stop (exit status 75, resumable); twice: they are "
        "killed and resume from their latest checkpoint.\n\n"
        "Example:\n  dltune run examples/quickstart.yaml\n  dltune run examples/synthetic.yaml --parallel 2\n"
        "  dltune run examples/synthetic.yaml --extend   # after raising its trials: adds the new ones" +
            std::string(kExitStatusHelp));
    run->add_option("SPEC", args->spec, "The study spec (YAML; see docs/study-spec.md)")->required();
    AddWorkerOptions(run, *args);
    run->add_flag("--no-report", args->no_report,
                  "Do not write the study's HTML report (./STUDY-report.html, as dltune report does) at the end");
    run->add_flag("--extend", args->extend,
                  "When the study exists and the spec only raises its trials:, add the new trials (the same ones a "
                  "study with that many trials would have made from the start) and run them");
    run->callback([args] {
      const StudySpec spec = LoadStudySpec(args->spec);
      CheckWorkloadKnown(spec);
      if (spec.workload.name.empty() && spec.command.empty()) {
        throw Error(
            fmt::format("{}: names neither workload: nor command:, so dltune run has nothing to train; a "
                        "study without either is trained by your own program through the ask/tell API "
                        "(see examples/ask_tell)",
                        spec.file));
      }
      const auto store = OpenStore(StoreUrlOrDefault(args->storage));
      // A mistake costs no study: checked before one is made (a resumed study was checked when it was made).
      if (!store->FindStudy(spec.name)) CheckSpecBeforeCreating(spec);
      const StudySession session = StudySession::OpenOrCreate(*store, spec, CommandLineText(), args->extend);
      PrintStartLine(*store, session);
      WorkerOptions options = ToWorkerOptions(*args);
      options.study = spec.name;
      TrialServer trial_server;  // outlives the loop's trial processes
      ApplyLayout(*store, session, options, trial_server);
      const int status = RunLoop(*store, options, session.study().id, options.parallel);
      PrintOutcome(*store, StudySession::Open(*store, spec.name));
      if (!args->no_report) {
        std::printf("\n");
        try {
          PrintWrittenReport(*store, spec.name, "");
        } catch (const Error& e) {
          std::printf("no report: %s\n", TerminalSafe(e.what()).c_str());  // the records are complete either way
        }
      }
      if (status != 0) throw CLI::RuntimeError(status);
    });
  }
  {
    auto args = std::make_shared<WorkerArgs>();
    auto* worker = app.add_subcommand(
        "worker",
        "Run trials of studies in a shared store until none remain: one study (--study) or every study with trials "
        "to run. Start any number of workers on any number of machines against one PostgreSQL store; a worker that "
        "dies loses nothing — its trials are taken over after --stale-after seconds and resume from their latest "
        "checkpoint (put the spec's run_dir on a filesystem every machine mounts). Create the study first with "
        "dltune run (or the ask/tell API), or give its spec with --spec. The tasks of one launcher job (srun, "
        "torchrun: RANK and WORLD_SIZE or SLURM_PROCID and SLURM_NTASKS, with MASTER_ADDR and MASTER_PORT) train a "
        "data-parallel study's trials together, one rank each (docs/data-parallel.md).\n\n"
        "Example:\n  dltune worker --storage postgresql://tuner@db.example.com/dltune --study quickstart\n"
        "  srun -N 2 dltune worker --storage postgresql://tuner@db.example.com/dltune --spec study.yaml" +
            std::string(kExitStatusHelp));
    AddWorkerOptions(worker, *args);
    worker->add_option("--study", args->study, "Only this study (default: every study of the store)");
    worker
        ->add_option("--spec", args->spec,
                     "Only the study of this spec, created from it when the store has none yet (as dltune run "
                     "creates it): for job scripts whose workers all start at once")
        ->excludes("--study");
    worker->callback([args] {
      // A gang's ranks other than 0 need only the spec's training settings: they start the ranks of the trials
      // rank 0's worker publishes, and never touch the store.
      std::optional<StudySpec> spec_file;
      if (!args->spec.empty()) spec_file = LoadStudySpec(args->spec);
      // A launcher's tasks form one gang for a data-parallel study; for any other each task is a worker of its own.
      const auto gang_of = [](const StudySpec& spec) {
        return spec.training.processes > 1 ? WorkerGangFromEnvironment(spec.training.collective_timeout_seconds)
                                           : WorkerGang{};
      };
      if (spec_file) {
        if (const WorkerGang gang = gang_of(*spec_file); gang.size > 1 && gang.rank != 0) {
          RunAsGangMember(*spec_file, gang);
          return;
        }
      }
      // With --spec the store is created too, as dltune run creates it.
      const auto store = OpenStore(StoreUrlOrDefault(args->storage), spec_file.has_value());
      std::int64_t study_id = 0;
      WorkerOptions options = ToWorkerOptions(*args);
      TrialServer trial_server;  // outlives the loop's trial processes
      std::string study_name = args->study;
      if (spec_file) study_name = OpenOrCreateStudy(*store, *spec_file).study().name;
      if (!study_name.empty()) {
        const StudySession session = StudySession::Open(*store, study_name);
        study_id = session.study().id;
        if (const WorkerGang gang = gang_of(session.spec()); gang.size > 1) {
          if (gang.rank != 0) {
            RunAsGangMember(session.spec(), gang);
            return;
          }
          CheckGangFits(session.spec(), gang);
          options.gang = gang;
          options.parallel = gang.size;  // one trial at a time: the gang's
          // auto: the cores Slurm gave each task, else this machine's (a gang has one task per machine).
          options.threads_per_trial = session.spec().training.threads > 0
                                          ? session.spec().training.threads
                                          : WholeNumberVariable("SLURM_CPUS_PER_TASK").value_or(AvailableCores());
          std::printf("gang of %d workers at %s:%d: this worker is rank 0 and claims the trials\n", gang.size,
                      gang.address.c_str(), gang.port);
        } else {
          ApplyLayout(*store, session, options, trial_server);
        }
      }
      std::printf("worker %s on %s: %s\n",
                  args->worker_id.empty() ? DefaultWorkerId().c_str() : args->worker_id.c_str(), store->url().c_str(),
                  study_name.empty() ? "every study" : ("study " + study_name).c_str());
      std::fflush(stdout);
      const int status =
          RunLoop(*store, options, study_id, options.parallel > 0 ? options.parallel : DefaultParallelism(1));
      if (status == kExitAllDone || status == kExitSomeFailed) std::printf("worker done: no trial left to run\n");
      if (status != 0) throw CLI::RuntimeError(status);
    });
  }
  {
    auto* trial_server = app.add_subcommand(
        "trial-server",
        "Fork the processes of built-in trials with LibTorch loaded and their data decoded (warm trial processes, "
        "docs/trial-protocol.md). Started by dltune run and dltune worker on a socket of theirs, not by hand; "
        "DLTUNE_WARM_TRIALS=0 makes them start every trial by exec instead.\n\n"
        "Example (what a worker runs, its socket on descriptor 3):\n  dltune trial-server 3<&SOCKET");
    trial_server->group("Internal");
    trial_server->callback(
        [] { throw Error("dltune trial-server is started by a dltune worker, with its socket on descriptor 3"); });
  }
  {
    auto* probe = app.add_subcommand(
        "probe-speed",
        "Time the training steps of the built-in trial that $DLTUNE_TRIAL describes, for $DLTUNE_PROBE_SECONDS "
        "seconds (default 1), and write {\"steps_per_second\": N} to $DLTUNE_REPORT: the probe by which dltune run "
        "and dltune worker choose how many trials run at once and how many threads each uses "
        "(docs/parallel-layout.md). Started by them, not by hand.\n\n"
        "Example (what a layout probe runs):\n  DLTUNE_TRIAL=/tmp/probe/trial.json DLTUNE_THREADS=2 "
        "DLTUNE_REPORT=/dev/stdout dltune probe-speed");
    probe->group("Internal");
    probe->callback([] {
      const int status = RunSpeedProbe();
      std::fflush(nullptr);
      std::_Exit(status);  // as run-trial: LibTorch's static destructors would only add to the measurement's cost
    });
  }
  {
    auto* run_trial = app.add_subcommand(
        "run-trial",
        "Train one trial of a built-in workload as a worker's child process: reads the trial files named by "
        "$DLTUNE_TRIAL and reports on $DLTUNE_REPORT (docs/trial-protocol.md). Started by dltune run and dltune "
        "worker, not by hand: to train once by hand, use dltune train.\n\n"
        "Example (what a worker runs):\n  DLTUNE_TRIAL=runs/s/trial_0/trial.json DLTUNE_REPORT=/dev/fd/3 dltune "
        "run-trial");
    run_trial->group("Internal");
    run_trial->callback([] {
      std::signal(SIGTERM, RequestTrialStop);
      std::signal(SIGINT, RequestTrialStop);
      std::signal(SIGHUP, RequestTrialStop);
      const int status = RunBuiltinTrial(trial_stop_requested);
      // Everything is written and closed: skip the static destructors (LibTorch's take ~0.1 s), which its worker
      // would count as the trial's time.
      std::fflush(nullptr);
      std::_Exit(status);
    });
  }
}

}  // namespace dltune::cli
