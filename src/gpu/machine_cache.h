// dltune's per-machine caches of measurements (parallel-layouts.json, gpu-packings.json: docs/parallel-layout.md):
// a JSON object with its format's "version" and one object of entries under a section name, each entry stamped with
// when it was measured. A file that is unreadable or of another version reads as empty, and is measured again and
// rewritten whole.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dltune {

// The training a measurement timed, as both caches key it: the program (`command`, a spec's command:; "" for the
// built-in trainer) and a trial.json's workload, the training settings that decide how a step runs (device,
// processes, cuda_graph, fuse) and its params, less the hyperparameters no tensor's shape depends on
// (FusibleHyperparameters(): the learning rate, the optimizer's coefficients), in which the trials of a study differ
// and which do not change how fast a step is. So a study of another length or name reuses a measurement. Each cache
// adds what it measured on: the CPU or the GPU.
nlohmann::json TrainingIdentity(const nlohmann::json& trial, const std::string& command);

// The directory of dltune's per-machine caches: $DLTUNE_CACHE_DIR, else $XDG_CACHE_HOME/dltune, else ~/.cache/dltune.
std::filesystem::path MachineCacheDirectory();

// Where a cache file is and what it holds: its format's version and the section its entries are under.
struct MachineCache {
  std::filesystem::path file;
  int version = 1;
  std::string section;

  // An entry's name for what makes its measurement valid (`key`): a short hash of it.
  static std::string EntryName(const nlohmann::json& key);

  // The entry `name`; nullopt when the file, its version or the entry is missing or not an object.
  std::optional<nlohmann::json> Entry(const std::string& name) const;
  // Keeps `entry` (an object) as `name`, with "measured_at" (UTC) added; the file is written whole, its directory
  // made. Throws Error when it cannot be written.
  void Store(const std::string& name, nlohmann::json entry) const;

 private:
  nlohmann::json Read() const;
};

}  // namespace dltune
