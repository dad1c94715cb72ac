// Running studies' trials on this machine, as `dltune run` and `dltune worker` do: the study created (checked first)
// or resumed, the parallel layout chosen (measured when need be), each trial run in a process of its own (warm, forked
// from a trial server, for a built-in workload), the store kept as their record, and the exit status decided
// (docs/exit-statuses.md).
//
//   const auto store = dltune::OpenStore(dltune::DefaultStoreUrl());
//   dltune::RunObserver quiet;
//   std::atomic<int> stops{0};  // a signal handler's: 1 stops after checkpoints, 2 kills the trials
//   const dltune::RunSummary summary = dltune::RunStudy(*store, dltune::LoadStudySpec("study.yaml"), {}, quiet, stops);
//
// Not thread-safe: one run per process at a time (it becomes the subreaper of its trials' orphaned processes).
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "dltune/run/run_types.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// Runs the trials of `spec`'s study until none is left or `stop_requests` (incremented by the caller's SIGINT /
// SIGTERM handler) reaches 1 (running trials checkpoint and stop) or 2 (they are killed; each resumes from its latest
// checkpoint). The study is created when the store has none of that name — after CheckSpecBeforeCreating, so a
// mistake costs no study — or resumed (finished trials stay; stopped and lost ones resume). Throws Error for a spec
// no worker can train (no workload: nor command:, an unknown workload), a spec that differs from the recorded one,
// and the store's errors before the trials start; a store lost while trials run ends the run resumably instead
// (RunSummary::store_unavailable).
RunSummary RunStudy(Store& store, const StudySpec& spec, const RunOptions& options, RunObserver& observer,
                    const std::atomic<int>& stop_requests);

// What one `dltune worker` works on.
struct WorkerJob {
  std::string store_url;  // opened by the job (created when `spec` is given); never by a gang's ranks other than 0
  std::string study;      // only this study; empty (and no spec): every study of the store with trials to run
  std::optional<StudySpec> spec;  // the study of this spec, created from it when the store has none
};

// A worker of a shared store: runs trials of the job's study (or of every study a worker of this program can train)
// until none is left, on this machine, beside any number of other workers. Within a launcher's job (srun, torchrun:
// RANK and WORLD_SIZE or SLURM_PROCID and SLURM_NTASKS, with MASTER_ADDR and MASTER_PORT) whose study is data-parallel,
// the job's workers train each trial as one gang: rank 0's claims it, the others start their ranks
// (docs/data-parallel.md). Stops and throws as RunStudy.
RunSummary RunWorkerJob(const WorkerJob& job, const RunOptions& options, RunObserver& observer,
                        const std::atomic<int>& stop_requests);

}  // namespace dltune
