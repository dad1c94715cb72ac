// The clocks read as seconds in a double: the wall clock's since the Unix epoch (for records and what a user reads)
// and the steady clock's from its own origin (for spans and deadlines: it never jumps).
#pragma once

#include <chrono>

namespace dltune {

inline double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A span of any clock, in seconds.
template <typename Rep, typename Period>
double Seconds(std::chrono::duration<Rep, Period> span) {
  return std::chrono::duration<double>(span).count();
}

}  // namespace dltune
