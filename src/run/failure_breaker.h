// The repeated-failure breaker: a study whose trials keep failing the same way cannot work, and must not spend its
// budget failing. FailureBreaker is told how each trial ended, in the order they end, and says when
// `max_consecutive` of them in a row ended with the same cause; the caller then halts (its running trials checkpoint
// and stop). FailureCause groups failures into causes; InfrastructureFailure tells the machine's faults from the
// trial's.
#pragma once

#include <filesystem>
#include <string>

#include "dltune/store/store.h"

namespace dltune {

class FailureBreaker {
 public:
  // `max_consecutive`: endings in a row with one cause that trip the breaker; 0 (or less): it never trips.
  explicit FailureBreaker(int max_consecutive) : max_consecutive_(max_consecutive) {}

  // Counts a trial's ending. `cause`: for a failed trial, or one stopped by a fault of the machine, what it has in
  // common with others that ended the same way (FailureCause); empty for any other ending. A trial stopped with no
  // cause (on request) neither counts nor breaks a run; any other ending with no cause, or another cause, starts
  // the count again. True exactly once: at the ending that makes `max_consecutive` in a row.
  bool Count(TrialState state, const std::string& cause);

  // Trials in a row that ended with the latest cause.
  int consecutive() const { return consecutive_; }
  bool tripped() const { return tripped_; }

 private:
  int max_consecutive_;
  std::string cause_;  // of the latest trials that ended alike
  int consecutive_ = 0;
  bool tripped_ = false;
};

// The last line of a trial's stderr tail (TailOfFile's: without a final newline).
std::string LastLineOf(const std::string& stderr_tail);

// How a trial's failure is grouped with others: its reason and the last line of its stderr, digits masked, so
// trials that fail the same way with other numbers in the message count as one cause.
std::string FailureCause(const std::string& reason, const std::string& stderr_tail);

// Whether a trial's failure is the machine's fault, not the trial's: its directory's file system is full or read-
// only, or its stderr ends with such an error. Such trials are stopped (to resume), not failed. Returns the reason
// to record, or "".
std::string InfrastructureFailure(const std::filesystem::path& trial_dir, const std::string& stderr_tail);

}  // namespace dltune
