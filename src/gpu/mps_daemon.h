// NVIDIA's Multi-Process Service for the trials a worker packs on its GPUs (`dltune run --mps`). Without it, the
// processes sharing a GPU take turns on it, one context at a time; as clients of one MPS server their kernels run side
// by side. The worker starts a control daemon of its own (`nvidia-cuda-mps-control -d`, from the driver's utilities)
// for its GPUs, with its pipes and logs in a private directory, so that it touches no MPS the machine already runs;
// each trial it starts on a GPU gets that directory in its environment and becomes a client when it starts CUDA. A
// trial that cannot reach the daemon runs without MPS, as CUDA does. At the end the daemon is told to quit and the
// directory removed; a daemon left by a worker that was killed is quit by the next one that starts on the machine.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace dltune {

class MpsDaemon {
 public:
  // Starts a control daemon for the GPUs `uuids` (its CUDA_VISIBLE_DEVICES). The program is
  // $DLTUNE_MPS_CONTROL, else nvidia-cuda-mps-control on PATH. Throws Error saying why it could not start.
  explicit MpsDaemon(const std::vector<std::string>& uuids);
  ~MpsDaemon();  // quits the daemon (its server ends with it) and removes its directory
  MpsDaemon(const MpsDaemon&) = delete;
  MpsDaemon& operator=(const MpsDaemon&) = delete;

  // What makes a process the daemon's client: CUDA_MPS_PIPE_DIRECTORY and CUDA_MPS_LOG_DIRECTORY.
  std::map<std::string, std::string> ClientEnvironment() const;
  // "a private MPS control daemon (nvidia-cuda-mps-control; its pipes in /tmp/dltune-mps-123-ab12cd)".
  std::string Describe() const;

 private:
  std::string program_;
  std::filesystem::path directory_;
};

// The directory a worker's daemon keeps its pipes and logs in: <temporary directory>/dltune-mps-<worker pid>-<random>.
// Exposed for the tests.
std::filesystem::path MpsDirectoryOf(pid_t worker);

}  // namespace dltune
