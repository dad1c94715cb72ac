// The workers of one launcher job (`srun -N 2 dltune worker --study S`, mpirun, torchrun) as one gang for a data-
// parallel study: the job's rank 0 worker claims each trial and starts its rank 0, and every other worker starts its
// own rank of the same trial on its machine (docs/data-parallel.md, "Across machines"). They coordinate through a
// store that rank 0's worker serves at MASTER_ADDR:MASTER_PORT; each trial's ranks meet at a port of its own.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>

#include "trial/trial_process.h"

namespace dltune {

class RendezvousStore;

struct WorkerGang {
  int rank = 0;
  int size = 1;         // workers in the job; 1: this worker is alone
  std::string address;  // rank 0's host (MASTER_ADDR)
  int port = 0;         // where rank 0's worker serves the gang's store (MASTER_PORT)
  double timeout_seconds = 300;
};

// This worker's gang per its launcher's variables: RANK and WORLD_SIZE, else Slurm's SLURM_PROCID and SLURM_NTASKS,
// with MASTER_ADDR and MASTER_PORT. Size 1 when neither pair is set. Throws Error when a gang of more than one lacks
// MASTER_ADDR or MASTER_PORT, or a variable is not a number.
WorkerGang WorkerGangFromEnvironment(double timeout_seconds);

// Rank 0's worker: serves the gang's store and publishes every trial it starts.
class GangLeader {
 public:
  // Throws Error when the store cannot be served.
  explicit GangLeader(const WorkerGang& gang);
  // Tells the other workers that no trial is left and waits (up to 30 s) for them to leave.
  ~GangLeader();
  GangLeader(const GangLeader&) = delete;
  GangLeader& operator=(const GangLeader&) = delete;

  // Publishes the trial that `command` starts (with trial.json and params.json of `trial_dir`) to the other workers,
  // and returns `command` with rank 0's rendezvous variables. Throws Error when the store is gone.
  TrialCommand Publish(const TrialCommand& command, const std::filesystem::path& trial_dir);

 private:
  WorkerGang gang_;
  std::unique_ptr<RendezvousStore> store_;
  int trials_ = 0;
};

// Any other worker of the gang: starts its rank of each trial rank 0 publishes (its output in rank_<r>.log of the
// trial's directory, which it creates when this machine does not share it), ends a rank still running when the next
// trial comes, and returns 0 when rank 0 says no trial is left, or once its rank ended after `stop_requests` became
// nonzero (the rank is sent SIGTERM; at 2, SIGKILL). `notice` is told what happens. Throws Error when the store
// cannot be reached or is gone (rank 0's worker ended).
int RunGangMember(const WorkerGang& gang, const std::atomic<int>& stop_requests,
                  const std::function<void(const std::string&)>& notice);

}  // namespace dltune
