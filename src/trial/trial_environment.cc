#include "trial/trial_environment.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

extern char** environ;

namespace dltune {

bool IsRendezvousVariable(const std::string& name) {
  for (const char* variable : kRendezvousVariables) {
    if (name == variable) return true;
  }
  return false;
}

bool IsThreadCountVariable(const std::string& name) {
  return std::find(kThreadCountVariables.begin(), kThreadCountVariables.end(), name) != kThreadCountVariables.end();
}

std::map<std::string, std::string> LoadEnvironmentOf(const std::map<std::string, std::string>& trial_environment) {
  const auto starts_with = [](const std::string& text, std::string_view prefix) { return text.rfind(prefix, 0) == 0; };
  std::map<std::string, std::string> load;
  for (const auto& [key, value] : trial_environment) {
    // Not the thread counts either: the server loads with one thread, and a built-in trial sets its own count
    // (LibTorch's, which the OpenMP build of OpenBLAS follows) before it computes.
    if (starts_with(key, "DLTUNE_") || IsRendezvousVariable(key) || IsThreadCountVariable(key)) continue;
    if (starts_with(key, "CUDA_") || starts_with(key, "CUBLAS_") || starts_with(key, "NCCL_")) continue;
    load[key] = value;
  }
  return load;
}

std::map<std::string, std::string> ReusedProcessEnvironmentOf(
    const std::map<std::string, std::string>& trial_environment) {
  std::map<std::string, std::string> load = LoadEnvironmentOf(trial_environment);
  for (const auto& [key, value] : trial_environment) {
    if (key.rfind("CUDA_", 0) == 0) load[key] = value;
  }
  return load;
}

std::vector<std::string> EnvironmentWith(const std::map<std::string, std::string>& overrides) {
  std::map<std::string, std::string> environment;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text = *entry;
    const auto equals = text.find('=');
    if (equals != std::string::npos) environment[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [key, value] : overrides) environment[key] = value;
  std::vector<std::string> entries;
  entries.reserve(environment.size());
  for (const auto& [key, value] : environment) entries.push_back(fmt::format("{}={}", key, value));
  return entries;
}

}  // namespace dltune
