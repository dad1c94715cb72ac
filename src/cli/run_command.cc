// `dltune run` (a study on this machine), `dltune worker` (trials from a shared store) and `dltune run-trial` (the
// process of one built-in trial, started by a worker).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "builtin/builtin_trial.h"
#include "builtin/fused_trial.h"
#include "commands.h"
#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/run/run_study.h"
#include "dltune/run/study_session.h"
#include "progress_view.h"
#include "report/study_text.h"
#include "run/trial_setup.h"
#include "store/tracking.h"

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
  RunOptions run;
};

constexpr const char* kExitStatusHelp =
    "\n\nExit status: 0 every trial completed (or is infeasible); 1 every trial ended but some failed (dltune show "
    "lists them; --retry-failed retries them); 3 stopped because trials kept failing the same way (the cause is "
    "printed); 75 stopped and resumable (Ctrl-C, a closed terminal, SIGTERM, trials left stopped, a full disk): run "
    "the same command again; 2 a mistake in the command or the spec (docs/exit-statuses.md).";

void AddWorkerOptions(CLI::App* command, WorkerArgs& args) {
  AddStorageOption(command, args.storage);
  command
      ->add_option("--parallel", args.run.parallel,
                   "Trials at once (default: the layout measured for the study's model on this machine, or the cores "
                   "available divided by the spec's training.threads when it gives them; docs/parallel-layout.md). A "
                   "data-parallel trial (training.processes: N) counts as N")
      ->check(WholeNumberIn(1, 4096));
  command
      ->add_option("--stale-after", args.run.stale_after,
                   "Seconds without a heartbeat after which another worker's running trial is taken over and "
                   "resumed from its latest checkpoint (default 60)")
      ->check(FiniteNumberIn(0.1, 86400 * 7));
  command
      ->add_option("--max-retries", args.run.max_retries,
                   "Times a trial is resumed after its worker was lost before it got any further, before it is "
                   "recorded as failed (default 3; a trial that made progress is always resumed)")
      ->check(WholeNumberIn(0, 1000));
  command
      ->add_option("--max-consecutive-failures", args.run.max_consecutive_failures,
                   "Stop once this many trials in a row failed the same way, printing the cause, rather than spend "
                   "the study's budget failing (default 5; 0: never stop)")
      ->check(WholeNumberIn(0, 1000000));
  command->add_option(
      "--gpus", args.run.gpus,
      "The GPUs trials may use: all (default: those CUDA_VISIBLE_DEVICES leaves visible), none, or a "
      "comma list of positions among the visible GPUs or UUIDs, e.g. --gpus 0,1 (docs/parallel-layout.md, "
      "\"GPUs\")");
  command->add_flag("--mps", args.run.mps,
                    "Run the trials that share a GPU as clients of NVIDIA's Multi-Process Service, so that their "
                    "kernels run side by side rather than taking turns: dltune starts an MPS control daemon of its "
                    "own for its GPUs (nvidia-cuda-mps-control, from the driver's utilities) and stops it at the end; "
                    "without one, trials share GPUs as before (docs/parallel-layout.md, \"GPUs\")");
  command->add_flag("--retry-failed", args.run.retry_failed,
                    "Try the failed trials again (they resume from their latest checkpoint): after fixing what made "
                    "them fail");
  command->add_option("--worker-id", args.run.worker_id,
                      "This worker's name in the store, unique among the workers of a study (default: host:pid; "
                      "a worker of this machine whose process is gone is recognized at once)");
}

// What `dltune run` and `dltune worker` show: the layout, the start line, the trials' progress (ProgressView).
class RunView final : public RunObserver {
 public:
  // `worker_line`: what to say when the trials start, from the store's URL; may be empty.
  explicit RunView(std::function<std::string(const std::string&)> worker_line = {})
      : worker_line_(std::move(worker_line)) {}

  void StudyOpened(Store& store, const StudyRecord& study, const StudySpec& spec) override {
    PrintStartLine(store, study, spec);
  }
  void MeasuringLayout(const std::string& what) override {
    std::printf(tty_ ? "\rparallel layout: %s...\x1b[K" : "parallel layout: %s...\n", what.c_str());
    std::fflush(stdout);
  }
  void LayoutChosen(const ParallelLayout& layout) override {
    if (tty_) std::printf("\r\x1b[K");
    const std::string each = layout.processes > 1
                                 ? fmt::format("{} ranks of {} thread{} each", layout.processes, layout.threads,
                                               layout.threads == 1 ? "" : "s")
                                 : fmt::format("{} thread{} each", layout.threads, layout.threads == 1 ? "" : "s");
    std::printf("parallel layout: %d trial%s at once, %s: %s\n", layout.trials, layout.trials == 1 ? "" : "s",
                each.c_str(), TerminalSafe(layout.basis).c_str());
    std::fflush(stdout);
  }
  void TrialsStarting(Store& store, std::int64_t study_id, int parallel) override {
    if (worker_line_) std::printf("%s\n", TerminalSafe(worker_line_(store.url())).c_str());
    std::fflush(stdout);
    progress_.emplace(store, study_id, parallel, tty_);
  }
  void TrialStarted(const TrialProgress& trial, bool resuming) override {
    if (progress_) progress_->TrialStarted(trial, resuming);
  }
  void TrialFinished(const TrialEnded& ended) override {
    if (progress_) progress_->TrialFinished(ended);
  }
  void Notice(const std::string& message) override {
    if (progress_) return progress_->Notice(message);
    std::printf("%s\n", TerminalSafe(message).c_str());
    std::fflush(stdout);
  }
  void Tick(const std::vector<TrialProgress>& running) override {
    if (progress_) progress_->Tick(running);
  }
  void TrialsEnded() override { progress_.reset(); }  // removes the live block, before the final summary

 private:
  static void PrintStartLine(Store& store, const StudyRecord& study, const StudySpec& spec) {
    const StudySummary summary = SummarizeStudy(store, study, 0);
    if (summary.Count(TrialState::kPending) == summary.trial_count) {
      const StudyPlan plan(spec);
      std::uint64_t planned = 0;
      for (std::uint64_t n = 0; plan.IsAdaptive() && n < plan.TrialCount() && plan.IsPlanned(n); ++n) ++planned;
      const std::string adaptive =
          plan.IsAdaptive() ? fmt::format(" ({} planned, the others chosen from the results as they come in)", planned)
                            : "";
      std::printf("study %s: %llu trials%s in %s; trial directories in %s\n", study.name.c_str(),
                  static_cast<unsigned long long>(plan.TrialCount()), adaptive.c_str(), store.url().c_str(),
                  StudyDirectory(spec, study).c_str());
    } else {
      std::printf("study %s: resuming in %s (%s)\n", study.name.c_str(), store.url().c_str(),
                  summary.StateText().c_str());
    }
    std::fflush(stdout);
  }

  std::function<std::string(const std::string&)> worker_line_;
  bool tty_ = ::isatty(STDOUT_FILENO) == 1;
  std::optional<ProgressView> progress_;
};

// The study's tracking row, and for each sub-study its best trial: value, best step, checkpoint, reproduction.
void PrintOutcome(Store& store, const StudySession& session) {
  std::printf("\n%s", TrackingTable(store, {session.study()}).c_str());
  // A throughput sweep measures speed: its result is the batch size it recommends, not a best validation error.
  if (const std::optional<StudyResult> result = ThroughputResultOf(store, session.study())) {
    std::printf("\nthroughput: %s\n", TerminalSafe(result->text).c_str());
    return;
  }
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

// Says how the run ended, when not with every trial ended (the exit status says it too).
void PrintEnding(const RunSummary& summary) {
  if (!summary.store_unavailable.empty()) {
    std::printf(
        "\nstopped: the store stayed unavailable (%s); the running trials were ended and resume from their "
        "latest checkpoint when the same command runs again\n",
        TerminalSafe(summary.store_unavailable).c_str());
  } else if (summary.interrupted) {
    std::printf("stopped: %d trial%s stopped with a checkpoint; run the same command again to resume\n",
                summary.stopped, summary.stopped == 1 ? "" : "s");
  } else if (!summary.halted.empty()) {
    std::printf(summary.halted_resumable
                    ? "\nstopped: %s\nFix the cause, then run the same command again: the stopped trials resume.\n"
                    : "\nstopped: %s\nFix the cause, then run the same command again with --retry-failed to try the "
                      "failed trials again (the others resume).\n",
                TerminalSafe(summary.halted).c_str());
  } else if (summary.exit_status == kExitStopped) {
    std::printf(
        "\nsome trials are left stopped (dltune show lists them and why); run the same command again to "
        "resume them\n");
  }
}

// `dltune run`.
void RegisterRun(CLI::App& app) {
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
    const auto store = OpenStore(StoreUrlOrDefault(args->storage));
    RunOptions options = args->run;
    options.extend = args->extend;
    options.command_line = CommandLineText();
    RunView view;
    InstallStopHandlers();
    const RunSummary summary = RunStudy(*store, spec, options, view, stop_requests);
    PrintEnding(summary);
    PrintOutcome(*store, StudySession::Open(*store, spec.name));
    if (!args->no_report) {
      std::printf("\n");
      try {
        PrintWrittenReport(*store, spec.name, "");
      } catch (const Error& e) {
        std::printf("no report: %s\n", TerminalSafe(e.what()).c_str());  // the records are complete either way
      }
    }
    if (summary.exit_status != kExitDone) throw CLI::RuntimeError(summary.exit_status);
  });
}

// `dltune worker`.
void RegisterWorker(CLI::App& app) {
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
    WorkerJob job{.store_url = StoreUrlOrDefault(args->storage), .study = args->study};
    if (!args->spec.empty()) job.spec = LoadStudySpec(args->spec);
    RunOptions options = args->run;
    options.command_line = CommandLineText();
    const std::string worker_id = args->run.worker_id.empty() ? DefaultWorkerId() : args->run.worker_id;
    const std::string study = job.spec ? job.spec->name : args->study;
    RunView view([&](const std::string& url) {
      return fmt::format("worker {} on {}: {}", worker_id, url, study.empty() ? "every study" : "study " + study);
    });
    InstallStopHandlers();
    const RunSummary summary = RunWorkerJob(job, options, view, stop_requests);
    PrintEnding(summary);
    if (summary.exit_status == kExitDone || summary.exit_status == kExitSomeFailed) {
      std::printf("worker done: no trial left to run\n");
    }
    if (summary.exit_status != kExitDone) throw CLI::RuntimeError(summary.exit_status);
  });
}

// `dltune trial-server`.
void RegisterTrialServer(CLI::App& app) {
  auto* trial_server = app.add_subcommand(
      "trial-server",
      "Fork the processes of built-in trials with LibTorch loaded and their data decoded (warm trial processes, "
      "docs/trial-protocol.md). Started by dltune run and dltune worker on a socket of theirs, not by hand; "
      "DLTUNE_WARM_TRIALS=0 makes them start every trial by exec instead.\n\n"
      "Example (what a worker runs, its socket on descriptor 3):\n  dltune trial-server 3<&SOCKET");
  trial_server->group("");
  trial_server->callback(
      [] { throw Error("dltune trial-server is started by a dltune worker, with its socket on descriptor 3"); });
}

// `dltune probe-speed`.
void RegisterProbeSpeed(CLI::App& app) {
  auto* probe = app.add_subcommand(
      "probe-speed",
      "Time the training steps of the built-in trial that $DLTUNE_TRIAL describes, for $DLTUNE_PROBE_SECONDS "
      "seconds (default 1), and write {\"steps_per_second\": N} to $DLTUNE_REPORT: the probe by which dltune run "
      "and dltune worker choose how many trials run at once and how many threads each uses "
      "(docs/parallel-layout.md). Started by them, not by hand.\n\n"
      "Example (what a layout probe runs):\n  DLTUNE_TRIAL=/tmp/probe/trial.json DLTUNE_THREADS=2 "
      "DLTUNE_REPORT=/dev/stdout dltune probe-speed");
  probe->group("");
  probe->callback([] {
    const int status = RunSpeedProbe();
    std::fflush(nullptr);
    std::_Exit(status);  // as run-trial: LibTorch's static destructors would only add to the measurement's cost
  });
}

// `dltune run-trial`.
void RegisterRunTrial(CLI::App& app) {
  auto* run_trial = app.add_subcommand(
      "run-trial",
      "Train one trial of a built-in workload as a worker's child process: reads the trial files named by "
      "$DLTUNE_TRIAL and reports on $DLTUNE_REPORT (docs/trial-protocol.md). Started by dltune run and dltune "
      "worker, not by hand: to train once by hand, use dltune train.\n\n"
      "Example (what a worker runs):\n  DLTUNE_TRIAL=runs/s/trial_0/trial.json DLTUNE_REPORT=/dev/fd/3 dltune "
      "run-trial");
  run_trial->group("");
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

// `dltune run-fused`.
void RegisterRunFused(CLI::App& app) {
  auto* run_fused = app.add_subcommand(
      "run-fused",
      "Train a fused group of built-in trials as a worker's child process: the trials whose trial files "
      "$DLTUNE_FUSED_TRIALS lists (one path per line) trained together as one array model, each reporting on "
      "$DLTUNE_REPORT under its index (docs/trial-protocol.md, \"Fused trials\"). Started by dltune run and dltune "
      "worker for a study with training.fuse, not by hand.\n\n"
      "Example (what a worker runs):\n  DLTUNE_FUSED_TRIALS=$'runs/s/trial_0/trial.json\\nruns/s/trial_2/trial.json' "
      "DLTUNE_REPORT=/dev/fd/3 dltune run-fused");
  run_fused->group("");
  run_fused->callback([] {
    std::signal(SIGTERM, RequestTrialStop);
    std::signal(SIGINT, RequestTrialStop);
    std::signal(SIGHUP, RequestTrialStop);
    const int status = RunFusedTrials(trial_stop_requested);
    std::fflush(nullptr);
    std::_Exit(status);  // as run-trial
  });
}

}  // namespace

void RegisterRunCommands(CLI::App& app) {
  RegisterRun(app);
  RegisterWorker(app);
  RegisterTrialServer(app);
  RegisterProbeSpeed(app);
  RegisterRunTrial(app);
  RegisterRunFused(app);
}

}  // namespace dltune::cli
