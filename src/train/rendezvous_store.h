// A key-value store that the processes of a gang meet at: LibTorch's c10d TCPStore, served by one of them and reached
// by the others over TCP. The workers of a launcher job (docs/data-parallel.md, "Across machines") coordinate
// through it. This header is free of LibTorch types.
#pragma once

#include <memory>
#include <optional>
#include <string>

namespace dltune {

class RendezvousStore {
 public:
  // Serves the store at port `port` of this host (`serve`), or connects to the one at host:port, waiting up to
  // `timeout_seconds` for it. Throws Error naming the address when it cannot.
  RendezvousStore(const std::string& host, int port, bool serve, double timeout_seconds);
  ~RendezvousStore();
  RendezvousStore(const RendezvousStore&) = delete;
  RendezvousStore& operator=(const RendezvousStore&) = delete;

  void Set(const std::string& key, const std::string& value);
  // The value of `key`, or nullopt when it is not set (without waiting). Throws Error when the store is gone.
  std::optional<std::string> TryGet(const std::string& key);
  // Adds `amount` to the counter `key` (0 when unset) and returns the sum.
  long long Add(const std::string& key, long long amount);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dltune
