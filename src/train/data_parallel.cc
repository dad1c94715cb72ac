#include "data_parallel.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef DLTUNE_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "core/machine.h"

namespace dltune {
namespace {

// Gradients are all-reduced in buckets: the first (the last layers', which backward computes first) of about 1 MiB so
// that it goes out while backward still runs, the others of about 25 MiB so that each all-reduce's latency stays small
// against its transfer (PyTorch's DistributedDataParallel buckets the same way).
constexpr std::int64_t kFirstBucketBytes = 1 << 20;
constexpr std::int64_t kBucketBytes = 25 << 20;
// The last bucket also carries the step's control values after its gradients: the rank's loss and its wish to stop.
constexpr std::int64_t kControlValues = 2;

bool IsLoopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

// The network device this rank's Gloo binds to: GLOO_SOCKET_IFNAME's interface when set (as in PyTorch), loopback
// when the group is on this machine, else the address this machine's hostname resolves to.
std::shared_ptr<::gloo::transport::Device> GlooDevice(const std::string& master_addr) {
  if (const char* interface = std::getenv("GLOO_SOCKET_IFNAME"); interface && *interface) {
    return c10d::ProcessGroupGloo::createDeviceForInterface(interface);
  }
  if (IsLoopback(master_addr)) return c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1");
  return c10d::ProcessGroupGloo::createDefaultDevice();
}

// Waits until something listens at host:port (rank 0's store), for up to `timeout_seconds`. LibTorch's store client
// that finds no listener waits a whole second before it tries again; this polls every 5 ms, so a rank that starts
// before rank 0 joins it as soon as it listens.
void WaitForListener(const std::string& host, int port, double timeout_seconds) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || found == nullptr) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  bool listening = false;
  while (!listening && std::chrono::steady_clock::now() < deadline) {
    for (const addrinfo* address = found; address != nullptr && !listening; address = address->ai_next) {
      const int fd = ::socket(address->ai_family, address->ai_socktype | SOCK_CLOEXEC, address->ai_protocol);
      if (fd < 0) continue;
      listening = ::connect(fd, address->ai_addr, address->ai_addrlen) == 0;
      ::close(fd);
    }
    if (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::freeaddrinfo(found);
}

std::chrono::milliseconds Milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

std::string FirstLine(const std::string& text) { return text.substr(0, text.find('\n')); }

}  // namespace

DistributedOptions DistributedOptionsFromEnvironment(const TrainingSettings& training) {
  DistributedOptions options;
  options.timeout_seconds = training.collective_timeout_seconds;
  const std::optional<LauncherTask> task = LauncherTaskFromEnvironment();
  if (!task) {
    throw Error(fmt::format(
        "training.processes is {}, but this process was not started as one of its ranks: RANK and WORLD_SIZE (or "
        "Slurm's SLURM_PROCID and SLURM_NTASKS) are not set; dltune run and dltune worker start the ranks "
        "(docs/data-parallel.md)",
        training.processes));
  }
  if (task->size != training.processes) {
    throw Error(fmt::format("training.processes is {}, but {} say this is rank {} of {}", training.processes,
                            task->source, task->rank, task->size));
  }
  options.rank = task->rank;
  options.world_size = task->size;
  const char* address = std::getenv("MASTER_ADDR");
  const std::optional<int> port = WholeNumberVariable("MASTER_PORT");
  if (address == nullptr || *address == '\0' || !port) {
    throw Error("$MASTER_ADDR and $MASTER_PORT must name rank 0's host and a free port on it: the ranks meet there");
  }
  options.master_addr = address;
  options.master_port = *port;
  if (const char* prefix = std::getenv("DLTUNE_STORE_PREFIX")) options.store_prefix = prefix;
  return options;
}

// A bucket: one flat tensor that holds the gradients of some parameters while they are all-reduced.
struct DataParallel::Bucket {
  torch::Tensor flat;
  std::vector<std::size_t> params;  // indices into params_
  std::int64_t gradients = 0;       // elements of flat that hold gradients; in the last, kControlValues follow
  std::size_t ready = 0;            // of its parameters, how many gradients arrived this step
  c10::intrusive_ptr<c10d::Work> work;
};

DataParallel::DataParallel(const DistributedOptions& options, const torch::Device& device)
    : rank_(options.rank), world_size_(options.world_size), timeout_seconds_(options.timeout_seconds) {
  if (world_size_ < 2 || rank_ < 0 || rank_ >= world_size_) {
    throw Error(fmt::format("data-parallel rank {} of {} processes is not a rank of the group", rank_, world_size_));
  }
  if (options.master_addr.empty() || options.master_port <= 0 || options.master_port > 65535) {
    throw Error(fmt::format("data-parallel rank {}: no rendezvous address (MASTER_ADDR {}, MASTER_PORT {})", rank_,
                            options.master_addr.empty() ? "unset" : options.master_addr, options.master_port));
  }
  try {
    if (rank_ != 0) WaitForListener(options.master_addr, options.master_port, timeout_seconds_);
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<std::uint16_t>(options.master_port);
    store_options.isServer = rank_ == 0;
    store_options.numWorkers = world_size_;
    store_options.waitWorkers = false;  // the process group's connection waits for everyone, within its timeout
    store_options.timeout = Milliseconds(timeout_seconds_);
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    store_ = store;
    if (!options.store_prefix.empty()) store_ = c10::make_intrusive<c10d::PrefixStore>(options.store_prefix, store);
    auto group_options = c10d::ProcessGroupGloo::Options::create(Milliseconds(timeout_seconds_));
    group_options->devices.push_back(GlooDevice(options.master_addr));
    group_options->threads = 1;  // one communication thread: the cores train
    group_ = c10::make_intrusive<c10d::ProcessGroupGloo>(store_, rank_, world_size_, group_options);
    device_group_ = group_;
    if (device.is_cuda() && EveryRankHasItsOwnGpu(device)) {
#ifdef DLTUNE_NCCL
      auto nccl_options = c10d::ProcessGroupNCCL::Options::create();
      nccl_options->timeout = Milliseconds(timeout_seconds_);
      device_group_ = c10::make_intrusive<c10d::ProcessGroupNCCL>(store_, rank_, world_size_, nccl_options);
#endif
    }
  } catch (const std::exception& e) {
    throw CollectiveError(fmt::format(
        "data-parallel rank {} of {} could not join its group at {}:{} within {:.0f} s "
        "(training.collective_timeout): {}",
        rank_, world_size_, options.master_addr, options.master_port, timeout_seconds_, FirstLine(e.what())));
  }
  if (device.is_cuda()) {
    std::fprintf(stderr, "dltune: data-parallel rank %d of %d on %s, its CUDA tensors over %s\n", rank_, world_size_,
                 device.str().c_str(), device_group_ == group_ ? "gloo" : "nccl");
  }
}

bool DataParallel::EveryRankHasItsOwnGpu(const torch::Device& device) {
#ifdef DLTUNE_NCCL
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::string mine =
      fmt::format("{}/{}/{}", host, visible != nullptr ? visible : "", device.has_index() ? device.index() : 0);
  store_->set(fmt::format("dltune_gpu_{}", rank_), std::vector<std::uint8_t>(mine.begin(), mine.end()));
  std::set<std::string> gpus;
  for (int r = 0; r < world_size_; ++r) {
    const std::vector<std::uint8_t> theirs = store_->get(fmt::format("dltune_gpu_{}", r));
    gpus.emplace(theirs.begin(), theirs.end());
  }
  return gpus.size() == static_cast<std::size_t>(world_size_);
#else
  (void)device;
  return false;  // no NCCL in this LibTorch
#endif
}

DataParallel::~DataParallel() {
  for (std::size_t i = 0; i < hook_ids_.size() && i < params_.size(); ++i) params_[i].remove_hook(hook_ids_[i]);
}

void DataParallel::Attach(const std::vector<torch::Tensor>& params) {
  for (std::size_t i = 0; i < hook_ids_.size() && i < params_.size(); ++i) params_[i].remove_hook(hook_ids_[i]);
  hook_ids_.clear();
  params_ = params;
  buckets_.clear();
  place_.assign(params_.size(), {0, 0});
  // Reverse order: the last layers' gradients come first in backward.
  std::vector<std::size_t> current;
  std::int64_t elements = 0;
  auto close_bucket = [&] {
    if (current.empty()) return;
    auto bucket = std::make_unique<Bucket>();
    bucket->flat = torch::zeros({elements}, params_[current.front()].options().requires_grad(false));
    bucket->gradients = elements;
    std::int64_t offset = 0;
    for (const std::size_t p : current) {
      place_[p] = {buckets_.size(), offset};
      offset += params_[p].numel();
    }
    bucket->params = std::move(current);
    buckets_.push_back(std::move(bucket));
    current.clear();
    elements = 0;
  };
  for (std::size_t i = params_.size(); i-- > 0;) {
    const torch::Tensor& param = params_[i];
    // One dtype per bucket: a parameter of another starts a new one.
    if (!current.empty() && params_[current.front()].scalar_type() != param.scalar_type()) close_bucket();
    current.push_back(i);
    elements += param.numel();
    const std::int64_t cap = buckets_.empty() ? kFirstBucketBytes : kBucketBytes;
    if (elements * static_cast<std::int64_t>(param.element_size()) >= cap) close_bucket();
  }
  close_bucket();
  // The last bucket, launched last, also carries the step's control values.
  Bucket& last = *buckets_.back();
  last.flat = torch::zeros({last.gradients + kControlValues}, last.flat.options());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    hook_ids_.push_back(params_[i].register_hook([this, i](const torch::Tensor& grad) { GradientReady(i, grad); }));
  }
  next_launch_ = 0;
}

void DataParallel::GradientReady(std::size_t param, const torch::Tensor& grad) {
  const auto [bucket_index, offset] = place_[param];
  Bucket& bucket = *buckets_[bucket_index];
  const std::int64_t count = params_[param].numel();
  bucket.flat.narrow(0, offset, count).view_as(grad).copy_(grad);
  if (++bucket.ready == bucket.params.size()) LaunchReadyBuckets();
}

void DataParallel::LaunchReadyBuckets() {
  // In bucket order on every rank: Gloo matches collectives by their order.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_]->ready == buckets_[next_launch_]->params.size()) {
    Bucket& bucket = *buckets_[next_launch_++];
    std::vector<at::Tensor> tensors{bucket.flat};
    bucket.work = GroupOf(bucket.flat)->allreduce(tensors);
  }
}

void DataParallel::Wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what) {
  try {
    work->wait();
  } catch (const std::exception& e) {
    throw CollectiveError(
        fmt::format("data-parallel rank {} of {}: {} failed: another rank ended, or did not answer within {:.0f} s "
                    "(training.collective_timeout): {}",
                    rank_, world_size_, what, timeout_seconds_, FirstLine(e.what())));
  }
}

void DataParallel::BeginStep(const torch::Tensor& local_loss, bool stop_wish) {
  Bucket& last = *buckets_.back();
  last.flat.narrow(0, last.gradients, 1).copy_(local_loss.detach().view({1}));
  last.flat[last.gradients + 1] = stop_wish ? 1.0 : 0.0;
}

DataParallel::StepAgreement DataParallel::FinishStep() {
  // A parameter without a gradient this step contributes zeros (every rank skips the same ones).
  for (auto& bucket : buckets_) {
    if (bucket->ready < bucket->params.size()) {
      for (const std::size_t p : bucket->params) {
        if (!params_[p].grad().defined()) bucket->flat.narrow(0, place_[p].second, params_[p].numel()).zero_();
      }
      bucket->ready = bucket->params.size();
    }
  }
  LaunchReadyBuckets();
  for (auto& bucket : buckets_) {
    Wait(bucket->work, "the gradient all-reduce");
    bucket->work.reset();
    bucket->ready = 0;
    bucket->flat.div_(world_size_);
    for (const std::size_t p : bucket->params) {
      torch::Tensor& param = params_[p];
      if (!param.grad().defined()) continue;
      // The gradient becomes a view of the bucket: no copy back.
      param.mutable_grad() = bucket->flat.narrow(0, place_[p].second, param.numel()).view_as(param);
    }
  }
  next_launch_ = 0;
  const Bucket& last = *buckets_.back();
  return {last.flat[last.gradients].clone(), last.flat[last.gradients + 1].item<double>() > 0};
}

void DataParallel::SumInPlace(torch::Tensor& tensor) {
  std::vector<at::Tensor> tensors{tensor};
  Wait(GroupOf(tensor)->allreduce(tensors), "an evaluation all-reduce");
}

void DataParallel::AverageBuffers(const std::vector<torch::Tensor>& buffers) {
  // One all-reduce for all of them: each costs a network round trip.
  std::vector<torch::Tensor> averaged;
  for (const torch::Tensor& buffer : buffers) {
    if (buffer.is_floating_point()) averaged.push_back(buffer);
  }
  if (averaged.empty()) return;
  std::vector<torch::Tensor> flat_parts;
  for (const torch::Tensor& buffer : averaged) flat_parts.push_back(buffer.reshape({-1}).to(torch::kDouble));
  torch::Tensor flat = torch::cat(flat_parts);
  SumInPlace(flat);
  flat.div_(world_size_);
  std::int64_t offset = 0;
  for (torch::Tensor& buffer : averaged) {
    buffer.copy_(flat.narrow(0, offset, buffer.numel()).view_as(buffer));
    offset += buffer.numel();
  }
}

void DataParallel::Broadcast(std::string& bytes) {
  torch::Tensor length = torch::tensor({static_cast<std::int64_t>(bytes.size())}, torch::kInt64);
  std::vector<at::Tensor> lengths{length};
  Wait(group_->broadcast(lengths), "the checkpoint broadcast");
  const std::int64_t size = length.item<std::int64_t>();
  if (size == 0) {
    bytes.clear();
    return;
  }
  torch::Tensor data = torch::empty({size}, torch::kUInt8);
  if (rank_ == 0) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  std::vector<at::Tensor> payload{data};
  Wait(group_->broadcast(payload), "the checkpoint broadcast");
  bytes.assign(static_cast<const char*>(data.data_ptr()), static_cast<std::size_t>(size));
}

torch::Tensor DataParallel::AllGather(const torch::Tensor& tensor) {
  std::vector<std::vector<at::Tensor>> gathered(1);
  for (int r = 0; r < world_size_; ++r) gathered[0].push_back(torch::empty_like(tensor));
  std::vector<at::Tensor> input{tensor.contiguous()};
  Wait(group_->allgather(gathered, input), "a state all-gather");
  return torch::stack(gathered[0]);
}

}  // namespace dltune
