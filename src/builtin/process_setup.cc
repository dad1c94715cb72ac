#include "builtin/process_setup.h"

#include <link.h>
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "builtin/builtin_trial.h"
#include "core/machine.h"
#include "train/blas_kernels.h"
#include "trial/trial_server.h"

namespace dltune {
namespace {

// `dltune trial-server` with its socket on descriptor 3, as a worker starts it: serves until the worker leaves (then
// exits), and returns true in each trial process it forks, with `argc`/`argv` now the trial's. False otherwise.
bool ServeTrialsIfAsked(int& argc, char**& argv) {
  struct stat control {};
  if (argc != 2 || std::string(argv[1]) != "trial-server" || ::fstat(3, &control) != 0 || !S_ISSOCK(control.st_mode)) {
    return false;
  }
  ReexecWithFasterBlasKernels(argv);
  const auto trial = ServeTrials(3, PrepareBuiltinTrial);
  if (!trial) std::exit(0);
  static std::vector<std::string> words = trial->argv;
  static std::vector<char*> pointers;
  pointers.reserve(words.size() + 1);
  for (std::string& word : words) pointers.push_back(word.data());
  pointers.push_back(nullptr);
  argc = static_cast<int>(words.size());
  argv = pointers.data();
  return true;
}

// OpenMP threads that spin while they wait for work take the cores of every other process on a shared machine: two
// `dltune train --threads 2` at once ran 45x slower than one alone, a study of 16 workers 25x (docs/parallel-layout.md,
// "A shared machine"). dltune's processes and every trial it starts wait passively (OMP_WAIT_POLICY=PASSIVE: a
// waiting thread sleeps) unless the environment chose a policy. Returns true when it set it: an OpenMP loaded before
// main read the policy then (libc resets an environment changed earlier), so a training command restarts once.
bool WaitPassivelyUnlessChosen() {
  const auto wait = PassiveWaitEnvironment();
  if (!wait) return false;
  ::setenv(wait->first.c_str(), wait->second.c_str(), 1);
  return true;
}

// Whether an OpenMP runtime is loaded in this process yet: it read its settings (the wait policy) when it loaded. The
// dltune command loads LibTorch's with the trainer module, the first time it trains, and then reads a policy set here.
bool OpenMpLoaded() {
  bool loaded = false;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* found) {
        const std::string_view path = info->dlpi_name != nullptr ? info->dlpi_name : "";
        const std::string_view file = path.substr(path.rfind('/') + 1);
        for (const std::string_view runtime : {"libgomp", "libiomp", "libomp"}) {
          if (file.starts_with(runtime)) *static_cast<bool*>(found) = true;
        }
        return 0;
      },
      &loaded);
  return loaded;
}

// Whether the command line asks for one thread (`--threads 1`), whose OpenMP never waits for a team.
bool OneThreadAsked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--threads=1" || (word == "--threads" && i + 1 < argc && std::string(argv[i + 1]) == "1")) return true;
  }
  return false;
}

// Commands that train keep the memory they free: a training step frees and allocates the same large tensors again,
// and glibc's default hands such blocks back to the kernel to fault them in again on the next step (40% of a small
// MLP's step when it logs every step; docs/training.md, "Memory").
void KeepFreedMemoryIfTraining(int argc, char** argv) {
  static const std::set<std::string> kTraining = {"train",        "run-trial", "run-fused", "probe-speed",
                                                  "trial-server", "launch",    "evaluate"};
  if (argc < 2 || !kTraining.count(argv[1])) return;
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest threshold glibc takes; fixing it stops its adjusting
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// Commands that train or evaluate in this process. `launch` and `evaluate` evaluate with the same kernels as
// training did, so their numbers are training's.
bool TrainsHere(int argc, char** argv) {
  static const std::set<std::string> kTrainingHere = {"train",       "run-trial", "run-fused",
                                                      "probe-speed", "launch",    "evaluate"};
  return argc > 1 && kTrainingHere.count(argv[1]) != 0;
}

}  // namespace

void SetUpProcess(int& argc, char**& argv) {
  // A file past `ulimit -f` is a write error (EFBIG) to report, with the file left as it was, not a kill.
  ::signal(SIGXFSZ, SIG_IGN);
  const bool openmp_loaded = OpenMpLoaded();
  const bool wait_policy_set = WaitPassivelyUnlessChosen();  // before any child process starts: they inherit it
  KeepFreedMemoryIfTraining(argc, argv);  // before the trial server forks: its trials inherit the settings
  ServeTrialsIfAsked(argc, argv);
  if (!TrainsHere(argc, argv)) return;
  // Restart once with faster OpenBLAS kernels when OpenBLAS misdetected the CPU (docs/training.md); a restart
  // carries the wait policy too.
  ReexecWithFasterBlasKernels(argv);
  // Restart once for OpenMP to read the policy (about 0.3 s: LibTorch loads again) where it had loaded before the
  // policy was set, unless one thread never waits.
  if (wait_policy_set && openmp_loaded && !OneThreadAsked(argc, argv)) ::execv("/proc/self/exe", argv);
}

}  // namespace dltune
