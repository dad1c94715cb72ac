// Workloads by name: the built-in ones (fashion_mnist_mlp, fashion_mnist_cnn, synthetic) and a user's own.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/train/workload.h"

namespace dltune {

// Makes a workload from the spec's fixed workload arguments. Throws Error for a bad argument.
using WorkloadFactory = std::function<std::unique_ptr<Workload>(const nlohmann::json& args)>;

// Registers (or replaces) a workload under `name`. Thread-safe.
void RegisterWorkload(const std::string& name, WorkloadFactory factory);
// Makes the workload registered as `name`; throws Error (with the registered names) when there is none.
std::unique_ptr<Workload> MakeWorkload(const std::string& name, const nlohmann::json& args = nlohmann::json::object());
// Every registered name, sorted; the built-in ones included. (dltune/workloads/train.h's WorkloadNames() gives the
// same without LibTorch's headers.)
std::vector<std::string> RegisteredWorkloadNames();

}  // namespace dltune
