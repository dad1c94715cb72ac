#include "lease_keeper.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "core/clock.h"

namespace dltune::internal {
namespace {

// How long the thread sleeps when it keeps nothing.
constexpr double kIdleSeconds = 1;

}  // namespace

class LeaseKeeper::Handle final : public KeptLease {
 public:
  Handle(std::shared_ptr<State> state, std::int64_t trial_id) : state_(std::move(state)), trial_id_(trial_id) {}
  ~Handle() override {
    const std::lock_guard lock(state_->mutex);
    const auto it = state_->kept.find(trial_id_);
    if (it != state_->kept.end() && --it->second.holders <= 0) state_->kept.erase(it);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

 private:
  std::shared_ptr<State> state_;
  std::int64_t trial_id_;
};

LeaseKeeper::LeaseKeeper(std::function<std::unique_ptr<SqlConnection>()> open, std::string now_sql)
    : open_(std::move(open)), now_sql_(std::move(now_sql)) {}

LeaseKeeper::~LeaseKeeper() {
  {
    const std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::unique_ptr<KeptLease> LeaseKeeper::Keep(const TrialLease& lease, double every_seconds) {
  {
    const std::lock_guard lock(state_->mutex);
    Kept& kept = state_->kept[lease.trial_id];
    kept.worker = lease.worker;
    kept.every = std::max(every_seconds, 0.01);
    kept.stamped_at = 0;
    ++kept.holders;
    if (!thread_.joinable()) thread_ = std::thread([this] { Run(); });
  }
  state_->wake.notify_all();
  return std::make_unique<Handle>(state_, lease.trial_id);
}

void LeaseKeeper::Stamped(std::int64_t trial_id) {
  const std::lock_guard lock(state_->mutex);
  if (const auto it = state_->kept.find(trial_id); it != state_->kept.end()) it->second.stamped_at = SteadySeconds();
}

void LeaseKeeper::Run() {
  std::unique_ptr<SqlConnection> connection;
  std::unique_lock lock(state_->mutex);
  while (!state_->stopping) {
    // The trials whose last stamp is a full interval old, and when the next one will be.
    const double now = SteadySeconds();
    std::map<std::int64_t, std::string> due;
    double next = now + kIdleSeconds;
    for (const auto& [trial_id, kept] : state_->kept) {
      if (now - kept.stamped_at >= kept.every) {
        due.emplace(trial_id, kept.worker);
        next = std::min(next, now + kept.every);
      } else {
        next = std::min(next, kept.stamped_at + kept.every);
      }
    }
    if (!due.empty()) {
      lock.unlock();
      bool stamped = false;
      try {
        if (!connection) connection = open_();
        StampDue(*connection, due);
        stamped = true;
      } catch (const std::exception&) {
        // The database is out of reach or busy: tried again at the next interval (a lost connection reconnects).
      }
      lock.lock();
      if (stamped) {
        const double at = SteadySeconds();
        for (const auto& [trial_id, worker] : due) {
          if (const auto it = state_->kept.find(trial_id); it != state_->kept.end()) it->second.stamped_at = at;
        }
        continue;  // recompute: leases may have come and gone meanwhile
      }
    }
    state_->wake.wait_for(lock, std::chrono::duration<double>(std::max(0.0, next - now)));
  }
}

void LeaseKeeper::StampDue(SqlConnection& connection, const std::map<std::int64_t, std::string>& due) const {
  connection.BeginWrite();
  try {
    for (const auto& [trial_id, worker] : due) {
      // Only a trial the lease still holds: a reclaimed or finished one is left as it is.
      connection.Execute("UPDATE trials SET heartbeat_at = " + now_sql_ + " WHERE id = ? AND state = '" +
                             TrialStateName(TrialState::kRunning) + "' AND worker = ?",
                         {trial_id, worker});
    }
    connection.Commit();
  } catch (...) {
    try {
      connection.Rollback();
    } catch (const std::exception&) {
      // The transaction went with the connection.
    }
    throw;
  }
}

}  // namespace dltune::internal
