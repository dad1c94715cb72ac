// Whose checkpoints a directory holds (docs/checkpoint-layout.md, "Owners"): the owner the trainer records in every
// checkpoint it saves and compares before it resumes from one, so that no run trains on from another's.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "dltune/core/value.h"
#include "dltune/store/store.h"

namespace dltune {

// A study's trial: its study, the study's uid, the trial number, its seed and the SHA-256 of its params by name
// (trial.json's checkpoint_owner).
nlohmann::json TrialCheckpointOwner(const StudyRecord& study, const TrialRecord& trial,
                                    const std::map<std::string, Value>& params);

// A `dltune train` run: the workload, its seed and the SHA-256 of its params and workload arguments, so that the same
// directory trained again with other ones is refused, not resumed.
nlohmann::json TrainByHandCheckpointOwner(const std::string& workload, std::uint64_t seed,
                                          const nlohmann::json& workload_args,
                                          const std::map<std::string, Value>& params);

// Params by name as JSON: {"learning_rate": 0.1, ...}.
nlohmann::json ParamsByNameJson(const std::map<std::string, Value>& params);

}  // namespace dltune
