// A trial's processes on this machine: one for an ordinary trial, or a gang of training.processes data-parallel
// ranks started together (docs/data-parallel.md). Rank 0 is the trial as the worker sees it: it reports, and its exit
// status is the trial's. The other ranks get the same command and files with the rendezvous variables PyTorch's
// launchers set (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), their output in
// rank_<r>.log beside rank 0's logs, and what they write to their report channel is read and dropped.
//
// A gang ends as one: a rank that ends badly breaks the others' collectives, and ranks still running once rank 0 has
// ended for kGangGraceSeconds (or a dead rank's peers past the collective timeout) are killed. No rank outlives it.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trial/trial_process.h"

namespace dltune {

// How long ranks may run on after rank 0 ended (they have nothing left to do but exit) before they are killed.
inline constexpr double kGangGraceSeconds = 10;

// The rendezvous variables of rank `rank` of `size`, `local_size` of them on this machine, meeting at address:port.
struct RankPlace {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
};
std::map<std::string, std::string> RendezvousVariables(const RankPlace& place, const std::string& address, int port);

// A TCP port of this machine that was free a moment ago on every interface (the kernel's choice for port 0). Throws
// IoError.
int FreePort();

class TrialGang {
 public:
  // Starts `processes` ranks of `command` (see the file comment); with one, just the command. `collective_timeout`:
  // the trial's training.collective_timeout, after which the ranks left by a dead one are killed. Throws like
  // TrialProcess; ranks already started are killed then.
  TrialGang(const TrialCommand& command, int processes, double collective_timeout, TrialServer* server = nullptr);
  ~TrialGang();
  TrialGang(const TrialGang&) = delete;
  TrialGang& operator=(const TrialGang&) = delete;

  int processes() const { return static_cast<int>(ranks_.size()); }
  pid_t pid() const { return ranks_.front()->pid(); }
  // Every rank's process, rank 0 first.
  std::vector<pid_t> pids() const {
    std::vector<pid_t> all;
    for (const auto& rank : ranks_) all.push_back(rank->pid());
    return all;
  }
  // Rank 0's report channel (TrialProcess::report_fd / ReadReport); the other ranks' are drained on every call.
  int report_fd() const { return ranks_.front()->report_fd(); }
  bool ReadReport(std::string& out);
  // Sends `signal` to every rank's process group.
  void Signal(int signal);
  // Rank 0's exit status once every rank has ended, without blocking; nullopt while any runs. Kills ranks that
  // overstay (see the file comment).
  std::optional<ExitStatus> TryWait();
  // The first rank other than 0 that ended badly while rank 0 still ran, e.g. "rank 1 of 2 ended with killed by
  // signal 9 (SIGKILL)"; "" when none did.
  const std::string& PeerFailure() const { return peer_failure_; }

 private:
  std::vector<std::unique_ptr<TrialProcess>> ranks_;
  std::vector<std::optional<ExitStatus>> ended_;
  double collective_timeout_ = 0;
  double rank0_ended_at_ = 0;  // seconds (steady clock); 0 while it runs
  double peer_failed_at_ = 0;
  std::string peer_failure_;
  bool killed_ = false;
};

}  // namespace dltune
