// Where this process trains: its torch device and, for a data-parallel rank, its group. Free of LibTorch types.
#pragma once

#include <string>

#include "dltune/core/training_settings.h"

namespace dltune {

// The torch device `training.device` names in this process: "cuda" for cuda, and for auto when the process sees a
// CUDA device (the runner gives a trial its GPU through CUDA_VISIBLE_DEVICES) and trains alone (training.processes
// 1: with auto, data-parallel ranks train on the CPU); a data-parallel rank with cuda, "cuda:N" for its local rank
// (LOCAL_RANK or SLURM_LOCALID) among the GPUs it sees; else "cpu". Throws Error naming the setting for cuda where
// this process sees no CUDA device. Initializes CUDA when asked about it: call it in the process that trains, not
// before a fork.
std::string ResolveTrainingDevice(const TrainingSettings& training);

// Where a data-parallel rank finds its group (docs/data-parallel.md): rank 0 serves the rendezvous store at
// master_addr:master_port, and the others connect to it.
struct DistributedOptions {
  int rank = 0;
  int world_size = 1;  // 1: this process trains alone
  std::string master_addr;
  int master_port = 0;
  double timeout_seconds = 300;  // training.collective_timeout: how long a collective waits for the others
  std::string store_prefix;      // this trial's keys in a store shared with others; "": the store is the trial's own
};

// The group of a process that is one of `training.processes` ranks, from the variables its launcher set: RANK,
// WORLD_SIZE, MASTER_ADDR and MASTER_PORT (torchrun's and dltune's gangs), else Slurm's SLURM_PROCID and
// SLURM_NTASKS with MASTER_ADDR and MASTER_PORT; DLTUNE_STORE_PREFIX when set. Throws Error naming a variable that
// is missing or wrong, and when the world size is not training.processes.
DistributedOptions DistributedOptionsFromEnvironment(const TrainingSettings& training);

}  // namespace dltune
