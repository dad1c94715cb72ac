#include "dltune/study/trial.h"

#include <algorithm>
#include <array>
#include <utility>

#include <fmt/format.h>

#include "dltune/core/error.h"

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

bool TrialTransitionRule::Allows(TrialState from_state, TrialState to_state) const {
  return std::ranges::find(from, from_state) != from.end() && Reaches(to_state);
}

bool TrialTransitionRule::Reaches(TrialState to_state) const { return std::ranges::find(to, to_state) != to.end(); }

TrialState TrialTransitionRule::Target() const {
  if (to.size() != 1) throw Error(fmt::format("the trial transition '{}' has {} target states", name, to.size()));
  return to.front();
}

const std::vector<TrialTransitionRule>& TrialTransitions() {
  using enum TrialState;
  static const std::vector<TrialTransitionRule> kTable = {
      {TrialTransition::kCreate, "create", {}, {kPending}},
      {TrialTransition::kClaim, "claim", {kPending}, {kRunning}},
      {TrialTransition::kReclaim, "reclaim", {kRunning}, {kPending, kFailed}},
      {TrialTransition::kResume, "resume", {kStopped}, {kPending}},
      {TrialTransition::kRetry, "retry", {kFailed}, {kPending}},
      {TrialTransition::kFinish, "finish", {kRunning}, {kCompleted, kInfeasible, kFailed, kStopped}},
  };
  return kTable;
}

const TrialTransitionRule& TransitionRule(TrialTransition transition) {
  return TrialTransitions().at(static_cast<std::size_t>(transition));
}

bool CanTransition(TrialState from, TrialState to) {
  return std::ranges::any_of(TrialTransitions(), [&](const auto& rule) { return rule.Allows(from, to); });
}

}  // namespace dltune
