#include "gpu/gpu_packing_cache.h"

#include "gpu/machine_cache.h"

namespace dltune {
namespace {

// gpu-packings.json (`file`): the packing of each GPU model and training.
MachineCache PackingCache(const std::filesystem::path& file) {
  return {.file = file, .version = 1, .section = "packings"};
}

}  // namespace

std::filesystem::path PackingCacheFile() { return MachineCacheDirectory() / "gpu-packings.json"; }

nlohmann::json PackingKey(const nlohmann::json& first_trial, const std::string& command, const std::string& gpu_model,
                          const std::string& driver, bool mps) {
  nlohmann::json key = TrainingIdentity(first_trial, command);
  key["gpu"] = gpu_model;
  key["driver"] = driver;
  key["mps"] = mps;
  return key;
}

std::optional<int> CachedPacking(const std::filesystem::path& file, const nlohmann::json& key) {
  const std::optional<nlohmann::json> entry = PackingCache(file).Entry(MachineCache::EntryName(key));
  if (!entry || entry->value("key", nlohmann::json()) != key) return std::nullopt;
  const nlohmann::json trials = entry->value("trials_at_once", nlohmann::json());
  if (!trials.is_number_integer() || trials.get<int>() < 1) return std::nullopt;
  return trials.get<int>();
}

void StorePacking(const std::filesystem::path& file, const nlohmann::json& key, int trials) {
  PackingCache(file).Store(MachineCache::EntryName(key), {{"key", key}, {"trials_at_once", trials}});
}

}  // namespace dltune
