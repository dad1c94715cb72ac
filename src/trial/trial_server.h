// Warm trial processes: a trial server (`dltune trial-server`, one per worker) is a dltune process that has loaded
// LibTorch and decoded the study's data set once, and forks a fresh process for each built-in trial. A trial then
// starts in milliseconds instead of paying for LibTorch's start-up and the data's decoding every time, and keeps
// every guarantee of a trial process of its own (docs/trial-protocol.md, "Warm trial processes"):
//   - each trial is still one process, in a process group of its own, and the worker's child: the server forks an
//     intermediate that forks the trial and exits at once, so the trial is re-parented to the worker (a child
//     subreaper), which waits for it, signals it and kills what it leaves behind exactly as for an exec'd one;
//   - the trial has the environment, working directory, standard output and error and report channel the worker
//     gave it (the descriptors travel over the server's socket), and dies with the worker (parent-death signal);
//   - the server never starts a thread pool (OpenMP, LibTorch's intra-op or inter-op pool), so nothing a fork cannot
//     copy exists when it forks: it decodes data on one thread, and each trial sets its own thread count;
//   - a crash, a leak or a kill of one trial touches no other and not the server: they share no writable memory
//     (copy-on-write). If the server itself dies, the worker starts trials by exec as before.
// A program of the user's own that serves its trials warm (a command: program calling the Python client's
// dltune.run) has a server of its own: the program itself, started once with the socket on descriptor 3
// (TrialServer's program constructor; docs/trial-protocol.md, "Warm trial processes (Python programs)"). Other external
// programs are always started by exec.
#pragma once

#include <sys/types.h>

#include <array>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace dltune {

// What a forked trial process is to run: the command line and environment the worker gave it (the server's
// caller replaces its own argv and environment with these).
struct ServedTrial {
  std::vector<std::string> argv;
};

// Runs the server on the socket `control_fd` until the worker closes it (returns nullopt in the server) or a trial
// is forked (returns the trial's argv in the trial process, whose descriptors, directory, environment and signal
// state are then set up). `prepare` runs in the server before each fork with the trial's environment: it may load
// what the trial will need (for example decode its data set), on this thread only.
std::optional<ServedTrial> ServeTrials(int control_fd,
                                       const std::function<void(const std::map<std::string, std::string>&)>& prepare);

// In a forked trial, while the intermediate process that forked it exits: waits until the trial is the child of
// `worker` and returns true. Returns false at once when the worker is gone (the trial was re-parented elsewhere, or
// the worker no longer exists), and after `timeout_seconds` otherwise: the trial must not run without its worker.
bool WaitToBecomeChildOf(pid_t worker, double timeout_seconds);

// The environment variable that tells a program it was started as its trials' server, and the descriptor of its
// socket ("3").
inline constexpr const char* kWarmServerVariable = "DLTUNE_WARM_SERVER";

// The worker's side: starts the server on first use, asks it for trial processes, and shuts it down.
class TrialServer {
 public:
  // The built-in trials' server, `dltune trial-server`.
  TrialServer() = default;
  // A program's own server: started as the first trial Start is asked for (its command line, working directory and
  // load environment, without the trial's own variables), its output appended to `log`. It is replaced when it
  // answers that it is stale (its code changed, or CUDA started in it), and when it dies once; a trial it cannot
  // fork starts by exec.
  // `in_process`: the program runs each trial in its own process (dltune.run(..., reuse_process=True)), one at a
  // time: its caller asks it for a trial only when its last one ended.
  explicit TrialServer(std::filesystem::path log, bool in_process = false)
      : program_log_(std::move(log)), in_process_(in_process) {}
  ~TrialServer();
  TrialServer(const TrialServer&) = delete;
  TrialServer& operator=(const TrialServer&) = delete;

  // Starts a trial running `argv` with `environment` (whole, "KEY=VALUE"), in `working_dir` (empty: the worker's),
  // with standard output `out_fd`, standard error `err_fd` and the report channel `report_fd` on descriptor 3.
  // `load_environment` names the settings read when libraries load (BLAS kernels, say; not thread counts): a server
  // started with others is replaced. Returns the trial's pid (the caller's child by the time this returns), or nullopt
  // when warm starts are unavailable here (disabled by DLTUNE_WARM_TRIALS=0, this process is not a child subreaper,
  // or the server cannot be started or has died): the caller then starts the trial itself.
  std::optional<pid_t> Start(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                             const std::string& working_dir, int out_fd, int err_fd, int report_fd,
                             const std::map<std::string, std::string>& load_environment);

  // Starts the server now, where Start would fork trials (with `executable` and `load_environment` as Start's), and
  // has it prepare what a trial with `prepare_environment` needs (decode its data set) without waiting for it: the
  // first trial then starts from a server that is ready. Nothing is forked.
  void Warm(const std::string& executable, const std::map<std::string, std::string>& load_environment,
            const std::map<std::string, std::string>& prepare_environment);

  // A program's server: starts it now for trials of `argv` in `working_dir` with `load_environment` (as Start's),
  // so that its set-up runs while other trials train; nothing is forked.
  void StartAhead(const std::vector<std::string>& argv, const std::string& working_dir,
                  const std::map<std::string, std::string>& load_environment);

  // Whether it runs its trials in its own process (the constructor's `in_process`).
  bool in_process() const { return in_process_; }
  // What the running server was started with (Start's `load_environment`); empty before it starts.
  const std::map<std::string, std::string>& load_environment() const { return load_environment_; }

  // Server processes started so far (one unless a change of load environment or a death replaced it).
  int servers_started() const { return servers_started_; }
  // Trials forked so far, by every server started.
  int trials_started() const { return trials_started_; }
  // Whether warm starts ended here: a server could not start, or was stale as it started, or died twice.
  bool failed() const { return failed_; }

 private:
  // Whether trials start warm here: not disabled (DLTUNE_WARM_TRIALS=0), this process a child subreaper, and no
  // server failed before.
  bool WarmStartsHere() const;
  // Starts the server unless one runs for `argv` (a program's: its whole command line; the built-in one: its
  // executable), `working_dir` and `load_environment`.
  bool EnsureRunning(const std::vector<std::string>& argv, const std::string& working_dir,
                     const std::map<std::string, std::string>& load_environment);
  // Asks the running server for a trial; nullopt when it could not fork one, `stale` set when it said it is stale.
  std::optional<pid_t> Ask(const std::string& request, int out_fd, int err_fd, int report_fd, bool& stale, bool& died);
  void Shutdown();

  std::filesystem::path program_log_;  // a program's server: where its output goes; empty for dltune trial-server
  bool in_process_ = false;
  pid_t pid_ = -1;
  int control_fd_ = -1;
  std::vector<std::string> argv_;
  std::string working_dir_;
  std::map<std::string, std::string> load_environment_;
  int servers_started_ = 0;
  int trials_started_ = 0;
  bool failed_ = false;  // could not start, or died: exec from then on
};

}  // namespace dltune
