// NVML, the NVIDIA driver's management library, loaded when the program runs: dltune builds and runs without NVML
// or CUDA, and finds the GPUs of the machine it runs on. Nvml opens the library that $DLTUNE_NVML_LIBRARY names (a
// test's fake), else libnvidia-ml.so.1, resolves the few functions it uses by name, and initializes it. A missing
// library, a missing function or a failing initialization is not an error: there is no GPU, and
// unavailable_reason() says why for messages. It lists the devices (a GPU in MIG mode contributes its MIG instances,
// not itself) and samples one device's memory, utilization and compute processes by UUID. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace dltune {

// A GPU, or a MIG instance of one, as NVML lists it.
struct GpuDevice {
  int index = 0;            // NVML's index of the GPU (of its parent GPU, for a MIG instance)
  int mig_index = -1;       // the MIG instance's index on its GPU; -1 for a whole GPU
  std::string uuid;         // "GPU-…", or "MIG-…" for a MIG instance
  std::string parent_uuid;  // a MIG instance's GPU; empty for a whole GPU
  std::string name;         // "NVIDIA H100 80GB HBM3"
  std::uint64_t total_memory_bytes = 0;

  // "GPU 0 (NVIDIA H100 80GB HBM3)", or "GPU 0 MIG 1 (NVIDIA A100-SXM4-40GB MIG 3g.20gb)".
  std::string Label() const;
};

// A process with a CUDA context on a device; the pid is the host's, as NVML reports it.
struct GpuProcess {
  pid_t pid = 0;
  std::optional<std::uint64_t> used_bytes;  // nullopt where NVML does not say (no permission, some MIG setups)
};

// One reading of a device.
struct GpuSample {
  std::uint64_t used_bytes = 0;
  std::uint64_t total_bytes = 0;
  std::optional<int> utilization_percent;  // nullopt where not supported (a MIG instance)
  std::vector<GpuProcess> processes;       // its compute processes
  bool processes_known = false;            // whether NVML could list them (else `processes` is empty)
};

class Nvml {
 public:
  // Loads and initializes the library; never throws.
  Nvml();
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return api_ != nullptr; }
  // Why there is no NVML ("libnvidia-ml.so.1: cannot open shared object file: …"); empty when available.
  const std::string& unavailable_reason() const { return unavailable_reason_; }

  // The devices in NVML's order, MIG instances in place of a GPU in MIG mode; empty when unavailable. A device that
  // cannot be read (a GPU that fell off the bus) is left out.
  std::vector<GpuDevice> Devices();
  // "550.54.15"; empty when unavailable or unreadable.
  std::string DriverVersion();
  // The device with `uuid` now; nullopt when unavailable, unknown or unreadable.
  std::optional<GpuSample> Sample(const std::string& uuid);

  struct Api;  // the library's functions, resolved by name

 private:
  struct Listed;
  std::vector<Listed> List();

  std::unique_ptr<Api> api_;
  std::string unavailable_reason_;
  std::map<std::string, void*> handles_;  // NVML's device handles by UUID, from the latest listing
};

}  // namespace dltune
