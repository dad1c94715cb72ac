// The process of a fused group of built-in trials (`dltune run-fused`): the trials a worker grouped (trials of one
// sub-study that differ only in fusible hyperparameters, docs/training.md "Fused trials") trained together as one
// array model, each reporting as its own trial would, through one report channel.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace dltune {

// The environment variable that lists a group's trial files ($DLTUNE_FUSED_TRIALS): one trial.json path per line,
// a member's index its line's.
inline constexpr const char* kFusedTrialsVariable = "DLTUNE_FUSED_TRIALS";
// Each member's DLTUNE_RESUME_MAX_STEP, one per line in the same order ($DLTUNE_FUSED_RESUME_MAX_STEPS): a member
// resumes from a checkpoint at or before it only. Absent or short: any checkpoint.
inline constexpr const char* kFusedResumeLimitsVariable = "DLTUNE_FUSED_RESUME_MAX_STEPS";

// Trains the group $DLTUNE_FUSED_TRIALS lists, writing every member's report lines to $DLTUNE_REPORT, each prefixed
// with the member's index and a tab ("2\t{...}": docs/trial-protocol.md, "Fused trials"). Returns the exit status:
// 0, or kExitStopped when `stop_requested` stopped it (every member still training then has a checkpoint). Throws
// Error for unusable trial files or members that cannot train together.
int RunFusedTrials(const std::atomic<bool>& stop_requested);

// The trial files a group's $DLTUNE_FUSED_TRIALS value lists.
std::vector<std::string> FusedTrialFiles(const std::string& variable);

}  // namespace dltune
