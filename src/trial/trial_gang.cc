#include "trial/trial_gang.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "core/clock.h"
#include "dltune/core/error.h"
#include "trial/trial_environment.h"
#include "trial/trial_report.h"

namespace dltune {
namespace {}  // namespace

std::map<std::string, std::string> RendezvousVariables(const RankPlace& place, const std::string& address, int port) {
  return {{"RANK", std::to_string(place.rank)},
          {"WORLD_SIZE", std::to_string(place.size)},
          {"LOCAL_RANK", std::to_string(place.local_rank)},
          {"LOCAL_WORLD_SIZE", std::to_string(place.local_size)},
          {"MASTER_ADDR", address},
          {"MASTER_PORT", std::to_string(port)}};
}

int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(fmt::format("cannot open a socket to find a free port: {}", std::strerror(errno)));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0;
  const int error = errno;
  ::close(fd);
  if (!ok) throw IoError(fmt::format("cannot find a free port: {}", std::strerror(error)));
  return ntohs(address.sin_port);
}

TrialGang::TrialGang(const TrialCommand& command, int processes, double collective_timeout, TrialServer* server)
    : collective_timeout_(collective_timeout) {
  if (processes <= 1) {
    ranks_.push_back(std::make_unique<TrialProcess>(command, server));
    ended_.resize(1);
    return;
  }
  const int port = FreePort();
  for (int rank = 0; rank < processes; ++rank) {
    TrialCommand rank_command = command;
    for (auto& [key, value] : RendezvousVariables({rank, processes, rank, processes}, "127.0.0.1", port)) {
      rank_command.environment[key] = value;
    }
    if (rank > 0) {
      rank_command.stdout_path = command.stdout_path.parent_path() / fmt::format("rank_{}.log", rank);
      rank_command.stderr_path = rank_command.stdout_path;
    }
    ranks_.push_back(std::make_unique<TrialProcess>(rank_command, server));  // a throw kills those started
  }
  ended_.resize(ranks_.size());
}

TrialGang::~TrialGang() = default;

bool TrialGang::ReadReport(std::string& out) {
  std::string dropped;
  for (std::size_t r = 1; r < ranks_.size(); ++r) {
    while (ranks_[r]->report_fd() >= 0 && ranks_[r]->ReadReport(dropped) && !dropped.empty()) dropped.clear();
  }
  return ranks_.front()->ReadReport(out);
}

void TrialGang::Signal(int signal) {
  for (auto& rank : ranks_) rank->Signal(signal);
}

std::optional<ExitStatus> TrialGang::TryWait() {
  const double now = SteadySeconds();
  const bool rank0_was_running = !ended_[0];
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    if (ended_[r]) continue;
    ended_[r] = ranks_[r]->TryWait();
    if (!ended_[r]) continue;
    // A peer that failed while rank 0 ran is the cause, and so is one seen ending together with a rank 0 that died of
    // SIGPIPE: rank 0 wrote to the dead peer's socket (the one order both ends can be seen in at once).
    const bool rank0_followed = rank0_was_running && ended_[0] && ended_[0]->signal == SIGPIPE;
    if (r == 0) {
      rank0_ended_at_ = now;
    } else if (!ended_[r]->ok() && (!ended_[0] || rank0_followed) && peer_failure_.empty()) {
      peer_failure_ = fmt::format("rank {} of {} ended with {}", r, ranks_.size(), ended_[r]->Describe());
      peer_failed_at_ = now;
    }
  }
  bool all = true;
  for (const auto& status : ended_) all = all && status.has_value();
  if (all) return ended_.front();
  // Ranks left behind: after rank 0 ended they have nothing to do; after a rank died the others' collectives fail
  // within the timeout, and whoever still runs past it hangs.
  // Rank 0 failed: the others cannot finish without it, and have nothing to save.
  const bool rank0_failed =
      ended_[0] && !ended_[0]->ok() && !(ended_[0]->signal == 0 && ended_[0]->code == kExitStopped);
  const bool overstayed = rank0_failed || (rank0_ended_at_ > 0 && now - rank0_ended_at_ > kGangGraceSeconds) ||
                          (peer_failed_at_ > 0 && now - peer_failed_at_ > collective_timeout_ + kGangGraceSeconds);
  if (overstayed && !killed_) {
    Signal(SIGKILL);
    killed_ = true;
  }
  return std::nullopt;
}

}  // namespace dltune
