// What this machine offers a process: its cores and the CPU's name; and what a launcher told it.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace dltune {

// Cores this process may run on (its CPU affinity), at least 1.
int AvailableCores();

// Of AvailableCores(), how many other processes leave idle now: the machine's runnable tasks other than this process
// (/proc/stat's procs_running, the median of a few readings 10 ms apart) spread over all its CPUs take their share of
// this process's cores. At least 1; AvailableCores() where it cannot be read.
int IdleCores();

// The CPU's model name from /proc/cpuinfo ("AMD EPYC 7B13"), or "unknown CPU".
std::string CpuModelName();

// What a training process (a trial, a probe, `dltune train`) should find in its environment so that its OpenMP
// threads sleep while they wait instead of spinning on cores others want: {"OMP_WAIT_POLICY", "PASSIVE"}; nullopt when
// this process's environment already chooses a policy (OMP_WAIT_POLICY or GOMP_SPINCOUNT set), which is kept
// (docs/parallel-layout.md, "A shared machine").
std::optional<std::pair<std::string, std::string>> PassiveWaitEnvironment();

// When this machine started (seconds since the epoch, /proc/stat's btime); nullopt where it cannot be read.
std::optional<double> BootTime();

// The whole number in environment variable `name`; nullopt when it is unset or empty. Throws Error naming the variable
// when it holds anything else.
std::optional<int> WholeNumberVariable(const char* name);

// This process's place among the tasks a launcher started together.
struct LauncherTask {
  int rank = 0;
  int size = 1;
  std::string source;  // the variables it came from: "RANK and WORLD_SIZE", "SLURM_PROCID and SLURM_NTASKS"
  int local_rank = 0;  // its rank among the ranks of its machine: LOCAL_RANK, else SLURM_LOCALID (0 when unset)
};
// From RANK and WORLD_SIZE (torchrun, dltune's gangs), else Slurm's SLURM_PROCID and SLURM_NTASKS; nullopt when
// neither pair is set. Throws Error for a value that is not a whole number, or a rank outside [0, size).
std::optional<LauncherTask> LauncherTaskFromEnvironment();

}  // namespace dltune
