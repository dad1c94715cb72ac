#include "gpu/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>

namespace dltune {
namespace {

// nvml.h's ABI, declared here so that the build needs neither NVML nor CUDA.
using NvmlReturn = int;  // nvmlReturn_t
constexpr NvmlReturn kNvmlSuccess = 0;
constexpr NvmlReturn kNvmlErrorInsufficientSize = 7;
using NvmlDeviceHandle = void*;  // nvmlDevice_t: a pointer to an opaque struct

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

struct NvmlProcessInfo {  // nvmlProcessInfo_v2_t, which nvmlDeviceGetComputeRunningProcesses_v3 fills
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned int kNvmlDeviceMigEnable = 1;              // NVML_DEVICE_MIG_ENABLE
constexpr unsigned int kNvmlTextBufferSize = 96;              // the largest of NVML's UUID, name, version sizes
constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

}  // namespace

struct Nvml::Api {
  void* library = nullptr;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
  NvmlReturn (*driver_version)(char*, unsigned int) = nullptr;
  NvmlReturn (*device_count)(unsigned int*) = nullptr;
  NvmlReturn (*handle_by_index)(unsigned int, NvmlDeviceHandle*) = nullptr;
  NvmlReturn (*uuid)(NvmlDeviceHandle, char*, unsigned int) = nullptr;
  NvmlReturn (*name)(NvmlDeviceHandle, char*, unsigned int) = nullptr;
  NvmlReturn (*memory_info)(NvmlDeviceHandle, NvmlMemory*) = nullptr;
  // Optional: an older driver may lack them (then no utilization, no processes, no MIG instances).
  NvmlReturn (*utilization)(NvmlDeviceHandle, NvmlUtilization*) = nullptr;
  NvmlReturn (*compute_processes)(NvmlDeviceHandle, unsigned int*, NvmlProcessInfo*) = nullptr;
  // Under MPS the clients are listed here, and the MPS server among the compute processes; optional.
  NvmlReturn (*mps_processes)(NvmlDeviceHandle, unsigned int*, NvmlProcessInfo*) = nullptr;
  NvmlReturn (*mig_mode)(NvmlDeviceHandle, unsigned int*, unsigned int*) = nullptr;
  NvmlReturn (*max_mig_devices)(NvmlDeviceHandle, unsigned int*) = nullptr;
  NvmlReturn (*mig_handle_by_index)(NvmlDeviceHandle, unsigned int, NvmlDeviceHandle*) = nullptr;
};

// A listed device with its handle.
struct Nvml::Listed {
  GpuDevice device;
  NvmlDeviceHandle handle = nullptr;
};

namespace {

template <typename Function>
void Resolve(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(::dlsym(library, name));
}

// Resolves every function; returns the first required one the library lacks, or "".
std::string ResolveAll(Nvml::Api& api) {
  void* lib = api.library;
  Resolve(lib, "nvmlInit_v2", api.init);
  Resolve(lib, "nvmlShutdown", api.shutdown);
  Resolve(lib, "nvmlErrorString", api.error_string);
  Resolve(lib, "nvmlSystemGetDriverVersion", api.driver_version);
  Resolve(lib, "nvmlDeviceGetCount_v2", api.device_count);
  Resolve(lib, "nvmlDeviceGetHandleByIndex_v2", api.handle_by_index);
  Resolve(lib, "nvmlDeviceGetUUID", api.uuid);
  Resolve(lib, "nvmlDeviceGetName", api.name);
  Resolve(lib, "nvmlDeviceGetMemoryInfo", api.memory_info);
  Resolve(lib, "nvmlDeviceGetUtilizationRates", api.utilization);
  Resolve(lib, "nvmlDeviceGetComputeRunningProcesses_v3", api.compute_processes);
  Resolve(lib, "nvmlDeviceGetMPSComputeRunningProcesses_v3", api.mps_processes);
  Resolve(lib, "nvmlDeviceGetMigMode", api.mig_mode);
  Resolve(lib, "nvmlDeviceGetMaxMigDeviceCount", api.max_mig_devices);
  Resolve(lib, "nvmlDeviceGetMigDeviceHandleByIndex", api.mig_handle_by_index);
  const std::array<std::pair<const char*, bool>, 9> required = {{
      {"nvmlInit_v2", api.init != nullptr},
      {"nvmlShutdown", api.shutdown != nullptr},
      {"nvmlErrorString", api.error_string != nullptr},
      {"nvmlSystemGetDriverVersion", api.driver_version != nullptr},
      {"nvmlDeviceGetCount_v2", api.device_count != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", api.handle_by_index != nullptr},
      {"nvmlDeviceGetUUID", api.uuid != nullptr},
      {"nvmlDeviceGetName", api.name != nullptr},
      {"nvmlDeviceGetMemoryInfo", api.memory_info != nullptr},
  }};
  for (const auto& [name, found] : required) {
    if (!found) return name;
  }
  return "";
}

std::string LibraryPath() {
  const char* path = std::getenv("DLTUNE_NVML_LIBRARY");
  return path != nullptr && *path != '\0' ? path : kDefaultLibrary;
}

// A text NVML writes into a buffer; empty when the call fails.
template <typename Call>
std::string ReadText(Call call) {
  std::array<char, kNvmlTextBufferSize> buffer{};
  if (call(buffer.data(), static_cast<unsigned int>(buffer.size())) != kNvmlSuccess) return "";
  buffer.back() = '\0';
  return buffer.data();
}

bool InMigMode(const Nvml::Api& api, NvmlDeviceHandle gpu) {
  if (api.mig_mode == nullptr || api.max_mig_devices == nullptr || api.mig_handle_by_index == nullptr) return false;
  unsigned int current = 0, pending = 0;
  return api.mig_mode(gpu, &current, &pending) == kNvmlSuccess && current == kNvmlDeviceMigEnable;
}

using ProcessLister = NvmlReturn (*)(NvmlDeviceHandle, unsigned int*, NvmlProcessInfo*);

std::optional<std::vector<GpuProcess>> ListProcesses(ProcessLister list, NvmlDeviceHandle handle) {
  if (list == nullptr) return std::nullopt;
  std::vector<NvmlProcessInfo> infos(32);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto count = static_cast<unsigned int>(infos.size());
    const NvmlReturn result = list(handle, &count, infos.data());
    if (result == kNvmlErrorInsufficientSize) {
      infos.resize(count + 16);  // more may have started since
      continue;
    }
    if (result != kNvmlSuccess) return std::nullopt;
    std::vector<GpuProcess> processes;
    for (unsigned int i = 0; i < count; ++i) {
      const NvmlProcessInfo& info = infos[i];
      GpuProcess process{.pid = static_cast<pid_t>(info.pid)};
      if (info.used_gpu_memory != kNvmlValueNotAvailable) process.used_bytes = info.used_gpu_memory;
      processes.push_back(process);
    }
    return processes;
  }
  return std::nullopt;
}

// The processes with a CUDA context on the device: its compute processes and its MPS clients (dltune run --mps).
std::optional<std::vector<GpuProcess>> ComputeProcesses(const Nvml::Api& api, NvmlDeviceHandle handle) {
  auto processes = ListProcesses(api.compute_processes, handle);
  if (!processes) return std::nullopt;
  if (const auto clients = ListProcesses(api.mps_processes, handle)) {
    for (const GpuProcess& client : *clients) {
      const bool listed = std::any_of(processes->begin(), processes->end(),
                                      [&](const GpuProcess& process) { return process.pid == client.pid; });
      if (!listed) processes->push_back(client);
    }
  }
  return processes;
}

}  // namespace

std::string GpuDevice::Label() const {
  const std::string mig = mig_index >= 0 ? fmt::format(" MIG {}", mig_index) : "";
  return fmt::format("GPU {}{} ({})", index, mig, name);
}

Nvml::Nvml() {
  const std::string path = LibraryPath();
  auto api = std::make_unique<Api>();
  api->library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (api->library == nullptr) {
    const char* error = ::dlerror();
    unavailable_reason_ = error != nullptr ? error : path + ": cannot be loaded";
    return;
  }
  if (const std::string missing = ResolveAll(*api); !missing.empty()) {
    unavailable_reason_ = fmt::format("{} lacks {}", path, missing);
    ::dlclose(api->library);
    return;
  }
  if (const NvmlReturn result = api->init(); result != kNvmlSuccess) {
    unavailable_reason_ = fmt::format("NVML did not start: {}", api->error_string(result));
    ::dlclose(api->library);
    return;
  }
  api_ = std::move(api);
}

Nvml::~Nvml() {
  if (api_ == nullptr) return;
  api_->shutdown();
  ::dlclose(api_->library);
}

std::vector<Nvml::Listed> Nvml::List() {
  std::vector<Listed> listed;
  if (api_ == nullptr) return listed;
  const Api& api = *api_;
  const auto describe = [&](NvmlDeviceHandle handle, int index, int mig_index,
                            const std::string& parent_uuid) -> std::optional<Listed> {
    Listed item{.device = {.index = index, .mig_index = mig_index, .parent_uuid = parent_uuid}, .handle = handle};
    item.device.uuid = ReadText([&](char* text, unsigned int size) { return api.uuid(handle, text, size); });
    item.device.name = ReadText([&](char* text, unsigned int size) { return api.name(handle, text, size); });
    NvmlMemory memory{};
    if (item.device.uuid.empty() || api.memory_info(handle, &memory) != kNvmlSuccess) return std::nullopt;
    item.device.total_memory_bytes = memory.total;
    return item;
  };
  unsigned int count = 0;
  if (api.device_count(&count) != kNvmlSuccess) return listed;
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDeviceHandle gpu = nullptr;
    if (api.handle_by_index(i, &gpu) != kNvmlSuccess) continue;
    const auto whole = describe(gpu, static_cast<int>(i), -1, "");
    if (!whole) continue;
    if (!InMigMode(api, gpu)) {
      listed.push_back(*whole);
      continue;
    }
    unsigned int most = 0;
    if (api.max_mig_devices(gpu, &most) != kNvmlSuccess) continue;
    for (unsigned int m = 0; m < most; ++m) {
      NvmlDeviceHandle instance = nullptr;
      if (api.mig_handle_by_index(gpu, m, &instance) != kNvmlSuccess) continue;  // no instance at this index
      if (auto item = describe(instance, static_cast<int>(i), static_cast<int>(m), whole->device.uuid)) {
        listed.push_back(*item);
      }
    }
  }
  handles_.clear();
  for (const Listed& item : listed) handles_[item.device.uuid] = item.handle;
  return listed;
}

std::vector<GpuDevice> Nvml::Devices() {
  std::vector<GpuDevice> devices;
  for (Listed& item : List()) devices.push_back(std::move(item.device));
  return devices;
}

std::string Nvml::DriverVersion() {
  if (api_ == nullptr) return "";
  return ReadText([&](char* text, unsigned int size) { return api_->driver_version(text, size); });
}

std::optional<GpuSample> Nvml::Sample(const std::string& uuid) {
  if (api_ == nullptr) return std::nullopt;
  if (!handles_.contains(uuid)) List();
  const auto found = handles_.find(uuid);
  if (found == handles_.end()) return std::nullopt;
  NvmlDeviceHandle handle = found->second;
  NvmlMemory memory{};
  if (api_->memory_info(handle, &memory) != kNvmlSuccess) return std::nullopt;
  GpuSample sample{.used_bytes = memory.used, .total_bytes = memory.total};
  NvmlUtilization utilization{};
  if (api_->utilization != nullptr && api_->utilization(handle, &utilization) == kNvmlSuccess) {
    sample.utilization_percent = static_cast<int>(utilization.gpu);
  }
  if (auto processes = ComputeProcesses(*api_, handle)) {
    sample.processes = std::move(*processes);
    sample.processes_known = true;
  }
  return sample;
}

}  // namespace dltune
