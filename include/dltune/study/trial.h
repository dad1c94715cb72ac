// A trial's lifecycle: its states and the only transitions between them.
//
//   pending ──claim──▶ running ──▶ completed | infeasible | failed    (finished: immutable from then on, but for
//      ▲                  │                                    │      an explicit retry of a failed trial)
//      ├──── reclaim ─────┤  (no heartbeat within the grace    │
//      │                  │   period; after too many retries:  │
//      │                  ▼   failed)                          │
//      ├──── resume ── stopped   (checkpointed and stopped,    │
//      │                          e.g. Ctrl-C)                 │
//      └──── retry (dltune run --retry-failed) ────────────────┘
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dltune {

enum class TrialState { kPending, kRunning, kCompleted, kInfeasible, kFailed, kStopped };

// "pending", "running", "completed", "infeasible", "failed", "stopped": the names the store and the CLI use.
std::string TrialStateName(TrialState state);
// The state with that name, or nullopt.
std::optional<TrialState> ParseTrialState(std::string_view name);

// Completed, infeasible and failed trials are finished: nothing about them changes any more, except that a failed
// trial may be retried on request (failed -> pending).
bool IsFinished(TrialState state);

// Whether the lifecycle above allows moving from `from` to `to`.
bool CanTransition(TrialState from, TrialState to);

}  // namespace dltune
