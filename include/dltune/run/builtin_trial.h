// The process of a trial of a built-in workload (`dltune run-trial`): reads the trial's files that the worker wrote
// (DLTUNE_TRIAL), trains with the built-in trainer, and reports through the trial protocol like any external
// program (docs/trial-protocol.md).
#pragma once

#include <atomic>

namespace dltune {

// Trains the trial described by $DLTUNE_TRIAL, writing report lines to $DLTUNE_REPORT; returns the exit status
// (0, or kTrialStoppedExitStatus when `stop_requested` became true, set by the caller's SIGTERM handler). Throws
// Error for unusable trial files or params (the caller prints it to stderr, which the worker records).
int RunBuiltinTrial(const std::atomic<bool>& stop_requested);

}  // namespace dltune
