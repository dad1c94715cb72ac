// Test helpers of the gpu module: a temporary directory, a scripted machine for the fake NVML
// (tests/fake_nvml/fake_nvml.cc, whose top comment describes the files), and child processes that stand in for trials.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

#include "core/files.h"

namespace dltune::test {

constexpr std::uint64_t kGiB = 1ULL << 30;

// A temporary directory, removed with everything in it when this ends.
class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("dltune_gpu_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    RemoveTree(dir_);
    std::filesystem::create_directories(dir_);
  }
  ~TempDir() { RemoveTree(dir_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

// While it lives, Nvml loads the fake library, which reads the machine from a temporary directory; no
// CUDA_VISIBLE_DEVICES is set.
class FakeGpus {
 public:
  explicit FakeGpus(const std::string& machine) {
    static int counter = 0;
    dir_ = std::filesystem::temp_directory_path() /
           ("dltune_fake_nvml_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    RemoveTree(dir_);
    std::filesystem::create_directories(dir_);
    SetMachine(machine);
    if (const char* cuda = std::getenv("CUDA_VISIBLE_DEVICES")) cuda_visible_devices_ = cuda;
    ::unsetenv("CUDA_VISIBLE_DEVICES");
    ::setenv("DLTUNE_NVML_LIBRARY", DLTUNE_FAKE_NVML, 1);
    ::setenv("DLTUNE_FAKE_NVML_DIR", dir_.c_str(), 1);
  }
  ~FakeGpus() {
    ::unsetenv("DLTUNE_NVML_LIBRARY");
    ::unsetenv("DLTUNE_FAKE_NVML_DIR");
    if (cuda_visible_devices_) ::setenv("CUDA_VISIBLE_DEVICES", cuda_visible_devices_->c_str(), 1);
    RemoveTree(dir_);
  }
  FakeGpus(const FakeGpus&) = delete;
  FakeGpus& operator=(const FakeGpus&) = delete;

  void SetMachine(const std::string& machine) const { std::ofstream(dir_ / "gpus") << machine; }
  // Process `pid` uses `bytes` of the device (while it lives; after too when `lingering`).
  void UseMemory(const std::string& uuid, pid_t pid, std::uint64_t bytes, bool lingering = false) const {
    std::filesystem::create_directories(ProcessFile(uuid, pid).parent_path());
    std::ofstream(ProcessFile(uuid, pid)) << bytes << (lingering ? " lingering" : "") << "\n";
  }
  // As a client of an MPS server: listed among the device's MPS clients, not its compute processes.
  void UseMemoryAsMpsClient(const std::string& uuid, pid_t pid, std::uint64_t bytes) const {
    std::filesystem::create_directories(ProcessFile(uuid, pid).parent_path());
    std::ofstream(ProcessFile(uuid, pid)) << bytes << " mps\n";
  }
  std::filesystem::path ProcessFile(const std::string& uuid, pid_t pid) const {
    return dir_ / "processes" / uuid / std::to_string(pid);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
  std::optional<std::string> cuda_visible_devices_;
};

// A child process that runs `first` (say, writes its own process file), then waits until it is ended. The
// constructor returns once `first` has run.
class ChildProcess {
 public:
  explicit ChildProcess(const std::function<void()>& first = {}) {
    int ready[2];
    if (::pipe(ready) != 0) std::abort();
    pid_ = ::fork();
    char byte = 0;
    if (pid_ == 0) {
      ::close(ready[0]);
      if (first) first();
      if (::write(ready[1], &byte, 1) != 1) ::_exit(1);
      while (true) ::pause();
    }
    ::close(ready[1]);
    while (::read(ready[0], &byte, 1) < 0) {
    }
    ::close(ready[0]);
  }
  ~ChildProcess() { Finish(); }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  // Ends it, and reaps it.
  void Finish() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace dltune::test
