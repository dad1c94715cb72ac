// What this machine offers a process: its cores and the CPU's name; and what a launcher told it.
#pragma once

#include <optional>
#include <string>

namespace dltune {

// Cores this process may run on (its CPU affinity), at least 1.
int AvailableCores();

// The CPU's model name from /proc/cpuinfo ("AMD EPYC 7B13"), or "unknown CPU".
std::string CpuModelName();

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
};
// From RANK and WORLD_SIZE (torchrun, dltune's gangs), else Slurm's SLURM_PROCID and SLURM_NTASKS; nullopt when
// neither pair is set. Throws Error for a value that is not a whole number, or a rank outside [0, size).
std::optional<LauncherTask> LauncherTaskFromEnvironment();

}  // namespace dltune
