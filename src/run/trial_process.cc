#include "dltune/run/trial_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include <fmt/format.h>

#include "dltune/core/error.h"

extern char** environ;

namespace dltune {
namespace {

constexpr int kReportFd = 3;

int OpenLog(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("{}: cannot open for writing: {}", path.string(), std::strerror(errno)));
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

TrialProcess::TrialProcess(const TrialCommand& command) {
  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls are allowed.
  std::vector<std::string> args = command.argv;
  if (args.empty()) args = {"/bin/sh", "-c", command.shell_command};
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);

  std::map<std::string, std::string> environment;
  for (char** entry = environ; *entry; ++entry) {
    const std::string text = *entry;
    const auto equals = text.find('=');
    if (equals != std::string::npos) environment[text.substr(0, equals)] = text.substr(equals + 1);
  }
  for (const auto& [key, value] : command.environment) environment[key] = value;
  environment["DLTUNE_REPORT"] = fmt::format("/dev/fd/{}", kReportFd);
  std::vector<std::string> env_strings;
  env_strings.reserve(environment.size());
  for (const auto& [key, value] : environment) env_strings.push_back(fmt::format("{}={}", key, value));
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
    throw Error(fmt::format("cannot create the report pipe: {}", std::strerror(errno)));
  }
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ == 0) ExecChild(command, pipe_fds[1], out_fd, err_fd, parent, argv, envp);
  const int fork_errno = errno;
  ::close(pipe_fds[1]);
  ::close(out_fd);
  ::close(err_fd);
  if (pid_ < 0) {
    ::close(pipe_fds[0]);
    throw Error(fmt::format("cannot start a trial process: {}", std::strerror(fork_errno)));
  }
  ::setpgid(pid_, pid_);  // also from the parent, so Signal works even before the child ran
  report_fd_ = pipe_fds[0];
  ::fcntl(report_fd_, F_SETFL, ::fcntl(report_fd_, F_GETFL) | O_NONBLOCK);
}

TrialProcess::~TrialProcess() {
  if (!status_ && pid_ > 0) {
    Signal(SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  if (report_fd_ >= 0) ::close(report_fd_);
}

bool TrialProcess::ReadReport(std::string& out) {
  if (report_fd_ < 0) return false;
  char buffer[65536];
  while (true) {
    const ssize_t n = ::read(report_fd_, buffer, sizeof(buffer));
    if (n > 0) {
      out.append(buffer, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
    ::close(report_fd_);  // end of file (every writer closed it) or an error
    report_fd_ = -1;
    return false;
  }
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
  // The group may hold processes the trial started; they must not outlive it.
  ::kill(-pid_, SIGKILL);
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
