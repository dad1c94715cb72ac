#include "device.h"

#include <cstdlib>

#include <fmt/format.h>
#include <torch/version.h>

#include "core/machine.h"
#include "dltune/core/error.h"
#include "dltune/train/training_process.h"

namespace dltune {

std::string ResolveTrainingDevice(const TrainingSettings& training) {
  if (training.device == "cpu") return "cpu";
  if (training.device == "cuda") {
    if (!torch::cuda::is_available()) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      throw Error(fmt::format("training.device is cuda, and this process sees no CUDA device: {}",
                              !at::hasCUDA()       ? "this LibTorch was built without CUDA"
                              : visible != nullptr ? fmt::format("CUDA_VISIBLE_DEVICES is '{}'", visible)
                                                   : std::string("no GPU or no driver")));
    }
    if (training.processes == 1) return "cuda";
    // A data-parallel rank: the GPU of its rank on this machine (the runner gives a trial's ranks one GPU each, in
    // rank order; a launcher's ranks see the machine's).
    const std::optional<LauncherTask> task = LauncherTaskFromEnvironment();
    return CudaDeviceOfRank(task ? task->local_rank : 0, static_cast<int>(torch::cuda::device_count()));
  }
  // auto: data-parallel ranks train on the CPU unless asked for CUDA (each then needs a GPU).
  return training.processes == 1 && torch::cuda::is_available() ? "cuda" : "cpu";
}

std::string CudaDeviceOfRank(int local_rank, int devices) {
  return fmt::format("cuda:{}", devices > 0 ? local_rank % devices : 0);
}

Dataset OnDevice(const Dataset& set, const torch::Device& device) {
  if (!set.inputs.defined()) return set;
  return {set.inputs.to(device), set.labels.to(device)};
}

torch::Tensor ToDevice(const torch::Tensor& host, const torch::Device& device) {
  if (device.is_cpu()) return host;
  if (!device.is_cuda()) return host.to(device);
  return host.pin_memory().to(device, /*non_blocking=*/true);
}

std::int64_t DefaultEvalBatchSize(std::int64_t batch_size, const torch::Device& device) {
  return (device.is_cpu() ? 2 : 16) * batch_size;
}

void MakeCudaDeterministic() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
  // With deterministic algorithms, LibTorch 2.1 and later also fill every new tensor and resized output with NaN, to
  // show reads of memory never written: a kernel and a pass over the memory per allocation, which nothing here reads
  // unwritten. Results are the same bits without it.
  at::globalContext().setDeterministicFillUninitializedMemory(false);
#endif
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

}  // namespace dltune
