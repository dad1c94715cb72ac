#include "dltune/study/trial.h"

#include <array>
#include <utility>

namespace dltune {
namespace {

constexpr std::array<std::pair<TrialState, std::string_view>, 6> kNames = {{
    {TrialState::kPending, "pending"},
    {TrialState::kRunning, "running"},
    {TrialState::kCompleted, "completed"},
    {TrialState::kInfeasible, "infeasible"},
    {TrialState::kFailed, "failed"},
    {TrialState::kStopped, "stopped"},
}};

}  // namespace

std::string TrialStateName(TrialState state) {
  for (const auto& [s, name] : kNames) {
    if (s == state) return std::string(name);
  }
  return "unknown";
}

std::optional<TrialState> ParseTrialState(std::string_view name) {
  for (const auto& [s, n] : kNames) {
    if (n == name) return s;
  }
  return std::nullopt;
}

bool IsFinished(TrialState state) {
  return state == TrialState::kCompleted || state == TrialState::kInfeasible || state == TrialState::kFailed;
}

bool CanTransition(TrialState from, TrialState to) {
  switch (from) {
    case TrialState::kPending: return to == TrialState::kRunning;
    case TrialState::kRunning:
      return to == TrialState::kCompleted || to == TrialState::kInfeasible || to == TrialState::kFailed ||
             to == TrialState::kStopped || to == TrialState::kPending;
    case TrialState::kStopped:  // resumed
    case TrialState::kFailed:   // retried on request
      return to == TrialState::kPending;
    default: return false;
  }
}

}  // namespace dltune
