#include <map>
#include <mutex>

#include <fmt/format.h>

#include "builtin.h"
#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/workloads/registry.h"

namespace dltune {
namespace {

struct Registry {
  std::mutex mutex;
  std::map<std::string, WorkloadFactory> factories;
};

// The registry, with the built-in workloads in it (registered here rather than by static initializers, which a
// static library would drop).
Registry& TheRegistry() {
  static Registry* registry = [] {
    auto* created = new Registry;
    for (const auto& [name, make] : internal::BuiltinWorkloads()) created->factories[name] = make;
    return created;
  }();
  return *registry;
}

}  // namespace

void RegisterWorkload(const std::string& name, WorkloadFactory factory) {
  Registry& registry = TheRegistry();
  const std::lock_guard lock(registry.mutex);
  registry.factories[name] = std::move(factory);
}

std::unique_ptr<Workload> MakeWorkload(const std::string& name, const nlohmann::json& args) {
  Registry& registry = TheRegistry();
  WorkloadFactory factory;
  {
    const std::lock_guard lock(registry.mutex);
    const auto it = registry.factories.find(name);
    if (it != registry.factories.end()) factory = it->second;
  }
  if (!factory) {
    const auto names = RegisteredWorkloadNames();
    throw Error(fmt::format("no workload named '{}'{}; workloads: {}", name, DidYouMean(name, names),
                            JoinAlternatives(names, false)));
  }
  return factory(args);
}

std::vector<std::string> RegisteredWorkloadNames() {
  Registry& registry = TheRegistry();
  const std::lock_guard lock(registry.mutex);
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry.factories) names.push_back(name);
  return names;
}

}  // namespace dltune
