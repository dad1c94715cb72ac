#include "train/rendezvous_store.h"

#include <chrono>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "dltune/core/error.h"

namespace dltune {

struct RendezvousStore::Impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
  std::string address;
};

namespace {

template <typename F>
auto Guarded(const std::string& address, const char* what, F&& operation) {
  try {
    return operation();
  } catch (const std::exception& e) {
    const std::string message = e.what();
    throw Error(
        fmt::format("the gang's store at {}: {} failed: {}", address, what, message.substr(0, message.find('\n'))));
  }
}

}  // namespace

RendezvousStore::RendezvousStore(const std::string& host, int port, bool serve, double timeout_seconds)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = fmt::format("{}:{}", host, port);
  Guarded(impl_->address, serve ? "serving" : "connecting", [&] {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(port);
    options.isServer = serve;
    options.waitWorkers = false;
    options.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(timeout_seconds * 1000));
    impl_->store = c10::make_intrusive<c10d::TCPStore>(host, options);
    return 0;
  });
}

RendezvousStore::~RendezvousStore() = default;

void RendezvousStore::Set(const std::string& key, const std::string& value) {
  Guarded(impl_->address, "a write", [&] {
    impl_->store->set(key, std::vector<std::uint8_t>(value.begin(), value.end()));
    return 0;
  });
}

std::optional<std::string> RendezvousStore::TryGet(const std::string& key) {
  return Guarded(impl_->address, "a read", [&]() -> std::optional<std::string> {
    if (!impl_->store->check({key})) return std::nullopt;
    const std::vector<std::uint8_t> value = impl_->store->get(key);
    return std::string(value.begin(), value.end());
  });
}

long long RendezvousStore::Add(const std::string& key, long long amount) {
  return Guarded(impl_->address, "a count", [&] { return static_cast<long long>(impl_->store->add(key, amount)); });
}

}  // namespace dltune
