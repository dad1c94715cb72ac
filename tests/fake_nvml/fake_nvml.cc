// A stand-in for NVIDIA's libnvidia-ml.so.1, for tests on machines without a GPU: a shared library exporting the
// NVML functions dltune calls (src/gpu/nvml.cc), with nvml.h's ABI, answering from files in the directory that
// $DLTUNE_FAKE_NVML_DIR names, re-read on every call so that a test can change the machine while it runs.
//
// $DLTUNE_FAKE_NVML_DIR/gpus, one item a line ('#' starts a comment):
//   driver 550.54.15                   the driver's version
//   init_error 9                       nvmlInit_v2 fails with this nvmlReturn_t (9: driver not loaded)
//   gpu UUID total=BYTES [baseline=BYTES] [util=PERCENT] [pid_memory=hidden] name=NAME, SPACES AND ALL
//   mig UUID total=BYTES [baseline=BYTES] name=NAME
// A `mig` line is a MIG instance of the `gpu` line above it, which is then in MIG mode. `baseline` is memory in use
// by no listed process (the driver's own); `pid_memory=hidden` reports every process's memory as not available.
//
// $DLTUNE_FAKE_NVML_DIR/processes/UUID/PID holds "BYTES", "BYTES lingering" or "BYTES mps": process PID uses BYTES
// of the device. It is listed (nvmlDeviceGetComputeRunningProcesses_v3, or with `mps` as an MPS client
// nvmlDeviceGetMPSComputeRunningProcesses_v3) while the process is alive (kill(PID, 0)); its memory counts as used
// while it is alive, and after it died too when `lingering` (memory the driver did not free).
// Used memory = baseline + the processes' that count (+ its MIG instances', for a GPU in MIG mode).
#include <dirent.h>
#include <signal.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using nvmlReturn_t = int;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kInvalidArgument = 2;
constexpr nvmlReturn_t kNotSupported = 3;
constexpr nvmlReturn_t kNotFound = 6;
constexpr nvmlReturn_t kInsufficientSize = 7;
constexpr nvmlReturn_t kDriverNotLoaded = 9;
constexpr unsigned long long kValueNotAvailable = ~0ULL;
constexpr unsigned int kMaxMigDevices = 7;

struct Device {
  std::string uuid;
  std::string name;
  unsigned long long total = 0;
  unsigned long long baseline = 0;
  unsigned int util = 0;
  bool pid_memory_hidden = false;
  std::vector<Device> migs;
};

struct Machine {
  std::string driver = "550.54.15";
  int init_error = 0;
  std::vector<Device> gpus;
};

struct Process {
  unsigned int pid = 0;
  unsigned long long bytes = 0;
  bool alive = false;
  bool lingering = false;
  bool mps_client = false;
};

std::string Directory() {
  const char* dir = std::getenv("DLTUNE_FAKE_NVML_DIR");
  return dir != nullptr ? dir : "";
}

Device ParseDevice(std::istringstream& line) {
  Device device;
  line >> device.uuid;
  std::string field;
  while (line >> field) {
    const std::size_t equals = field.find('=');
    const std::string key = field.substr(0, equals), value = field.substr(equals + 1);
    if (key == "name") {
      std::string rest;
      std::getline(line, rest);
      device.name = value + rest;
      break;
    }
    if (key == "total") device.total = std::stoull(value);
    if (key == "baseline") device.baseline = std::stoull(value);
    if (key == "util") device.util = static_cast<unsigned int>(std::stoul(value));
    if (key == "pid_memory") device.pid_memory_hidden = value == "hidden";
  }
  return device;
}

Machine ReadMachine() {
  Machine machine;
  std::ifstream file(Directory() + "/gpus");
  std::string text;
  while (std::getline(file, text)) {
    std::istringstream line(text);
    std::string kind;
    line >> kind;
    if (kind == "driver") line >> machine.driver;
    if (kind == "init_error") line >> machine.init_error;
    if (kind == "gpu") machine.gpus.push_back(ParseDevice(line));
    if (kind == "mig" && !machine.gpus.empty()) machine.gpus.back().migs.push_back(ParseDevice(line));
  }
  return machine;
}

bool Alive(unsigned int pid) { return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

std::vector<Process> Processes(const Device& device) {
  std::vector<Process> processes;
  const std::string dir = Directory() + "/processes/" + device.uuid;
  DIR* listing = ::opendir(dir.c_str());
  if (listing == nullptr) return processes;
  while (const dirent* entry = ::readdir(listing)) {
    const std::string name = entry->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    Process process{.pid = static_cast<unsigned int>(std::stoul(name))};
    std::ifstream file(dir + "/" + name);
    std::string flag;
    file >> process.bytes >> flag;
    process.lingering = flag == "lingering";
    process.mps_client = flag == "mps";
    process.alive = Alive(process.pid);
    processes.push_back(process);
  }
  ::closedir(listing);
  return processes;
}

unsigned long long UsedMemory(const Device& device) {
  unsigned long long used = device.baseline;
  for (const Process& process : Processes(device)) {
    if (process.alive || process.lingering) used += process.bytes;
  }
  for (const Device& mig : device.migs) used += UsedMemory(mig);
  return used;
}

// A handle names a device by its place: (GPU index + 1) << 8 | (MIG index + 1), 0 in the low byte for a whole GPU.
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

nvmlDevice_t Handle(unsigned int gpu, int mig) {
  return reinterpret_cast<nvmlDevice_t>(static_cast<std::uintptr_t>(((gpu + 1) << 8) | static_cast<unsigned>(mig + 1)));
}

// The device a handle names, in the machine as it is now; nullptr when it names none.
const Device* Find(const Machine& machine, nvmlDevice_t handle) {
  const auto value = reinterpret_cast<std::uintptr_t>(handle);
  const std::size_t gpu = (value >> 8) - 1, mig = value & 0xff;
  if ((value >> 8) == 0 || gpu >= machine.gpus.size()) return nullptr;
  if (mig == 0) return &machine.gpus[gpu];
  return mig - 1 < machine.gpus[gpu].migs.size() ? &machine.gpus[gpu].migs[mig - 1] : nullptr;
}

nvmlReturn_t CopyText(const std::string& text, char* buffer, unsigned int length) {
  if (buffer == nullptr || text.size() + 1 > length) return kInsufficientSize;
  std::memcpy(buffer, text.c_str(), text.size() + 1);
  return kSuccess;
}

}  // namespace

extern "C" {

struct nvmlMemory_t {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvmlUtilization_t {
  unsigned int gpu;
  unsigned int memory;
};

struct nvmlProcessInfo_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};

nvmlReturn_t nvmlInit_v2() {
  if (Directory().empty()) return kDriverNotLoaded;
  return ReadMachine().init_error;
}

nvmlReturn_t nvmlShutdown() { return kSuccess; }

const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case kSuccess: return "Success";
    case kInvalidArgument: return "Invalid Argument";
    case kNotSupported: return "Not Supported";
    case kNotFound: return "Not Found";
    case kInsufficientSize: return "Insufficient Size";
    case kDriverNotLoaded: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  return CopyText(ReadMachine().driver, version, length);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(ReadMachine().gpus.size());
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= ReadMachine().gpus.size()) return kInvalidArgument;
  *device = Handle(index, -1);
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char* uuid, unsigned int length) {
  const Machine machine = ReadMachine();
  const Device* found = Find(machine, device);
  return found != nullptr ? CopyText(found->uuid, uuid, length) : kInvalidArgument;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char* name, unsigned int length) {
  const Machine machine = ReadMachine();
  const Device* found = Find(machine, device);
  return found != nullptr ? CopyText(found->name, name, length) : kInvalidArgument;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  const Machine machine = ReadMachine();
  const Device* found = Find(machine, device);
  if (found == nullptr) return kInvalidArgument;
  memory->total = found->total;
  memory->used = UsedMemory(*found);
  memory->free = memory->total > memory->used ? memory->total - memory->used : 0;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t* utilization) {
  const Machine machine = ReadMachine();
  const Device* found = Find(machine, device);
  if (found == nullptr) return kInvalidArgument;
  if ((reinterpret_cast<std::uintptr_t>(device) & 0xff) != 0) return kNotSupported;  // as on a MIG instance
  *utilization = {.gpu = found->util, .memory = 0};
  return kSuccess;
}

namespace {

nvmlReturn_t ListProcesses(nvmlDevice_t device, unsigned int* count, nvmlProcessInfo_t* infos, bool mps_clients) {
  const Machine machine = ReadMachine();
  const Device* found = Find(machine, device);
  if (found == nullptr) return kInvalidArgument;
  std::vector<nvmlProcessInfo_t> listed;
  for (const Process& process : Processes(*found)) {
    if (!process.alive || process.mps_client != mps_clients) continue;
    listed.push_back({.pid = process.pid,
                      .usedGpuMemory = found->pid_memory_hidden ? kValueNotAvailable : process.bytes,
                      .gpuInstanceId = 0,
                      .computeInstanceId = 0});
  }
  const bool fits = listed.size() <= *count;
  *count = static_cast<unsigned int>(listed.size());
  if (!fits) return kInsufficientSize;
  for (std::size_t i = 0; i < listed.size(); ++i) infos[i] = listed[i];
  return kSuccess;
}

}  // namespace

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  return ListProcesses(device, count, infos, /*mps_clients=*/false);
}

nvmlReturn_t nvmlDeviceGetMPSComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int* count,
                                                        nvmlProcessInfo_t* infos) {
  return ListProcesses(device, count, infos, /*mps_clients=*/true);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int* current, unsigned int* pending) {
  const Machine machine = ReadMachine();
  const Device* found = Find(machine, device);
  if (found == nullptr) return kInvalidArgument;
  *current = *pending = found->migs.empty() ? 0 : 1;
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int* count) {
  const Machine machine = ReadMachine();
  if (Find(machine, device) == nullptr) return kInvalidArgument;
  *count = kMaxMigDevices;  // as a real GPU: more slots than instances
  return kSuccess;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t* mig) {
  const Machine machine = ReadMachine();
  const Device* found = Find(machine, device);
  if (found == nullptr) return kInvalidArgument;
  if (index >= found->migs.size()) return kNotFound;
  const auto gpu = static_cast<unsigned int>((reinterpret_cast<std::uintptr_t>(device) >> 8) - 1);
  *mig = Handle(gpu, static_cast<int>(index));
  return kSuccess;
}

}  // extern "C"
