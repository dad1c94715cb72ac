// The runner's GPU placement on the machine's own NVML (label gpu; it skips, saying why, where there is no NVML or no
// GPU): what the GPU pool relies on holds there. The GPUs are listed with their memory and the driver; a trial
// process training on one (`dltune train --device cuda`) is listed by NVML under the pid the worker knows, with the
// memory it holds; and once it has ended NVML lists it no more and its memory is free, so its slot is handed on.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "core/files.h"
#include "gpu/gpu_inventory.h"
#include "gpu/nvml.h"

namespace dltune {
namespace {

using Clock = std::chrono::steady_clock;
// Less than a CUDA context of a training process holds.
constexpr std::uint64_t kContextBytes = std::uint64_t{64} << 20;

// `dltune train synthetic --device cuda` on the GPU `uuid`, long enough to be seen; its pid.
pid_t StartTrainingOn(const std::string& uuid, const std::filesystem::path& out) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("CUDA_VISIBLE_DEVICES", uuid.c_str(), 1);
    const std::string out_dir = out.string();
    ::execl(DLTUNE_CLI, DLTUNE_CLI, "train", "synthetic", "--set", "optimizer=adam", "--set", "learning_rate=0.01",
            "--device", "cuda", "--steps", "200000", "--out", out_dir.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// NVML's listing of `pid` on the device, polled for up to `seconds` until `wanted(listed)` holds; the last listing.
std::optional<GpuProcess> PollProcess(Nvml& nvml, const std::string& uuid, pid_t pid, double seconds,
                                      bool (*wanted)(const std::optional<GpuProcess>&)) {
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  std::optional<GpuProcess> listed;
  while (true) {
    listed.reset();
    if (const auto sample = nvml.Sample(uuid)) {
      for (const GpuProcess& process : sample->processes) {
        if (process.pid == pid) listed = process;
      }
    }
    if (wanted(listed) || Clock::now() > deadline) return listed;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

TEST(RealNvml, ATrialOnAGpuIsListedWithItsMemoryUntilItEnds) {
  Nvml nvml;
  if (!nvml.available()) GTEST_SKIP() << "no NVML on this machine: " << nvml.unavailable_reason();
  const GpuInventory inventory = FindGpus(nvml);
  if (inventory.gpus.empty()) GTEST_SKIP() << "NVML lists no GPU that this process may use";
  EXPECT_FALSE(inventory.driver_version.empty());
  const GpuDevice& gpu = inventory.gpus.front();
  EXPECT_GT(gpu.total_memory_bytes, std::uint64_t{1} << 30) << gpu.Label();
  EXPECT_FALSE(gpu.name.empty());
  const auto before = nvml.Sample(gpu.uuid);
  ASSERT_TRUE(before) << "cannot sample " << gpu.Label();
  ASSERT_TRUE(before->processes_known) << "NVML does not list " << gpu.Label() << "'s processes here";

  const auto out = std::filesystem::temp_directory_path() / ("dltune_gpu_nvml_test_" + std::to_string(::getpid()));
  const pid_t trial = StartTrainingOn(gpu.uuid, out);
  ASSERT_GT(trial, 0);
  // NVML lists the process as soon as its CUDA context is being made, holding a few MiB (14 MiB on an H200), and the
  // context's memory grows from there: wait for what a whole context holds.
  const auto running = PollProcess(nvml, gpu.uuid, trial, 60, [](const std::optional<GpuProcess>& listed) {
    return listed && listed->used_bytes && *listed->used_bytes > kContextBytes;
  });
  ::kill(trial, SIGKILL);
  int status = 0;
  ::waitpid(trial, &status, 0);
  RemoveTree(out);
  ASSERT_TRUE(running) << "NVML never listed the trial's pid " << trial << " on " << gpu.Label()
                       << " (a process in a PID namespace of its own is listed under the host's pid)";
  ASSERT_TRUE(running->used_bytes) << "NVML lists the trial but not the memory it holds";
  EXPECT_GT(*running->used_bytes, kContextBytes) << "a CUDA context alone holds more";

  const auto gone = PollProcess(nvml, gpu.uuid, trial, 30,
                                [](const std::optional<GpuProcess>& listed) { return !listed.has_value(); });
  EXPECT_FALSE(gone) << "NVML still lists the trial 30 s after it was killed";
  const auto after = nvml.Sample(gpu.uuid);
  ASSERT_TRUE(after);
  EXPECT_LE(after->used_bytes, before->used_bytes + (std::uint64_t{64} << 20))
      << "the memory the trial held is not free";
}

}  // namespace
}  // namespace dltune
