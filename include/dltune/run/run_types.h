// What a run of studies' trials is given and what it tells (RunStudy, RunWorkerJob: dltune/run/run_study.h): its
// options, the observer it tells of each step (the terminal view of `dltune run`), the layout it chose, the trials'
// progress and how they ended, and its summary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// How a study uses this machine: trials at once and the threads of each (docs/parallel-layout.md).
struct ParallelLayout {
  int trials = 1;     // at once
  int threads = 1;    // per trial (per rank of a data-parallel trial)
  std::string basis;  // why this layout, for the user: "measured", "--parallel", a short study, ...
  int processes = 1;  // per trial: training.processes
};

// A running trial as a run's observer sees it.
struct TrialProgress {
  std::string study;
  std::uint64_t number = 0;
  std::string substudy;
  std::int64_t step = 0;
  std::int64_t max_steps = 0;
  std::optional<double> objective;  // at the last evaluation
  std::optional<double> best;
  double started_at = 0;  // seconds since the epoch, this attempt
  bool stopping = false;
};

// A trial that ended in this run.
struct TrialEnded {
  TrialProgress trial;
  TrialState state = TrialState::kCompleted;
  std::string reason;
  std::optional<std::int64_t> best_step;
  std::optional<double> best_value;
  double seconds = 0;
  std::string trial_dir;
};

// What a run tells its observer (dltune's terminal view). Called on the thread that called RunStudy or RunWorkerJob.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // The study is open in `store`: created now, or found there and resumed.
  virtual void StudyOpened(Store& store, const StudyRecord& study, const StudySpec& spec) {
    (void)store, (void)study, (void)spec;
  }
  // The parallel layout is being measured: what is measured now ("2 trials of 1 thread").
  virtual void MeasuringLayout(const std::string& what) { (void)what; }
  virtual void LayoutChosen(const ParallelLayout& layout) { (void)layout; }
  // The trials are about to run: of study `study_id` (0: of every study of `store`), `parallel` processes at once.
  // `store` stays open until TrialsEnded.
  virtual void TrialsStarting(Store& store, std::int64_t study_id, int parallel) {
    (void)store, (void)study_id, (void)parallel;
  }
  virtual void TrialStarted(const TrialProgress& trial, bool resuming) { (void)trial, (void)resuming; }
  virtual void TrialFinished(const TrialEnded& ended) { (void)ended; }
  // A line worth printing: reclaimed trials, stop requests, waiting for other workers, a gang's events.
  virtual void Notice(const std::string& message) { (void)message; }
  // About twice a second: the running trials.
  virtual void Tick(const std::vector<TrialProgress>& running) { (void)running; }
  // No trial runs any more (after TrialsStarting, however the run ended).
  virtual void TrialsEnded() {}
};

struct RunOptions {
  // Processes at once (a data-parallel trial counts as its training.processes); 0: the layout chosen for the study
  // (ChooseParallelLayout, docs/parallel-layout.md), or for every study the cores available.
  int parallel = 0;
  double stale_after = 60;  // seconds without a heartbeat before a running trial is reclaimed by another worker
  int max_retries = 3;      // reclaims of one trial that made no progress before it is failed
  // Stop once this many trials in a row failed the same way (RunSummary::halted); 0: never.
  int max_consecutive_failures = 5;
  // The GPUs trials may use (--gpus): "all" of those visible (CUDA_VISIBLE_DEVICES narrows them), "none", or a comma
  // list of positions among the visible GPUs or UUIDs (docs/parallel-layout.md, "GPUs").
  std::string gpus = "all";
  // Trials sharing a GPU run as clients of NVIDIA's Multi-Process Service, through a control daemon the run starts
  // for its GPUs and stops at its end (--mps; docs/parallel-layout.md, "GPUs").
  bool mps = false;
  bool retry_failed = false;  // at start-up, put the studies' failed trials back to pending (they resume)
  std::string worker_id;      // this worker's name in the store; default: DefaultWorkerId()
  // RunStudy: when the study exists and the spec only raises its trials:, add the new trials.
  bool extend = false;
  // Recorded with a study this run creates, as what created it (StudyRecord::created_by).
  std::string command_line = "dltune run";
  // The dltune program that runs built-in workloads' trials (`dltune run-trial`, `dltune trial-server`, `dltune
  // probe-speed`); default: this program, which must then be dltune. A program of your own running a built-in
  // workload's study names the installed dltune here.
  std::filesystem::path dltune_executable;
};

struct RunSummary {
  // What `dltune run` and `dltune worker` exit with (docs/exit-statuses.md): kExitDone, kExitSomeFailed,
  // kExitHalted or kExitStopped.
  int exit_status = 0;
  int completed = 0;  // trials that ended in this run, by how
  int infeasible = 0;
  int failed = 0;
  int stopped = 0;
  int retried = 0;           // failed trials put back to pending at start-up (retry_failed)
  bool interrupted = false;  // ended by a stop request
  // Why the run stopped on its own: trials failing the same way again and again. Empty when it did not.
  std::string halted;
  // The trials that halted it were stopped by a fault of the machine (a full disk): they resume once it is fixed.
  bool halted_resumable = false;
  // The store stayed unavailable past the run's patience: why. The running trials were ended, to resume.
  std::string store_unavailable;
  std::optional<ParallelLayout> layout;  // when one was chosen for a single study
  std::vector<StudyRecord> studies;      // the studies whose trials this run trained, as they are now
};

}  // namespace dltune
