// The variables of a trial process's environment that dltune treats apart: the rendezvous of a gang's ranks, the
// thread counts a trial sets for itself, and what libraries read as they load (which a trial server must share with
// the trials it forks).
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

namespace dltune {

// The variables a rank of a gang gets: the conventions of torchrun and torch.distributed's env:// rendezvous.
inline constexpr const char* kRendezvousVariables[] = {"RANK",        "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                                       "MASTER_ADDR", "MASTER_PORT"};

// Whether `name` is one of kRendezvousVariables (they differ from trial to trial, and no library reads them as it
// loads: a trial server need not start afresh for them).
bool IsRendezvousVariable(const std::string& name);

// The environment variables that set a library's thread count. The server runs with each of them at 1, and a forked
// trial sets its own count, so trials (and layout probes) of different thread counts share one server.
inline constexpr std::array<const char*, 2> kThreadCountVariables = {"OMP_NUM_THREADS", "MKL_NUM_THREADS"};
bool IsThreadCountVariable(const std::string& name);

// What of a built-in trial's environment libraries read as they load, and so what a trial server must have been
// started with to fork the trial (TrialServer::Start's `load_environment`): all but dltune's own variables, the
// rendezvous and the thread counts (a trial sets its own), and what CUDA and its libraries read only when a process
// starts CUDA (CUDA_*, CUBLAS_*, NCCL_*: the GPUs a trial is given, MPS's pipes), which a server never does and its
// trials do after the fork. So trials on different GPUs share one server.
std::map<std::string, std::string> LoadEnvironmentOf(const std::map<std::string, std::string>& trial_environment);

// What a program's server that runs its trials in its own process must have been started with to run the trial:
// LoadEnvironmentOf's, and what CUDA reads as it starts (CUDA_*: the GPUs, MPS's pipes), since it may start CUDA for
// one trial and keep it for the next.
std::map<std::string, std::string> ReusedProcessEnvironmentOf(
    const std::map<std::string, std::string>& trial_environment);

// This process's environment with `overrides` set, as "KEY=VALUE" entries sorted by key.
std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& overrides);

}  // namespace dltune
