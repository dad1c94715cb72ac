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
#include <vector>

namespace dltune {

enum class TrialState { kPending, kRunning, kCompleted, kInfeasible, kFailed, kStopped };

// "pending", "running", "completed", "infeasible", "failed", "stopped": the names the store and the CLI use.
std::string TrialStateName(TrialState state);
// The state with that name, or nullopt.
std::optional<TrialState> ParseTrialState(std::string_view name);

// Completed, infeasible and failed trials are finished: nothing about them changes any more, except that a failed
// trial may be retried on request (failed -> pending).
bool IsFinished(TrialState state);

// The lifecycle's named moves. The store makes every state change through one of them.
enum class TrialTransition {
  kCreate,   // a new trial: -> pending
  kClaim,    // pending -> running
  kReclaim,  // running -> pending, or failed once it has been reclaimed too often
  kResume,   // stopped -> pending
  kRetry,    // failed -> pending, on request
  kFinish,   // running -> completed | infeasible | failed | stopped
};

// One named move: from any state of `from` (none for a new trial) to any of `to`.
struct TrialTransitionRule {
  TrialTransition transition;
  std::string_view name;  // "claim"
  std::vector<TrialState> from;
  std::vector<TrialState> to;

  bool Allows(TrialState from_state, TrialState to_state) const;
  bool Reaches(TrialState to_state) const;
  // The one state it reaches; throws Error for a move with several (reclaim, finish).
  TrialState Target() const;
};

// The lifecycle above as a table, one rule per TrialTransition in its order: the single source of the states a
// trial may move between.
const std::vector<TrialTransitionRule>& TrialTransitions();
const TrialTransitionRule& TransitionRule(TrialTransition transition);

// Whether some rule of the table allows moving from `from` to `to`.
bool CanTransition(TrialState from, TrialState to);

}  // namespace dltune
