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

#include "dltune/run/run_types.h"
#include "dltune/store/store.h"
#include "run/worker_options.h"

namespace dltune {

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
