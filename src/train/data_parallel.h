// Data-parallel training of one trial by several processes (ranks), on LibTorch's distributed engine: c10d's
// TCPStore for the rendezvous and its Gloo process group for the collectives; ranks on GPUs of their own all-reduce
// their CUDA tensors over NCCL where LibTorch has it (docs/data-parallel.md).
//
// Every rank holds the whole model, computes the gradient of its shard of each global batch, and the ranks average
// those gradients with all-reduces before each applies the same update, so their models stay identical. Gradients
// are all-reduced in buckets of parameters, each launched from a gradient hook as soon as its last gradient is
// computed, so communication overlaps the rest of the backward pass. The last bucket also carries each rank's loss and
// its wish to stop, so every rank reports the same global loss and stops at the same step, at no extra round trip.
//
// Any failed collective (a rank that died, or one that did not answer within the timeout) throws
// CollectiveError: the group is broken for good and the trial ends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "dltune/core/error.h"
#include "dltune/train/training_process.h"

namespace dltune {

// A collective that failed: another rank ended or did not answer in time.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

class DataParallel {
 public:
  // Joins the group `options` describes (rank, world size, rendezvous address), waiting up to its timeout for the
  // others. `device`: where this rank trains. On CUDA, the tensors there (gradients, evaluation sums, batch-norm
  // averages) travel over NCCL when this LibTorch has it and no two ranks share a GPU, else over Gloo, which copies
  // them through the host; the checkpoint's bytes and the generators' states (CPU) always over Gloo. Every rank
  // makes the same choice. Throws CollectiveError when the ranks do not all come, Error for unusable options.
  explicit DataParallel(const DistributedOptions& options, const torch::Device& device = torch::kCPU);
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }

  // Averages the gradients of `params` from now on (hooks on each; buckets in reverse order, as backward produces
  // them). Call again after the model is rebuilt; the previous parameters are forgotten.
  void Attach(const std::vector<torch::Tensor>& params);

  // Before backward: this rank's mean loss (a scalar) and its wish to stop, which travel with the gradients.
  void BeginStep(const torch::Tensor& local_loss, bool stop_wish);
  // After backward: launches what the hooks did not (unused parameters), waits for every bucket, and leaves each
  // parameter's grad holding the mean over the ranks (a view of its bucket). Returns the mean loss over the ranks (a
  // scalar tensor) and whether any rank wished to stop. Throws CollectiveError.
  struct StepAgreement {
    torch::Tensor loss;
    bool stop = false;
  };
  StepAgreement FinishStep();

  // Sums `tensor` (float32, float64 or int64, on the CPU or the training device) over the ranks, in place. Throws
  // CollectiveError.
  void SumInPlace(torch::Tensor& tensor);
  // Replaces every floating-point buffer of `buffers` (batch norm's running averages) by its mean over the ranks.
  void AverageBuffers(const std::vector<torch::Tensor>& buffers);
  // Rank 0's `bytes`, on every rank (the others' `bytes` are replaced). Throws CollectiveError.
  void Broadcast(std::string& bytes);
  // Every rank's `tensor` (CPU, contiguous, the same shape and dtype on every rank: all run the same LibTorch),
  // stacked by rank. Throws CollectiveError.
  torch::Tensor AllGather(const torch::Tensor& tensor);

 private:
  struct Bucket;

  // Called by a parameter's hook with its gradient.
  void GradientReady(std::size_t param, const torch::Tensor& grad);
  // Launches the all-reduces of the buckets whose gradients are all in, in bucket order.
  void LaunchReadyBuckets();
  // Waits for `work`; a failure becomes CollectiveError naming `what`.
  void Wait(const c10::intrusive_ptr<c10d::Work>& work, const std::string& what);

  int rank_ = 0;
  int world_size_ = 1;
  double timeout_seconds_ = 0;
  c10::intrusive_ptr<c10d::Store> store_;
  // A group: a ProcessGroup in LibTorch 1.x, a Backend (of a ProcessGroup) from 2.0 on; the collectives used here
  // have the same signatures in both.
#if TORCH_VERSION_MAJOR >= 2
  using Group = c10::intrusive_ptr<c10d::Backend>;
#else
  using Group = c10::intrusive_ptr<c10d::ProcessGroup>;
#endif
  // Whether NCCL carries the device's tensors: this LibTorch has it, and every rank has a GPU of its own (each
  // rank's GPU, by host, CUDA_VISIBLE_DEVICES and index, compared through the store).
  bool EveryRankHasItsOwnGpu(const torch::Device& device);
  // The group of `tensor`'s collectives: device_group_ for a tensor on the training device, else group_.
  Group& GroupOf(const torch::Tensor& tensor) { return tensor.is_cuda() ? device_group_ : group_; }

  Group group_;         // Gloo
  Group device_group_;  // NCCL, or group_
  std::vector<torch::Tensor> params_;
  std::vector<std::pair<std::size_t, std::int64_t>> place_;  // per parameter: its bucket and offset in it
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::size_t next_launch_ = 0;  // buckets before this one are launched this step
  std::vector<unsigned> hook_ids_;
};

}  // namespace dltune
