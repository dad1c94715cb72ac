// Faults a test asks a built-in trial (or a fused group) to have: DLTUNE_INJECT_FAULT (docs/trial-protocol.md,
// "Testing: injected faults"). It has no other use.
#pragma once

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {

// Faults a test asks a built-in trial to have, from DLTUNE_INJECT_FAULT = "KIND@TRIAL:STEP[#RANK][,...]": at step
// STEP of trial number TRIAL (of a fused group: its first member), `segv` raises SIGSEGV, `kill` SIGKILLs itself,
// `hang` sleeps for ever, `leak` allocates and touches 64 MiB at every step from STEP on, never freed, and `jitter`
// makes every other step from STEP on take three times as long as the one before (a busy machine's bimodal step times)
// (docs/trial-protocol.md, "Testing"). With #RANK, only that data-parallel rank of the trial has it; without, every
// rank.
class InjectedFaults {
 public:
  InjectedFaults() {
    const char* spec = std::getenv("DLTUNE_INJECT_FAULT");
    const char* number = std::getenv("DLTUNE_TRIAL_NUMBER");
    if (!spec || !number) return;
    const char* rank_variable = std::getenv("RANK");
    const std::string rank = rank_variable != nullptr && *rank_variable ? rank_variable : "0";
    std::istringstream items(spec);
    std::string item;
    while (std::getline(items, item, ',')) {
      const auto at = item.find('@');
      const auto colon = item.find(':', at == std::string::npos ? 0 : at);
      if (at == std::string::npos || colon == std::string::npos) {
        throw Error(fmt::format("DLTUNE_INJECT_FAULT: '{}' is not KIND@TRIAL:STEP", item));
      }
      if (item.substr(at + 1, colon - at - 1) != number) continue;
      const auto hash = item.find('#', colon);
      if (hash != std::string::npos && item.substr(hash + 1) != rank) continue;
      faults_.emplace_back(item.substr(0, at), std::stoll(item.substr(colon + 1, hash - colon - 1)));
    }
  }

  void AtStep(std::int64_t step) {
    const auto now = std::chrono::steady_clock::now();
    const auto since_last = now - last_step_;
    last_step_ = now;
    for (const auto& [kind, from] : faults_) {
      if (kind == "jitter" && step >= from && step % 2 == 1) {
        std::this_thread::sleep_for(
            std::max<std::chrono::steady_clock::duration>(2 * since_last, std::chrono::milliseconds(1)));
        last_step_ = std::chrono::steady_clock::now();
      }
      if (kind == "leak" && step >= from) {
        constexpr std::size_t kLeakBytes = 64 << 20;
        auto* bytes = new char[kLeakBytes];  // never freed, on purpose
        std::memset(bytes, 1, kLeakBytes);
        leaked_.push_back(bytes);
      }
      if (step != from) continue;
      if (kind == "segv") std::raise(SIGSEGV);
      if (kind == "kill") std::raise(SIGKILL);
      while (kind == "hang") std::this_thread::sleep_for(std::chrono::seconds(60));
    }
  }

 private:
  std::vector<std::pair<std::string, std::int64_t>> faults_;
  std::vector<char*> leaked_;
  std::chrono::steady_clock::time_point last_step_ = std::chrono::steady_clock::now();
};

}  // namespace dltune
