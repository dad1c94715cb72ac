// Internal: the built-in workloads.
#pragma once

#include <map>
#include <string>

#include "dltune/workloads/registry.h"

namespace dltune::internal {

// Adds fashion_mnist_mlp, fashion_mnist_cnn and synthetic to `factories`.
void RegisterBuiltinWorkloads(std::map<std::string, WorkloadFactory>& factories);

}  // namespace dltune::internal
