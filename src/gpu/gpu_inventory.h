// The GPUs this process may use: those NVML lists (a GPU in MIG mode contributes its MIG instances, not itself),
// narrowed first by the CUDA_VISIBLE_DEVICES a launcher set (Slurm, Kubernetes) and then by the `--gpus` option.
// CUDA_VISIBLE_DEVICES is read as CUDA reads it: a comma list of NVML indices of GPUs, `GPU-`/`MIG-` UUIDs, or unique
// prefixes of them; the empty string or -1 hides every GPU; an entry that names no GPU hides it and every entry after
// it. `--gpus` is `all` (the default), `none`, or a comma list of positions in the visible list or UUIDs (prefixes
// too); an entry that names no visible GPU is the user's mistake (Error, invalid input). SelectGpus is the pure rule;
// FindGpus applies it to NVML and this process's environment. No NVML is no GPU, with the reason in `note`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gpu/nvml.h"

namespace dltune {

struct GpuInventory {
  std::vector<GpuDevice> gpus;  // usable, in the order selected
  std::string driver_version;   // "550.54.15"; empty without NVML
  // Why there is no GPU, or which entries of CUDA_VISIBLE_DEVICES were ignored; empty when neither.
  std::string note;
};

// Of `devices` (NVML's list), those CUDA_VISIBLE_DEVICES (nullopt: unset) lets CUDA see, narrowed by `gpus_option`.
// Throws Error naming the entry of `gpus_option` that names no visible GPU.
GpuInventory SelectGpus(const std::vector<GpuDevice>& devices, const std::optional<std::string>& cuda_visible_devices,
                        const std::string& gpus_option = "all");

// SelectGpus on what `nvml` lists and this process's CUDA_VISIBLE_DEVICES, with the driver's version. When NVML is
// unavailable: no GPU, `note` says why (and a `gpus_option` that names GPUs is an Error saying so).
GpuInventory FindGpus(Nvml& nvml, const std::string& gpus_option = "all");

}  // namespace dltune
