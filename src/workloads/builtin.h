// Internal: the built-in workloads.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "dltune/train/workload.h"

namespace dltune::internal {

// Makes a built-in workload from the spec's workload arguments (a WorkloadFactory of registry.h).
using BuiltinWorkloadMaker = std::unique_ptr<Workload> (*)(const nlohmann::json& args);

// fashion_mnist_mlp, fashion_mnist_cnn and synthetic, by name: what the registry starts with.
std::map<std::string, BuiltinWorkloadMaker> BuiltinWorkloads();

}  // namespace dltune::internal
