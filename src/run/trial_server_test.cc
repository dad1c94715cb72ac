// A warm trial forked while its worker dies ends at once instead of waiting to become the worker's child.
#include "run/trial_server.h"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace dltune
