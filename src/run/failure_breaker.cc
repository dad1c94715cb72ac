#include "run/failure_breaker.h"

#include <sys/statvfs.h>

#include <algorithm>

#include <fmt/format.h>

namespace dltune {

bool FailureBreaker::Count(TrialState state, const std::string& cause) {
  if (state == TrialState::kStopped && cause.empty()) return false;
  if (cause.empty() || cause != cause_) {
    cause_ = cause;
    consecutive_ = 0;
  }
  if (cause.empty()) return false;
  ++consecutive_;
  if (max_consecutive_ <= 0 || consecutive_ < max_consecutive_ || tripped_) return false;
  tripped_ = true;
  return true;
}

std::string LastLineOf(const std::string& stderr_tail) {
  return stderr_tail.substr(stderr_tail.find_last_of('\n') + 1);  // npos + 1: the whole tail, one line
}

std::string FailureCause(const std::string& reason, const std::string& stderr_tail) {
  std::string cause = reason + "\n" + LastLineOf(stderr_tail);
  for (char& c : cause) {
    if (c >= '0' && c <= '9') c = '#';
  }
  return cause;
}

std::string InfrastructureFailure(const std::filesystem::path& trial_dir, const std::string& stderr_tail) {
  struct statvfs disk {};
  for (std::filesystem::path dir = trial_dir; !dir.empty(); dir = dir.parent_path()) {
    if (::statvfs(dir.c_str(), &disk) == 0) {
      if ((disk.f_flag & ST_RDONLY) != 0) return fmt::format("{} is on a read-only file system", dir.string());
      // Less than 1 MiB, or 0.1% of the disk, free: not enough to write a checkpoint or a log line.
      const double free_bytes = static_cast<double>(disk.f_bavail) * static_cast<double>(disk.f_frsize);
      const double total_bytes = static_cast<double>(disk.f_blocks) * static_cast<double>(disk.f_frsize);
      if (free_bytes < std::max(1048576.0, total_bytes * 0.001)) {
        return fmt::format("the disk of {} is full ({:.0f} kB free)", dir.string(), free_bytes / 1024);
      }
      break;
    }
    if (dir == dir.parent_path()) break;
  }
  for (const char* error :
       {"No space left on device", "Disk quota exceeded", "Read-only file system", "File too large"}) {
    if (stderr_tail.find(error) != std::string::npos) return std::string("the disk failed: ") + error;
  }
  return "";
}

}  // namespace dltune
