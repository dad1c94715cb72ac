// `dltune run` (a study on this machine), `dltune worker` (trials from a shared store) and `dltune run-trial` (the
// process of one built-in trial, started by a worker).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "dltune/core/error.h"
#include "dltune/run/builtin_trial.h"
#include "dltune/run/study_session.h"
#include "dltune/run/trial_report.h"
#include "dltune/run/trial_setup.h"
#include "dltune/run/worker.h"
#include "dltune/store/tracking.h"
#include "progress_view.h"

namespace dltune::cli {
namespace {

std::atomic<int> stop_requests{0};
std::atomic<bool> trial_stop_requested{false};

// First Ctrl-C (or SIGTERM): stop after checkpoints; second: kill the trials.
extern "C" void CountStopRequest(int) { stop_requests.fetch_add(1); }
extern "C" void RequestTrialStop(int) { trial_stop_requested.store(true); }

void InstallStopHandlers() {
  struct sigaction action {};
  action.sa_handler = CountStopRequest;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

struct WorkerArgs {
  std::string storage;
  std::string study;
  int parallel = 0;
  double stale_after = 60;
  int max_retries = 3;
  std::string worker_id;
};

void AddWorkerOptions(CLI::App* command, WorkerArgs& args) {
  AddStorageOption(command, args.storage);
  command
      ->add_option("--parallel", args.parallel,
                   "Trials at once (default: the cores available divided by the spec's training.threads)")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--stale-after", args.stale_after,
                   "Seconds without a heartbeat after which another worker's running trial is taken over and "
                   "resumed from its latest checkpoint (default 60)")
      ->check(CLI::PositiveNumber);
  command
      ->add_option("--max-retries", args.max_retries,
                   "Times a trial whose worker was lost is resumed before it is recorded as failed (default 3)")
      ->check(CLI::NonNegativeNumber);
  command->add_option("--worker-id", args.worker_id,
                      "This worker's name in the store, unique among the workers of a study (default: host:pid; "
                      "a worker of this machine whose process is gone is recognized at once)");
}

WorkerOptions ToWorkerOptions(const WorkerArgs& args) {
  return {.study = args.study,
          .parallel = args.parallel,
          .stale_after = args.stale_after,
          .max_retries = args.max_retries,
          .worker_id = args.worker_id};
}

// The study's tracking row, and for each sub-study its best trial: value, best step, checkpoint, reproduction.
void PrintOutcome(Store& store, const StudySession& session) {
  const auto trials = store.ListTrials(session.study().id);
  std::printf("\n%s", TrackingTable(store, {session.study()}).c_str());
  const StudySummary summary = SummarizeStudy(session.study(), trials);
  if (summary.best_per_substudy.empty()) {
    std::printf("\nno trial completed yet\n");
    return;
  }
  for (const auto& best : summary.best_per_substudy) {
    const TrialRecord& trial = trials.at(static_cast<std::size_t>(best.number));
    std::printf("\nbest of %s: trial %llu, %s %.6g at step %lld of %lld\n", best.substudy_label.c_str(),
                static_cast<unsigned long long>(best.number), summary.objective.metric.c_str(), best.value,
                static_cast<long long>(best.step.value_or(0)), static_cast<long long>(session.spec().max_train_steps));
    std::string params;
    for (const auto& [name, value] : ParamsByName(*session.spec().space, trial.params)) {
      params += fmt::format("{}{}={}", params.empty() ? "" : ", ", name, FormatValue(value));
    }
    std::printf("  params:     %s\n", params.c_str());
    std::optional<CheckpointRecord> checkpoint;
    for (const auto& c : store.ListCheckpoints(trial.id)) {
      if (!c.deleted && (!checkpoint || c.step == best.step)) checkpoint = c;
    }
    std::printf("  checkpoint: %s\n", checkpoint ? checkpoint->path.c_str() : "-");
    std::printf("  reproduce:  %s\n", ReproduceCommand(session.spec(), trial).c_str());
  }
}

void PrintStartLine(Store& store, const StudySession& session) {
  const auto trials = session.Trials();
  const StudySummary summary = SummarizeStudy(session.study(), trials);
  if (summary.Count(TrialState::kPending) == summary.trial_count) {
    const StudyPlan plan(session.spec());
    const std::string adaptive =
        plan.IsAdaptive()
            ? fmt::format(" ({} planned, the others chosen from the results as they come in)", trials.size())
            : "";
    std::printf("study %s: %llu trials%s in %s; trial directories in %s\n", session.study().name.c_str(),
                static_cast<unsigned long long>(plan.TrialCount()), adaptive.c_str(), store.url().c_str(),
                session.spec().run_dir.c_str());
  } else {
    std::printf("study %s: resuming in %s (%s)\n", session.study().name.c_str(), store.url().c_str(),
                summary.StateText().c_str());
  }
  std::fflush(stdout);
}

int ExitStatusOf(const WorkerSummary& summary) { return summary.interrupted ? kTrialStoppedExitStatus : 0; }

int RunLoop(Store& store, const WorkerOptions& options, std::int64_t study_id, int parallel_for_view) {
  ProgressView view(store, study_id, parallel_for_view, ::isatty(STDOUT_FILENO) == 1);
  InstallStopHandlers();
  const WorkerSummary summary = RunWorker(store, options, view, stop_requests);
  view.Close();
  if (summary.interrupted) {
    std::printf("stopped: %d trial%s stopped with a checkpoint; run the same command again to resume\n",
                summary.stopped, summary.stopped == 1 ? "" : "s");
  }
  return ExitStatusOf(summary);
}

}  // namespace

void RegisterRunCommands(CLI::App& app) {
  {
    struct Args : WorkerArgs {
      std::string spec;
      bool no_report = false;
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
        "Example:\n  dltune run examples/quickstart.yaml\n  dltune run examples/synthetic.yaml --parallel 2");
    run->add_option("SPEC", args->spec, "The study spec (YAML; see docs/study-spec.md)")->required();
    AddWorkerOptions(run, *args);
    run->add_flag("--no-report", args->no_report,
                  "Do not write the study's HTML report (./STUDY-report.html, as dltune report does) at the end");
    run->callback([args] {
      const StudySpec spec = LoadStudySpec(args->spec);
      if (spec.workload.name.empty() && spec.command.empty()) {
        throw Error(
            fmt::format("{}: names neither workload: nor command:, so dltune run has nothing to train; a "
                        "study without either is trained by your own program through the ask/tell API "
                        "(see examples/ask_tell)",
                        spec.file));
      }
      const auto store = OpenStore(args->storage.empty() ? DefaultStoreUrl() : args->storage);
      const StudySession session = StudySession::OpenOrCreate(*store, spec, CommandLineText());
      PrintStartLine(*store, session);
      WorkerOptions options = ToWorkerOptions(*args);
      options.study = spec.name;
      const int parallel = options.parallel > 0 ? options.parallel : DefaultParallelism(spec.training.threads);
      const int status = RunLoop(*store, options, session.study().id, parallel);
      PrintOutcome(*store, StudySession::Open(*store, spec.name));
      if (!args->no_report) {
        std::printf("\n");
        try {
          WriteStudyReport(*store, spec.name, "");
        } catch (const Error& e) {
          std::printf("no report: %s\n", e.what());  // the study's records are complete either way
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
        "dltune run (or the ask/tell API).\n\n"
        "Example:\n  dltune worker --storage postgresql://tuner@db.example.com/dltune --study quickstart");
    AddWorkerOptions(worker, *args);
    worker->add_option("--study", args->study, "Only this study (default: every study of the store)");
    worker->callback([args] {
      const auto store = OpenStore(args->storage.empty() ? DefaultStoreUrl() : args->storage, false);
      std::int64_t study_id = 0;
      int threads = 1;
      if (!args->study.empty()) {
        const StudySession session = StudySession::Open(*store, args->study);
        study_id = session.study().id;
        threads = session.spec().training.threads;
      }
      const WorkerOptions options = ToWorkerOptions(*args);
      std::printf("worker %s on %s: %s\n",
                  args->worker_id.empty() ? DefaultWorkerId().c_str() : args->worker_id.c_str(), store->url().c_str(),
                  args->study.empty() ? "every study" : ("study " + args->study).c_str());
      std::fflush(stdout);
      const int status =
          RunLoop(*store, options, study_id, options.parallel > 0 ? options.parallel : DefaultParallelism(threads));
      std::printf("worker done: no trial left to run\n");
      if (status != 0) throw CLI::RuntimeError(status);
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
      const int status = RunBuiltinTrial(trial_stop_requested);
      if (status != 0) throw CLI::RuntimeError(status);
    });
  }
}

}  // namespace dltune::cli
