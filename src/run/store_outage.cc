#include "run/store_outage.h"

#include <algorithm>
#include <chrono>
#include <thread>

#include <fmt/format.h>

#include "core/clock.h"

namespace dltune {
namespace {

void RealSleep(double seconds) { std::this_thread::sleep_for(std::chrono::duration<double>(seconds)); }

}  // namespace

StoreOutage::StoreOutage(double patience, RunObserver& observer, Clock now, Sleep sleep)
    : patience_(patience),
      observer_(observer),
      now_(now ? std::move(now) : Clock(WallSeconds)),
      sleep_(sleep ? std::move(sleep) : Sleep(RealSleep)) {}

bool StoreOutage::Wait(const StoreUnavailableError& error) {
  const double now = now_();
  if (down_since_ == 0) {
    down_since_ = now;
    backoff_ = kFirstBackoff;
    observer_.Notice(
        fmt::format("the store is unavailable ({}); the trials keep running and dltune tries again "
                    "for up to {:.0f} s",
                    error.what(), patience_));
  }
  if (now - down_since_ > patience_) return false;
  sleep_(backoff_);
  backoff_ = std::min(backoff_ * 2, kLongestBackoff);
  return true;
}

void StoreOutage::Answered() {
  if (down_since_ == 0) return;
  observer_.Notice(fmt::format("the store is back after {:.0f} s", now_() - down_since_));
  down_since_ = 0;
}

}  // namespace dltune
