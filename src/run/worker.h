// The worker loop: claims trials of one study (or of every study in the store), runs each in its own process
// (TrialProcess), turns their report lines into store writes (TrialSink), records how they end (RecordEnding),
// heartbeats, reclaims trials of lost workers, rides out store outages (StoreOutage), halts when trials keep failing
// the same way (FailureBreaker), and stops cleanly when asked. `dltune run` and `dltune worker` are this loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "dltune/run/run_study.h"
#include "dltune/store/store.h"
#include "run/trial_server.h"
#include "run/worker_gang.h"

namespace dltune {

struct WorkerOptions {
  std::string study;  // only this study; empty: every study of the store with trials to run
  int parallel = 0;   // trials at once; 0: DefaultParallelism(threads per trial of the first study)
  // Threads of each trial whose spec leaves training.threads to auto (ChooseParallelLayout's choice); 0: 1.
  int threads_per_trial = 0;
  // The most trials a fused group takes in a study whose spec says training.fuse: auto (ChooseFusion's choice); 0:
  // such trials train apart.
  std::size_t fuse_auto = 0;
  // Seconds a trial's processes may run on after its end line before they are killed (and the trial recorded by the
  // line).
  double end_grace_seconds = 60;
  double stale_after = 60;  // seconds without a heartbeat before a running trial is reclaimed by another worker
  int max_retries = 3;      // reclaims of one trial before it is failed
  // Keep waiting while other workers run trials of the study (they may be lost and come back as pending); when
  // false, the loop ends as soon as nothing is pending and its own trials are done.
  bool wait_for_others = true;
  std::filesystem::path dltune_executable;  // runs built-in workloads (`dltune run-trial`); default: this program
  std::string worker_id;                    // default: "<hostname>:<pid>"
  // Stop the loop (running trials checkpoint and stop) once this many trials in a row failed with the same cause:
  // a study that cannot work must not spend its budget failing. 0: never.
  int max_consecutive_failures = 5;
  bool retry_failed = false;  // at start-up, put the studies' failed trials back to pending (they resume)
  std::string gpus = "all";   // RunOptions::gpus
  bool mps = false;           // RunOptions::mps
  int trials_per_gpu = 0;     // trials sharing a GPU (resources.trials_per_gpu of the study run); 0: auto
  // How long the loop rides out a store it cannot reach (a database restart, a lost connection) while its trials go
  // on running, before it gives up (StoreUnavailableError).
  double store_patience = 300;
  // This worker is rank 0 of a launcher job's gang of workers (worker_gang.h): each trial it starts is published to
  // the others, which start its other ranks, and it runs one trial at a time. Size 1: no gang.
  WorkerGang gang;
  // Forks built-in trials warm; null: the worker starts one of its own. Given when the caller has already started
  // one (for the layout probe), so that the trials are forked from the process that is loaded and prepared.
  TrialServer* trial_server = nullptr;
};

// Runs the loop until no trial is left to run, or `stop_requests` (incremented by the caller's SIGINT/SIGTERM/SIGHUP
// handler) becomes 1 — running trials are asked to checkpoint and stop (SIGTERM) and are recorded as stopped — or 2
// — they are killed and recorded as stopped, to resume from their latest checkpoint — or trials keep failing the
// same way (WorkerOptions::max_consecutive_failures; RunSummary::halted says why). A trial running past its
// study's training.timeout is stopped and recorded as failed.
// Fills the trials' tally and how the loop ended; the exit status, the studies and the layout are RunStudy's.
RunSummary RunWorker(Store& store, const WorkerOptions& options, RunObserver& observer,
                     const std::atomic<int>& stop_requests);

// Trials at once on this machine when each uses `threads_per_trial` threads: the cores available to this process
// divided by it, at least 1.
int DefaultParallelism(int threads_per_trial);

}  // namespace dltune
