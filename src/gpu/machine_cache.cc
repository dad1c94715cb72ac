#include "gpu/machine_cache.h"

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <system_error>

#include "core/files.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "dltune/core/training_settings.h"

namespace dltune {

nlohmann::json TrainingIdentity(const nlohmann::json& trial, const std::string& command) {
  nlohmann::json params = nlohmann::json::object();
  const auto all = trial.find("params");
  if (all != trial.end() && all->is_object()) {
    for (const auto& [name, value] : all->items()) {
      if (!FusibleHyperparameters().contains(name)) params[name] = value;
    }
  }
  // Of the training settings, those that decide how a step runs; the others (evaluation intervals, which follow the
  // study's length, checkpoints kept, timeouts) do not make a step faster or slower, and threads are what a layout
  // measures.
  nlohmann::json training = nlohmann::json::object();
  const auto settings = trial.find("training");
  if (settings != trial.end() && settings->is_object()) {
    for (const char* name : {"device", "processes", "cuda_graph", "fuse"}) {
      if (const auto it = settings->find(name); it != settings->end()) training[name] = *it;
    }
  }
  return {{"workload", trial.value("workload", nlohmann::json())},
          {"command", command},
          {"training", training},
          {"params", params}};
}

std::filesystem::path MachineCacheDirectory() {
  const auto from = [](const char* name) -> std::string {
    const char* value = std::getenv(name);
    return value && *value ? value : "";
  };
  if (const auto own = from("DLTUNE_CACHE_DIR"); !own.empty()) return own;
  if (const auto xdg = from("XDG_CACHE_HOME"); !xdg.empty()) return std::filesystem::path(xdg) / "dltune";
  return std::filesystem::path(from("HOME").empty() ? "/tmp" : from("HOME")) / ".cache" / "dltune";
}

std::string MachineCache::EntryName(const nlohmann::json& key) { return Sha256Hex(key.dump()).substr(0, 16); }

nlohmann::json MachineCache::Read() const {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json cache = nlohmann::json::parse(in, nullptr, false);
  if (!cache.is_object() || cache.value("version", 0) != version || !cache.contains(section) ||
      !cache[section].is_object()) {
    return nlohmann::json::object();  // unreadable or of another version: measured again and rewritten
  }
  return cache;
}

std::optional<nlohmann::json> MachineCache::Entry(const std::string& name) const {
  const nlohmann::json cache = Read();
  if (!cache.contains(section)) return std::nullopt;
  const auto entry = cache[section].find(name);
  if (entry == cache[section].end() || !entry->is_object()) return std::nullopt;
  return *entry;
}

void MachineCache::Store(const std::string& name, nlohmann::json entry) const {
  nlohmann::json cache = Read();
  cache["version"] = version;
  entry["measured_at"] = FormatClockTime(static_cast<double>(std::time(nullptr)), "%Y-%m-%dT%H:%M:%SZ", TimeZone::kUtc);
  cache[section][name] = std::move(entry);
  std::error_code error;
  std::filesystem::create_directories(file.parent_path(), error);
  WriteFileAtomically(file, cache.dump(2) + "\n", /*sync=*/false);
}

}  // namespace dltune
