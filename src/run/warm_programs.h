// The command: programs known on this machine to serve their trials warm (warm-programs.json in dltune's machine
// cache, docs/trial-protocol.md "Warm trial processes (Python programs)"). A program that answered the offer of warm
// trials once has its server started for the first trial of every later study that runs it the same way, so that no
// trial of those studies starts cold; until its file changes, or a server started so fails before serving a trial.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace dltune {

// What a program's server depends on, as the cache keys it: the spec's command: (before its placeholders are
// rendered), the trials' working directory (absolute: the worker's when the spec names none) and the settings that
// libraries read as they load (LoadEnvironmentOf).
nlohmann::json WarmProgramKey(const std::string& command, const std::filesystem::path& working_dir,
                              const std::map<std::string, std::string>& load_environment);

// How a program's server starts its trials: each forked from it, or each run in its own process, one at a time
// (dltune.run(..., reuse_process=True)).
enum class WarmMode { kForked, kInProcess };

// How the program of `key` serves its trials, when it answered the offer of warm trials before and its file (the one
// its warm line named) is as it was then (same size and modification time); nullopt otherwise.
std::optional<WarmMode> KnownWarmMode(const nlohmann::json& key);

// Keeps that the program of `key`, running `program`, answered the offer, serving `mode`. A cache that cannot be
// written is left as it is: the next study's first trials start cold, as without it.
void RememberServesWarm(const nlohmann::json& key, const std::filesystem::path& program, WarmMode mode);

// Forgets the program of `key`: a server started for it failed before it served a trial.
void ForgetServesWarm(const nlohmann::json& key);

}  // namespace dltune
