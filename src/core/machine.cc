#include "core/machine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {

int AvailableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

std::string CpuModelName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string model = line.substr(colon + 1);
    model.erase(0, model.find_first_not_of(" \t"));
    if (!model.empty()) return model;
  }
  return "unknown CPU";
}

std::optional<int> WholeNumberVariable(const char* name) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return std::nullopt;
  try {
    std::size_t end = 0;
    const int value = std::stoi(text, &end);
    if (end == std::strlen(text)) return value;
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("${} is '{}', not a whole number", name, text));
}

std::optional<LauncherTask> LauncherTaskFromEnvironment() {
  for (const auto& [rank_name, size_name] :
       {std::pair("RANK", "WORLD_SIZE"), std::pair("SLURM_PROCID", "SLURM_NTASKS")}) {
    const std::optional<int> rank = WholeNumberVariable(rank_name), size = WholeNumberVariable(size_name);
    if (!rank || !size) continue;
    const std::string source = fmt::format("{} and {}", rank_name, size_name);
    if (*rank < 0 || *rank >= *size)
      throw Error(fmt::format("{} say rank {} of {}: no such rank", source, *rank, *size));
    const char* local_name = rank_name == std::string("RANK") ? "LOCAL_RANK" : "SLURM_LOCALID";
    return LauncherTask{*rank, *size, source, WholeNumberVariable(local_name).value_or(0)};
  }
  return std::nullopt;
}

std::optional<double> BootTime() {
  std::ifstream stat("/proc/stat");
  std::string key;
  while (stat >> key) {
    if (key == "btime") {
      double seconds = 0;
      if (stat >> seconds) return seconds;
      return std::nullopt;
    }
    stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
  }
  return std::nullopt;
}

std::optional<std::pair<std::string, std::string>> PassiveWaitEnvironment() {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return std::nullopt;
  return std::make_pair(std::string("OMP_WAIT_POLICY"), std::string("PASSIVE"));
}

int IdleCores() {
  const int cores = AvailableCores();
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  std::vector<long> others;
  for (int reading = 0; reading < 5; ++reading) {
    if (reading > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::ifstream stat("/proc/stat");
    std::string key;
    long running = -1;
    while (stat >> key) {
      if (key == "procs_running") {
        stat >> running;
        break;
      }
      stat.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    if (running < 1) return cores;
    others.push_back(running - 1);  // this process is running while it reads
  }
  std::nth_element(others.begin(), others.begin() + 2, others.end());
  const double busy_share = std::min(1.0, static_cast<double>(others[2]) / static_cast<double>(std::max(1L, online)));
  return std::max(1, static_cast<int>(std::lround(cores * (1.0 - busy_share))));
}

}  // namespace dltune
