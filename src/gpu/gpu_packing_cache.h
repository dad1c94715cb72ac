// Packings measured before (`trials per GPU: auto`, docs/parallel-layout.md "GPUs"), kept per GPU model and training
// in gpu-packings.json beside the parallel layouts (MachineCacheDirectory()): a run of the same training on the
// same kind of GPU starts at the count measured before, instead of measuring again from one trial at once.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dltune {

// gpu-packings.json in MachineCacheDirectory().
std::filesystem::path PackingCacheFile();

// What makes a packing valid for another run: the training of the study's first trial (TrainingIdentity of its
// trial.json and the spec's command:) on a GPU of this model and driver, with MPS or not.
nlohmann::json PackingKey(const nlohmann::json& first_trial, const std::string& command, const std::string& gpu_model,
                          const std::string& driver, bool mps);

// The trials at once kept for `key`; nullopt when none is (or the file is unreadable, or of another version).
std::optional<int> CachedPacking(const std::filesystem::path& file, const nlohmann::json& key);

// Keeps `trials` at once for `key` in `file` (written whole, its directory made). Throws Error when it cannot.
void StorePacking(const std::filesystem::path& file, const nlohmann::json& key, int trials);

}  // namespace dltune
