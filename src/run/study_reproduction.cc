#include "run/study_reproduction.h"

#include "core/reproduction.h"
#include "gpu/gpu_inventory.h"

namespace dltune {

NewStudy WithMachineGpus(NewStudy study) {
  Nvml nvml;
  if (!nvml.available()) return study;
  try {
    const GpuInventory inventory = FindGpus(nvml);
    std::vector<std::string> models;
    for (const GpuDevice& gpu : inventory.gpus) models.push_back(gpu.name);
    study.reproduction = WithGpus(study.reproduction, models, inventory.driver_version);
  } catch (const Error&) {
    // A CUDA_VISIBLE_DEVICES NVML cannot read leaves the record without GPUs; the runner says what is wrong.
  }
  return study;
}

}  // namespace dltune
