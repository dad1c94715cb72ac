// What the worker loop (RunWorker, worker.h) is given: the study or studies it serves, its slots, patience and
// limits, its gang and its trial server.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "dltune/run/study_session.h"
#include "run/worker_gang.h"
#include "trial/trial_server.h"

namespace dltune {

struct WorkerOptions {
  std::string study;  // only this study; empty: every study of the store with trials to run
  // The session of `study` its caller opened (RunStudy), used as it is; null: the worker opens the study by name.
  const StudySession* opened = nullptr;
  int parallel = 0;  // trials at once; 0: DefaultParallelism(threads per trial of the first study)
  // Threads of each trial whose spec leaves training.threads to auto (ChooseParallelLayout's choice); 0: 1.
  int threads_per_trial = 0;
  // The most trials a fused group takes in a study whose spec says training.fuse: auto, or leaves it to its default
  // (ChooseFusion's choice, where PlanFusion had it measured); 0: such trials train apart.
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

}  // namespace dltune
