// How a trial whose processes have ended is recorded: from its exit status, what it reported (TrialSink), and what
// the worker did to it (asked it to stop, killed it, timed it out), one ending — completed, infeasible, failed or
// stopped — with the reason, and for failures and faults of the machine the cause that FailureBreaker counts.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "dltune/run/study_session.h"
#include "dltune/store/store.h"
#include "trial/trial_process.h"
#include "trial/trial_report.h"

namespace dltune {

// What is known of a trial whose processes have ended.
struct EndedTrial {
  ExitStatus status;                // rank 0's
  std::filesystem::path trial_dir;  // its stderr.log holds the tail recorded with a failure
  std::string protocol_error;       // it broke the report protocol (TrialSink::protocol_error); "" when not
  std::string disk_fault;           // a write of the worker's for it failed (TrialSink::disk_fault); "" when none
  std::optional<ReportEnd> end;     // its end line
  bool term_sent = false;           // it was asked to stop (SIGTERM)
  bool kill_sent = false;           // it was killed (SIGKILL) on request or past its timeout
  bool timed_out = false;           // it ran past training.timeout
  bool hung_after_end = false;      // killed after it wrote its end line and did not exit (WorkerOptions::end_grace)
  double timeout_seconds = 0;       // training.timeout
  std::string peer_failure;         // a data-parallel trial's rank that ended first (TrialGang::PeerFailure)
};

struct TrialEnding {
  TrialState state = TrialState::kFailed;
  std::string reason;
  // For a failed trial, or one stopped by a fault of the machine, what it has in common with others that ended the
  // same way (FailureCause); "" otherwise.
  std::string cause;
};

// Records how `ended` ended on `trial` (Complete, Infeasible, Fail or Stop) and returns it. Throws LeaseLostError
// when another worker holds the trial now.
TrialEnding RecordEnding(ActiveTrial& trial, const EndedTrial& ended);

// A duration for messages: "40 s", "2.5 min", "1.5 h".
std::string FormatSeconds(double seconds);

}  // namespace dltune
