#include "trial/trial_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "core/files.h"
#include "dltune/core/error.h"
#include "trial/trial_environment.h"
#include "trial/trial_server.h"

extern char** environ;

namespace dltune {
namespace {

constexpr int kReportFd = 3;

int OpenLog(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("{}: cannot open for writing: {}", path.string(), std::strerror(errno)));
  return fd;
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void ExecChild(const TrialCommand& command, int report_write, int out_fd, int err_fd, pid_t parent,
                            const std::vector<char*>& argv, const std::vector<char*>& envp) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the worker died before prctl took effect
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(out_fd, 1);
  ::dup2(err_fd, 2);
  ::dup2(report_write, kReportFd);  // dup2 clears close-on-exec on the new descriptor
  if (!command.working_dir.empty() && ::chdir(command.working_dir.c_str()) != 0) {
    const char message[] = "dltune: cannot enter the trial's working directory\n";
    (void)!::write(2, message, sizeof(message) - 1);
    ::_exit(126);
  }
  ::execve(argv[0], argv.data(), envp.data());
  const char message[] = "dltune: cannot start the trial program: exec failed\n";
  (void)!::write(2, message, sizeof(message) - 1);
  ::_exit(127);
}

}  // namespace

namespace {

std::string SignalText(int signal) {
  const char* name = sigabbrev_np(signal);
  return fmt::format("signal {}{}", signal, name ? fmt::format(" (SIG{})", name) : "");
}

}  // namespace

std::string ExitStatus::Describe() const {
  if (signal != 0) return "killed by " + SignalText(signal);
  // A shell reports a program it ran that was killed by signal N as exit status 128 + N.
  if (code > 128 && code < 128 + 65) return fmt::format("exit status {} (killed by {})", code, SignalText(code - 128));
  return fmt::format("exit status {}", code);
}

namespace {

std::string NewToken() {
  static std::atomic<std::uint64_t> counter{0};
  std::random_device entropy;
  return fmt::format("{}-{}-{:08x}", ::getpid(), counter++, entropy());
}

// The pids of the trial processes this process started and has not reaped yet: its children that are not
// these are orphans of trials (this process is their subreaper), to be reaped.
std::mutex leaders_mutex;
std::set<pid_t>& Leaders() {
  static std::set<pid_t> leaders;
  return leaders;
}

// The state letter and the parent of process `pid` from /proc/<pid>/stat; state 0 when it cannot be read.
std::pair<char, pid_t> StateAndParent(const std::string& pid) {
  const std::string text = ReadFileIfReadable("/proc/" + pid + "/stat").value_or("");  // "": gone
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos || close + 2 > text.size()) return {0, -1};
  std::istringstream rest(text.substr(close + 2));
  char state = 0;
  pid_t parent = -1;
  rest >> state >> parent;
  return {state, parent};
}

}  // namespace

void ReapOrphans() {
  const pid_t self = ::getpid();
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const auto [state, parent] = StateAndParent(name);
    if (parent != self || state != 'Z') continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    {
      const std::lock_guard<std::mutex> lock(leaders_mutex);
      if (Leaders().count(pid)) continue;  // a trial's own process: its TrialProcess reaps it, with its status
    }
    int status = 0;
    ::waitpid(pid, &status, WNOHANG);
  }
}

int KillProcessesWithToken(const std::string& token) {
  const std::string needle = "DLTUNE_TRIAL_TOKEN=" + token;
  int killed = 0;
  // Again after a pass that killed something: a process may fork while a pass runs.
  for (int pass = 0; pass < 2 && (pass == 0 || killed > 0); ++pass) {
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
      const std::string name = entry.path().filename().string();
      if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
      // NUL-separated; "" when it cannot be read (gone, or another user's).
      const std::string environment = ReadFileIfReadable("/proc/" + name + "/environ").value_or("");
      const auto at = environment.find(needle);
      if (at == std::string::npos || (at > 0 && environment[at - 1] != '\0')) continue;
      const auto end = at + needle.size();
      if (end < environment.size() && environment[end] != '\0') continue;
      const auto pid = static_cast<pid_t>(std::stol(name));
      if (pid == ::getpid()) continue;
      if (::kill(pid, SIGKILL) == 0) ++killed;
    }
  }
  return killed;
}

void BecomeSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1); }

std::vector<std::string> CommandLineOf(const TrialCommand& command) {
  return command.argv.empty() ? std::vector<std::string>{"/bin/sh", "-c", command.shell_command} : command.argv;
}

TrialProcess::TrialProcess(const TrialCommand& command, TrialServer* server) : token_(NewToken()) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls are allowed.
  std::vector<std::string> args = CommandLineOf(command);
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::map<std::string, std::string> overrides = command.environment;
  overrides["DLTUNE_REPORT"] = fmt::format("/dev/fd/{}", kReportFd);
  overrides["DLTUNE_TRIAL_TOKEN"] = token_;
  std::vector<std::string> env_strings = EnvironmentWith(overrides);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);

  const int out_fd = OpenLog(command.stdout_path);
  const int err_fd = OpenLog(command.stderr_path);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    ::close(out_fd);
    ::close(err_fd);
    throw IoError(fmt::format("cannot create the report pipe: {}", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  {
    // Held until the pid is a leader's, so that ReapOrphans cannot take a warm trial that ends at once.
    std::unique_lock<std::mutex> lock(leaders_mutex);
    std::optional<pid_t> warm;
    if (server != nullptr && (command.warm_start || command.warm_program)) {
      warm = server->Start(args, env_strings, command.working_dir.string(), out_fd, err_fd, pipe_fds[1],
                           command.reuse_process ? ReusedProcessEnvironmentOf(command.environment)
                                                 : LoadEnvironmentOf(command.environment));
    }
    if (warm) {
      pid_ = *warm;
      Leaders().insert(pid_);
    } else {
      lock.unlock();
      pid_ = ::fork();
      if (pid_ == 0) ExecChild(command, pipe_fds[1], out_fd, err_fd, parent, argv, envp);
    }
  }
  const int fork_errno = errno;
  ::close(pipe_fds[1]);
  ::close(out_fd);
  ::close(err_fd);
  if (pid_ < 0) {
    ::close(pipe_fds[0]);
    throw Error(fmt::format("cannot start a trial process: {}", std::strerror(fork_errno)));
  }
  ::setpgid(pid_, pid_);  // also from the parent, so Signal works even before the child ran
  {
    const std::lock_guard<std::mutex> lock(leaders_mutex);
    Leaders().insert(pid_);
  }
  report_fd_ = pipe_fds[0];
  ::fcntl(report_fd_, F_SETFL, ::fcntl(report_fd_, F_GETFL) | O_NONBLOCK);
}

TrialProcess::~TrialProcess() {
  if (!status_ && pid_ > 0) {
    Signal(SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    KillLeftovers();
  }
  if (report_fd_ >= 0) ::close(report_fd_);
}

void TrialProcess::KillLeftovers() {
  {
    const std::lock_guard<std::mutex> lock(leaders_mutex);
    Leaders().erase(pid_);
  }
  // Most trials leave nothing behind, and then this costs one scan of /proc.
  const bool group_left = ::kill(-pid_, SIGKILL) == 0;
  const bool others_left = KillProcessesWithToken(token_) > 0;
  if (!group_left && !others_left) return;
  // What was killed and had been orphaned is this process's to reap (it is their subreaper). They die at once on
  // SIGKILL; give them a moment.
  for (int i = 0; i < 3; ++i) {
    ReapOrphans();
    std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 1 : 10));
  }
}

bool TrialProcess::ReadReport(std::string& out) {
  if (report_fd_ < 0) return false;
  char buffer[65536];
  constexpr std::size_t kMaxReadPerCall = 1 << 20;
  for (std::size_t total = 0; total < kMaxReadPerCall;) {
    const ssize_t n = ::read(report_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
      total += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    ::close(report_fd_);  // end of file (every writer closed it) or an error
    report_fd_ = -1;
    return false;
  }
  return true;  // more may be waiting: the caller parses this much first
}

void TrialProcess::Signal(int signal) {
  if (pid_ > 0 && !status_) ::kill(-pid_, signal);
}

std::optional<ExitStatus> TrialProcess::TryWait() {
  if (status_) return status_;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done != pid_) return std::nullopt;
  ExitStatus result;
  if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  } else {
    result.code = WEXITSTATUS(status);
  }
  status_ = result;
  // The group may hold processes the trial started, and others may have left it; none may outlive it.
  KillLeftovers();
  return status_;
}

std::string TailOfFile(const std::filesystem::path& path, std::size_t max_lines, std::size_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(in.tellg());
  const std::size_t start = size > max_bytes ? size - max_bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::string text(size - start, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (start > 0) {
    const auto newline = text.find('\n');
    text = newline == std::string::npos ? text : text.substr(newline + 1);
  }
  while (!text.empty() && text.back() == '\n') text.pop_back();
  std::size_t lines = 0;
  for (std::size_t i = text.size(); i-- > 0;) {
    if (text[i] == '\n' && ++lines == max_lines) return text.substr(i + 1);
  }
  return text;
}

std::filesystem::path SelfExecutable() { return std::filesystem::read_symlink("/proc/self/exe"); }

}  // namespace dltune
