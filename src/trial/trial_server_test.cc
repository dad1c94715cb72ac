// A warm trial forked while its worker dies ends at once instead of waiting to become the worker's child; trials
// that differ only in what CUDA reads as it starts share a server.
#include "trial/trial_server.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <gtest/gtest.h>

#include "trial/trial_environment.h"

namespace dltune {
namespace {

// The pid of a process that existed and is gone.
pid_t GonePid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Forks an intermediate process that forks a "trial" and exits, as the trial server does; the trial waits to become
// the child of `worker` and exits 0 when it did, 1 when it gave up. This process is the subreaper that gets the
// trial. Returns the trial's exit status and how long it took.
std::pair<int, double> ForkTrialFor(pid_t worker, double timeout_seconds) {
  const auto start = std::chrono::steady_clock::now();
  int pid_pipe[2];
  EXPECT_EQ(::pipe(pid_pipe), 0);
  const pid_t intermediate = ::fork();
  if (intermediate == 0) {
    const pid_t trial = ::fork();
    if (trial == 0) ::_exit(WaitToBecomeChildOf(worker, timeout_seconds) ? 0 : 1);
    (void)!::write(pid_pipe[1], &trial, sizeof trial);
    ::_exit(0);
  }
  pid_t trial = -1;
  EXPECT_EQ(::read(pid_pipe[0], &trial, sizeof trial), static_cast<ssize_t>(sizeof trial));
  ::close(pid_pipe[0]);
  ::close(pid_pipe[1]);
  ::waitpid(intermediate, nullptr, 0);
  int status = 0;
  EXPECT_EQ(::waitpid(trial, &status, 0), trial);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, seconds};
}

class WarmTrialParent : public ::testing::Test {
 protected:
  void SetUp() override { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }
  void TearDown() override { ::prctl(PR_SET_CHILD_SUBREAPER, 0); }
};

TEST_F(WarmTrialParent, ATrialBecomesItsWorkersChild) {
  const auto [status, seconds] = ForkTrialFor(::getpid(), 10);
  EXPECT_EQ(status, 0);
  EXPECT_LT(seconds, 5);
}

// The worker was SIGKILLed just as the server forked the trial: the trial is re-parented elsewhere and ends at once
// (it used to wait out its 10 s timeout).
TEST_F(WarmTrialParent, ATrialWhoseWorkerIsGoneEndsAtOnce) {
  const auto [status, seconds] = ForkTrialFor(GonePid(), 10);
  EXPECT_EQ(status, 1);
  EXPECT_LT(seconds, 2);
}

// Trials on other GPUs (or with other MPS pipes, or other ranks, thread counts and trial files) need no server of
// their own: a server never starts CUDA; its trials do, after the fork. A BLAS kernel setting does.
TEST(TrialServerLoadEnvironment, TrialsOnOtherGpusShareAServer) {
  const std::map<std::string, std::string> first = {{"OPENBLAS_CORETYPE", "Haswell"},
                                                    {"CUDA_VISIBLE_DEVICES", "GPU-0a"},
                                                    {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                                                    {"CUBLAS_WORKSPACE_CONFIG", ":4096:8"},
                                                    {"CUDA_MPS_PIPE_DIRECTORY", "/tmp/mps/pipe"},
                                                    {"NCCL_DEBUG", "WARN"},
                                                    {"DLTUNE_TRIAL", "/runs/trial_0/trial.json"},
                                                    {"OMP_NUM_THREADS", "2"},
                                                    {"MASTER_PORT", "29500"}};
  std::map<std::string, std::string> second = first;
  second["CUDA_VISIBLE_DEVICES"] = "GPU-1b";
  second["DLTUNE_TRIAL"] = "/runs/trial_1/trial.json";
  second["OMP_NUM_THREADS"] = "4";
  second["MASTER_PORT"] = "29501";
  EXPECT_EQ(LoadEnvironmentOf(first), (std::map<std::string, std::string>{{"OPENBLAS_CORETYPE", "Haswell"}}));
  EXPECT_EQ(LoadEnvironmentOf(second), LoadEnvironmentOf(first));
  second["OPENBLAS_CORETYPE"] = "SkylakeX";
  EXPECT_NE(LoadEnvironmentOf(second), LoadEnvironmentOf(first));
}

}  // namespace
}  // namespace dltune
