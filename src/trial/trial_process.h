// One trial's process: started in a process group of its own with a report pipe, its output in log files, killed
// with its worker (Linux parent-death signal), waited for without blocking.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dltune {

struct TrialCommand {
  // Run with execv when set (argv[0] is the program's path); else `shell_command` runs with /bin/sh -c.
  std::vector<std::string> argv;
  std::string shell_command;
  std::map<std::string, std::string> environment;  // added to (and overriding) the worker's environment
  std::filesystem::path working_dir;               // empty: the worker's
  std::filesystem::path stdout_path;               // appended to
  std::filesystem::path stderr_path;               // appended to
  bool warm_start = false;                         // a built-in trial (`dltune run-trial`): a TrialServer may fork it
  // A command: program that serves its trials warm (docs/trial-protocol.md, "Warm trial processes (Python
  // programs)"): the server given to TrialProcess is the program's own, and may fork it.
  bool warm_program = false;
  // Its program's server runs the trial in its own process (dltune.run(..., reuse_process=True)): the server must
  // have been started on the trial's GPUs (ReusedProcessEnvironmentOf).
  bool reuse_process = false;
};

class TrialServer;

// How a process ended.
struct ExitStatus {
  int code = 0;    // exit code, when it exited
  int signal = 0;  // the signal that killed it, else 0
  bool ok() const { return signal == 0 && code == 0; }
  // "exit status 1", "killed by signal 9 (SIGKILL)".
  std::string Describe() const;
};

class TrialProcess {
 public:
  // Starts `command`; the child writes report lines to fd 3, which DLTUNE_REPORT names (/dev/fd/3). Every process
  // it starts inherits DLTUNE_TRIAL_TOKEN, a value unique to this trial process, by which its descendants are found
  // when it ends. A `warm_start` command is forked by `server` when one is given and can (trial_server.h), else
  // exec'd like any other. Throws Error when the log files cannot be opened or the process cannot be created.
  explicit TrialProcess(const TrialCommand& command, TrialServer* server = nullptr);
  // Kills the process group and every descendant (SIGKILL) if it is still running, and reaps it.
  ~TrialProcess();
  TrialProcess(const TrialProcess&) = delete;
  TrialProcess& operator=(const TrialProcess&) = delete;

  pid_t pid() const { return pid_; }
  // The read end of the report pipe (non-blocking); -1 once closed.
  int report_fd() const { return report_fd_; }
  // Reads what is available from the report pipe into `out`, at most about 1 MiB per call (the caller parses that
  // before it reads more); returns false at end of file (then closes it).
  bool ReadReport(std::string& out);
  // Sends `signal` to the whole process group (the shell and everything it started).
  void Signal(int signal);
  // The exit status once the process has ended, without blocking; nullopt while it runs. When it has ended, every
  // process it left behind — in its process group, or carrying its token after leaving the group (a new session, a
  // daemon) — is killed.
  std::optional<ExitStatus> TryWait();
  const std::string& token() const { return token_; }

 private:
  void KillLeftovers();

  std::string token_;
  pid_t pid_ = -1;
  int report_fd_ = -1;
  std::optional<ExitStatus> status_;
};

// The command line a trial process runs: `command.argv`, or /bin/sh -c and its shell command.
std::vector<std::string> CommandLineOf(const TrialCommand& command);

// The last `max_lines` lines (at most `max_bytes` bytes) of a text file; "" when it cannot be read.
std::string TailOfFile(const std::filesystem::path& path, std::size_t max_lines = 20, std::size_t max_bytes = 4096);

// The path of the running executable (/proc/self/exe).
std::filesystem::path SelfExecutable();

// Makes this process the reaper of its orphaned descendants (Linux PR_SET_CHILD_SUBREAPER): a trial's child that
// outlives its parent then stays this worker's descendant instead of escaping to PID 1.
void BecomeSubreaper();

// SIGKILLs every process whose environment holds DLTUNE_TRIAL_TOKEN=`token`; returns how many it killed.
int KillProcessesWithToken(const std::string& token);

// Reaps this process's children that have ended and are not trial processes it started (orphaned descendants of
// trials, which come to it as their subreaper).
void ReapOrphans();

}  // namespace dltune
