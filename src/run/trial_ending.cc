#include "run/trial_ending.h"

#include <signal.h>

#include <string_view>

#include <fmt/format.h>

#include "dltune/core/error.h"
#include "run/failure_breaker.h"

namespace dltune {
namespace {

TrialEnding Failed(ActiveTrial& trial, const EndedTrial& ended, const std::string& reason,
                   const std::string& stderr_tail, std::string cause) {
  const int exit_code = ended.status.signal ? 128 + ended.status.signal : ended.status.code;
  trial.Fail(reason, exit_code, stderr_tail);
  return {TrialState::kFailed, reason, std::move(cause)};
}

TrialEnding Stopped(ActiveTrial& trial, const std::string& reason, std::string cause = "") {
  trial.Stop(reason);
  return {TrialState::kStopped, reason, std::move(cause)};
}

// It ended with exit status 0.
TrialEnding Succeeded(ActiveTrial& trial, const EndedTrial& ended) {
  if (ended.end && ended.end->state == EndState::kInfeasible) {
    trial.Infeasible(ended.end->reason);
    return {TrialState::kInfeasible, ended.end->reason, ""};
  }
  const TrialState state = trial.Complete();
  if (state != TrialState::kFailed) return {state, "", ""};
  const std::string reason = "it reported no evaluation of the objective";
  return {state, reason, FailureCause(reason, "")};
}

// ": WHAT" where the program's standard error ends with dltune's own error line ("dltune: error: WHAT": the built-in
// trainer's, say, or a wrapper's dltune), else "": the reason a failed trial is listed with says what went wrong.
std::string DltuneError(const std::string& stderr_tail) {
  constexpr std::string_view kPrefix = "dltune: error: ";
  const std::string last = LastLineOf(stderr_tail);
  if (last.size() <= kPrefix.size() || std::string_view(last).substr(0, kPrefix.size()) != kPrefix) return "";
  return ": " + last.substr(kPrefix.size());
}

}  // namespace

TrialEnding RecordEnding(ActiveTrial& trial, const EndedTrial& ended) {
  const ExitStatus& status = ended.status;
  const std::string stderr_tail = TailOfFile(ended.trial_dir / "stderr.log");
  const std::string infrastructure =
      status.ok() || ended.term_sent || ended.kill_sent ? "" : InfrastructureFailure(ended.trial_dir, stderr_tail);
  if (!ended.protocol_error.empty()) {
    const std::string reason = ended.protocol_error + " (see docs/trial-protocol.md)";
    return Failed(trial, ended, reason, stderr_tail, FailureCause(reason, ""));
  }
  if (!ended.disk_fault.empty() && !status.ok()) {
    return Stopped(trial,
                   fmt::format("{}; the trial was stopped ({}) and resumes when the study is run again",
                               ended.disk_fault, status.Describe()),
                   FailureCause(ended.disk_fault, ""));
  }
  if (ended.hung_after_end && ended.end) {
    // Its outcome was told in full; only its exit hung.
    if (ended.end->state != EndState::kStopped) return Succeeded(trial, ended);
    return Stopped(trial, fmt::format("stopped at step {} (its end line says so; it did not exit after it, and was "
                                      "killed)",
                                      ended.end->step.value_or(trial.last_step())));
  }
  if (ended.timed_out) {
    const std::string reason = fmt::format(
        "timed out: it ran longer than training.timeout ({}); it resumes from its latest "
        "checkpoint if retried (dltune run --retry-failed)",
        FormatSeconds(ended.timeout_seconds));
    return Failed(trial, ended, reason, stderr_tail, "timeout");
  }
  if (!infrastructure.empty()) {
    return Stopped(trial,
                   fmt::format("{}; the trial ended with {} and resumes when the study is run again", infrastructure,
                               status.Describe()),
                   FailureCause(infrastructure, ""));
  }
  // The program's own end line outranks an exit status a launcher (torchrun) made up from its workers' 75 or 0.
  if (ended.end && ended.end->state == EndState::kStopped && !ended.kill_sent) {
    const std::int64_t step = ended.end->step.value_or(trial.last_step());
    return Stopped(trial, status.code == kExitStopped && !status.signal
                              ? fmt::format("stopped{} at step {}", ended.term_sent ? " on request" : "", step)
                              : fmt::format("stopped{} at step {} (its end line says so; the process ended with {})",
                                            ended.term_sent ? " on request" : "", step, status.Describe()));
  }
  if (ended.end && ended.end->state == EndState::kInfeasible && !status.ok() && !ended.term_sent) {
    return Succeeded(trial, ended);  // an in-band infeasible outcome survives a launcher's exit status too
  }
  if (status.code == kExitStopped && !status.signal) {
    return Stopped(trial, ended.term_sent ? "stopped on request at step " + std::to_string(trial.last_step())
                                          : "the trial stopped itself (exit status 75) at step " +
                                                std::to_string(trial.last_step()));
  }
  if (ended.kill_sent || (ended.term_sent && status.signal == SIGTERM)) {
    return Stopped(trial, ended.kill_sent ? "killed on request; it resumes from its latest checkpoint"
                                          : "stopped on request (it ended on SIGTERM without exit status 75); it "
                                            "resumes from its latest checkpoint");
  }
  if (status.ok()) return Succeeded(trial, ended);
  // dltune asked it to stop: however it then ended (a full disk may fail its last checkpoint and its error message
  // too), it ends stopped, to resume from its latest checkpoint.
  if (ended.term_sent) {
    return Stopped(trial, fmt::format("stopped on request (it ended with {}{}); it resumes from its latest checkpoint",
                                      status.Describe(), DltuneError(stderr_tail)));
  }
  std::string reason = "the trial program ended with " + status.Describe() + DltuneError(stderr_tail);
  // A data-parallel trial: the rank that ended first is the cause; rank 0 only lost its peer.
  if (!ended.peer_failure.empty()) {
    reason = fmt::format("{}; rank 0 then ended with {} (see {})", ended.peer_failure, status.Describe(),
                         (ended.trial_dir / "rank_*.log").string());
  }
  return Failed(trial, ended, reason, stderr_tail, FailureCause(reason, stderr_tail));
}

std::string FormatSeconds(double seconds) {
  if (seconds >= 3600) return fmt::format("{:.3g} h", seconds / 3600);
  if (seconds >= 60) return fmt::format("{:.3g} min", seconds / 60);
  return fmt::format("{:.3g} s", seconds);
}

}  // namespace dltune
