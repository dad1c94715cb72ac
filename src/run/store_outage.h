// Riding out a store that cannot be reached (a database restart, a lost connection, a full disk): the worker's trials
// go on running (what they report waits in their pipes and in memory) while the loop tries again, more slowly each
// time (0.5 s, doubling up to 10 s), for up to `patience` seconds from the first failure before it gives up. Tells
// the person running the study when the store went away and when it came back.
#pragma once

#include <functional>
#include <string>

#include "dltune/run/run_types.h"
#include "dltune/store/store.h"

namespace dltune {

class StoreOutage {
 public:
  using Clock = std::function<double()>;              // seconds since the epoch
  using Sleep = std::function<void(double seconds)>;  // waits that long

  // `patience`: seconds of outage to ride out. `now` and `sleep` default to the wall clock and a real wait.
  StoreOutage(double patience, RunObserver& observer, Clock now = {}, Sleep sleep = {});

  // A store call failed with `error`: notes when the outage began (telling it the first time), then waits before the
  // caller tries again. False, without waiting, once the store has been unreachable for longer than the patience:
  // the caller gives up (rethrows `error`).
  bool Wait(const StoreUnavailableError& error);

  // The store answered: ends the outage, if there was one (telling how long it lasted).
  void Answered();

  bool down() const { return down_since_ > 0; }

 private:
  static constexpr double kFirstBackoff = 0.5;
  static constexpr double kLongestBackoff = 10;

  double patience_;
  RunObserver& observer_;
  Clock now_;
  Sleep sleep_;
  double down_since_ = 0;           // when the store became unavailable; 0 while it answers
  double backoff_ = kFirstBackoff;  // seconds until the next try while it does not
};

}  // namespace dltune
