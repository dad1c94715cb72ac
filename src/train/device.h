// Where the trainers train: the device training.device names, the data moved there, and CUDA's reproducibility.
#pragma once

#include <string>

#include <torch/torch.h>

#include "dltune/train/workload.h"

namespace dltune {

// The CUDA device of a data-parallel rank that is rank `local_rank` on its machine, of `devices` it sees: one each
// while there are enough, else shared round-robin ("cuda:N").
std::string CudaDeviceOfRank(int local_rank, int devices);

// `set` with its tensors on `device` (the same tensors when they are there already).
Dataset OnDevice(const Dataset& set, const torch::Device& device);

// `host` (a CPU tensor) on `device` without waiting for the device: on CUDA through pinned memory (a copy from
// pageable memory would wait for every kernel queued before it), the pinned block reused only once the copy is done;
// on the CPU `host` itself, which must then outlive the use of the result.
torch::Tensor ToDevice(const torch::Tensor& host, const torch::Device& device);

// The evaluation batch when training.eval_batch_size leaves it to the trainer: 2 training batches on the CPU, 16 on a
// device, where an evaluation batch costs a few dozen kernel launches whatever its size.
std::int64_t DefaultEvalBatchSize(std::int64_t batch_size, const torch::Device& device);

// Training on CUDA reproduces itself: deterministic kernels where LibTorch has them (an operation without one warns
// rather than fails; new memory is not filled with NaN, a debugging aid that costs a kernel per allocation),
// cuDNN's deterministic algorithms, and cuBLAS's fixed workspace, which CUBLAS_WORKSPACE_CONFIG must name before the
// first matrix product (the runner sets it for every built-in trial; `dltune train` here).
void MakeCudaDeterministic();

}  // namespace dltune
