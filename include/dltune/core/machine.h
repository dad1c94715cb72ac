// What this machine offers a process: its cores and the CPU's name.
#pragma once

#include <string>

namespace dltune {

// Cores this process may run on (its CPU affinity), at least 1.
int AvailableCores();

// The CPU's model name from /proc/cpuinfo ("AMD EPYC 7B13"), or "unknown CPU".
std::string CpuModelName();

}  // namespace dltune
