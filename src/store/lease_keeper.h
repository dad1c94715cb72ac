// Internal: keeps a store's leases alive from a thread and a connection of its own (Store::KeepAlive), so that a
// worker whose own thread is busy (starting a trial's process on a loaded machine) never looks lost to the others.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "dltune/store/store.h"
#include "sql_connection.h"

namespace dltune::internal {

class LeaseKeeper {
 public:
  // `open` makes the keeper's connection, called on its thread (again after a failure); `now_sql` is the dialect's
  // SQL for the current time, as the store's heartbeats write it.
  LeaseKeeper(std::function<std::unique_ptr<SqlConnection>()> open, std::string now_sql);
  // Stops the thread; leases still held are no longer kept.
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // Stamps the lease's heartbeat at once, then whenever `every_seconds` passed without a stamp, until the returned
  // object is destroyed. Thread-safe.
  std::unique_ptr<KeptLease> Keep(const TrialLease& lease, double every_seconds);
  // The store's own connection stamped the trial's heartbeat just now: the keeper need not. Thread-safe.
  void Stamped(std::int64_t trial_id);

 private:
  struct Kept {
    std::string worker;
    double every = 1;
    double stamped_at = 0;  // steady seconds; 0: stamp at once
    int holders = 0;        // a trial kept by several objects at once is kept until the last goes
  };
  // What the thread and the handles share; outlives the keeper when a handle does.
  struct State {
    std::mutex mutex;
    std::condition_variable wake;
    std::map<std::int64_t, Kept> kept;  // by trial id
    bool stopping = false;
  };
  class Handle;

  void Run();
  // Stamps the heartbeats of `due` (trial id, worker) in one transaction on `connection`.
  void StampDue(SqlConnection& connection, const std::map<std::int64_t, std::string>& due) const;

  std::function<std::unique_ptr<SqlConnection>()> open_;
  std::string now_sql_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
  std::thread thread_;  // started with the first lease kept
};

}  // namespace dltune::internal
