// Everything a trial process gets before it starts (docs/trial-protocol.md, "Starting a trial"): its directory,
// params.json, trial.json, environment and command line; and how a person reproduces a trial.
#pragma once

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "dltune/run/study_session.h"
#include "dltune/run/trial_process.h"

namespace dltune {

struct PreparedTrial {
  std::filesystem::path trial_dir;  // absolute
  bool resuming = false;            // it ran before (its trial.json existed)
  TrialCommand command;
};

// The directory of trial `number` of a study: <run_dir>/trial_<number>, run_dir relative to the working directory.
std::filesystem::path TrialDirectory(const StudySpec& spec, std::uint64_t number);

// trial.json's content (see docs/trial-protocol.md).
nlohmann::json TrialDescription(const StudySpec& spec, const TrialRecord& trial,
                                const std::map<std::string, Value>& params, bool resuming);

// Creates the trial's directory and files and the command that runs it: `dltune_executable run-trial` for a
// built-in workload, the rendered `command:` otherwise. Throws Error when a file cannot be written or a placeholder
// has no value in this trial.
PreparedTrial PrepareTrial(const StudySpec& spec, const ActiveTrial& trial,
                           const std::filesystem::path& dltune_executable);

// A command that trains the trial again on its own: `dltune train ...` with its params and seed for a built-in
// workload; the program with its environment otherwise.
std::string ReproduceCommand(const StudySpec& spec, const TrialRecord& trial);

}  // namespace dltune
