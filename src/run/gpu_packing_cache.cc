#include "run/gpu_packing_cache.h"

#include <ctime>
#include <fstream>
#include <system_error>

#include "core/files.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "dltune/core/training_settings.h"
#include "run/parallel_layout.h"

namespace dltune {
namespace {

constexpr int kPackingCacheVersion = 1;

std::string EntryName(const nlohmann::json& key) { return Sha256Hex(key.dump()).substr(0, 16); }

std::string UtcNow() {
  return FormatClockTime(static_cast<double>(std::time(nullptr)), "%Y-%m-%dT%H:%M:%SZ", TimeZone::kUtc);
}

nlohmann::json ReadPackings(const std::filesystem::path& file) {
  std::ifstream in(file);
  if (!in) return nlohmann::json::object();
  nlohmann::json cache = nlohmann::json::parse(in, nullptr, false);
  if (!cache.is_object() || cache.value("version", 0) != kPackingCacheVersion || !cache.contains("packings") ||
      !cache["packings"].is_object()) {
    return nlohmann::json::object();  // unreadable or of another version: measured again and rewritten
  }
  return cache;
}

}  // namespace

std::filesystem::path PackingCacheFile() { return LayoutCacheFile().parent_path() / "gpu-packings.json"; }

nlohmann::json PackingKey(const nlohmann::json& first_trial, const std::string& command, const std::string& gpu_model,
                          const std::string& driver, bool mps) {
  nlohmann::json params = nlohmann::json::object();
  const auto all = first_trial.find("params");
  if (all != first_trial.end() && all->is_object()) {
    for (const auto& [name, value] : all->items()) {
      if (!FusibleHyperparameters().contains(name)) params[name] = value;
    }
  }
  return {{"gpu", gpu_model},   {"driver", driver},
          {"mps", mps},         {"workload", first_trial.value("workload", nlohmann::json())},
          {"command", command}, {"training", first_trial.value("training", nlohmann::json())},
          {"params", params}};
}

std::optional<int> CachedPacking(const std::filesystem::path& file, const nlohmann::json& key) {
  const nlohmann::json cache = ReadPackings(file);
  if (!cache.contains("packings")) return std::nullopt;
  const auto entry = cache["packings"].find(EntryName(key));
  if (entry == cache["packings"].end() || !entry->is_object() || entry->value("key", nlohmann::json()) != key) {
    return std::nullopt;
  }
  const nlohmann::json trials = entry->value("trials_at_once", nlohmann::json());
  if (!trials.is_number_integer() || trials.get<int>() < 1) return std::nullopt;
  return trials.get<int>();
}

void StorePacking(const std::filesystem::path& file, const nlohmann::json& key, int trials) {
  nlohmann::json cache = ReadPackings(file);
  cache["version"] = kPackingCacheVersion;
  cache["packings"][EntryName(key)] = {{"key", key}, {"trials_at_once", trials}, {"measured_at", UtcNow()}};
  std::error_code error;
  std::filesystem::create_directories(file.parent_path(), error);
  WriteFileAtomically(file, cache.dump(2) + "\n", /*sync=*/false);
}

}  // namespace dltune
