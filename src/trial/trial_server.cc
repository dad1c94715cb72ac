#include "trial/trial_server.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/machine.h"
#include "trial/trial_environment.h"

namespace dltune {
namespace {

constexpr int kReportFd = 3;
constexpr int kServerControlFd = 3;           // the server's end of its socket, in the server
constexpr std::size_t kMaxRequest = 1 << 20;  // the trial's command line and environment, as JSON
constexpr std::size_t kMaxReply = 1 << 16;    // {"pid": N} or {"error": ...}
constexpr int kReplyTimeoutMs = 300 * 1000;   // preparing may decode a large data set
constexpr double kReparentTimeoutSeconds = 10;

// Sends `text` and the descriptors `fds` as one message.
bool SendMessage(int socket, const std::string& text, const std::vector<int>& fds) {
  iovec data{const_cast<char*>(text.data()), text.size()};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
  if (!fds.empty()) {
    message.msg_control = control.data();
    message.msg_controllen = control.size();
    cmsghdr* header = CMSG_FIRSTHDR(&message);
    header->cmsg_level = SOL_SOCKET;
    header->cmsg_type = SCM_RIGHTS;
    header->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(header), fds.data(), sizeof(int) * fds.size());
  }
  ssize_t sent = 0;
  do {
    sent = ::sendmsg(socket, &message, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(text.size());
}

// Receives one message of at most `max_bytes` and the descriptors it carries (close-on-exec); false at end of file,
// on an error, or when the message was longer.
bool ReceiveMessage(int socket, std::size_t max_bytes, std::string& text, std::vector<int>& fds) {
  text.assign(max_bytes, '\0');
  iovec data{text.data(), text.size()};
  std::array<char, CMSG_SPACE(sizeof(int) * 8)> control{};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control.data();
  message.msg_controllen = control.size();
  ssize_t received = 0;
  do {
    received = ::recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
  } while (received < 0 && errno == EINTR);
  if (received <= 0) return false;
  text.resize(static_cast<std::size_t>(received));
  fds.clear();
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header; header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      fds.push_back(fd);
    }
  }
  return (message.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) == 0;
}

void CloseAll(const std::vector<int>& fds) {
  for (const int fd : fds) ::close(fd);
}

// A trial the worker asked for, read before forking (nothing in the forked trial can throw).
struct Request {
  std::vector<std::string> argv;
  std::vector<std::string> environment;
  std::string working_dir;
  pid_t worker = -1;
};

Request ParseRequest(const std::string& text) {
  const nlohmann::json json = nlohmann::json::parse(text);
  return {json.at("argv").get<std::vector<std::string>>(), json.at("env").get<std::vector<std::string>>(),
          json.at("cwd").get<std::string>(), json.at("parent").get<pid_t>()};
}

// A request to prepare ahead ({"prepare": {"VAR": "value", ...}}, TrialServer::Warm): its environment; nullopt for
// any other message.
std::optional<std::map<std::string, std::string>> PrepareRequest(const std::string& text) {
  const nlohmann::json json = nlohmann::json::parse(text, nullptr, false);
  if (!json.is_object() || !json.contains("prepare") || !json["prepare"].is_object()) return std::nullopt;
  std::map<std::string, std::string> environment;
  for (const auto& [name, value] : json["prepare"].items()) {
    if (value.is_string()) environment[name] = value.get<std::string>();
  }
  return environment;
}

// In the forked trial: waits to be the worker's child, then takes on the trial's descriptors, directory,
// environment and signal state. Exits (127) when it cannot become the trial it was asked to be.
ServedTrial BecomeTrial(const Request& request, const std::vector<int>& fds, int control_fd, pid_t server) {
  if (!WaitToBecomeChildOf(request.worker, kReparentTimeoutSeconds)) ::_exit(127);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != request.worker) ::_exit(127);  // not the worker's child (or the worker died meanwhile)
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGCHLD}) ::signal(signal, SIG_DFL);
  const int null_fd = ::open("/dev/null", O_RDONLY);
  if (null_fd >= 0) ::dup2(null_fd, 0);
  ::dup2(fds[0], 1);
  ::dup2(fds[1], 2);
  if (control_fd != kReportFd) ::close(control_fd);
  ::dup2(fds[2], kReportFd);  // also closes the server's socket when it sits on that number
  for (const int fd : fds) {
    if (fd > kReportFd) ::close(fd);
  }
  if (null_fd > kReportFd) ::close(null_fd);
  if (!request.working_dir.empty() && ::chdir(request.working_dir.c_str()) != 0) {
    const char message[] = "dltune: cannot enter the trial's working directory\n";
    (void)!::write(2, message, sizeof(message) - 1);
    ::_exit(126);
  }
  ::clearenv();
  for (const std::string& entry : request.environment) ::putenv(::strdup(entry.c_str()));  // kept: never freed
  ::setenv("DLTUNE_WARM_START", std::to_string(server).c_str(), 1);
  return ServedTrial{request.argv};
}

std::map<std::string, std::string> EnvironmentMap(const std::vector<std::string>& entries) {
  std::map<std::string, std::string> environment;
  for (const std::string& text : entries) {
    const auto equals = text.find('=');
    if (equals != std::string::npos) environment[text.substr(0, equals)] = text.substr(equals + 1);
  }
  return environment;
}

}  // namespace

bool WaitToBecomeChildOf(pid_t worker, double timeout_seconds) {
  // The intermediate process exits at once; until then it is this process's parent. Re-parented anywhere but to the
  // worker, or with the worker gone, the worker died meanwhile.
  const pid_t intermediate = ::getppid();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_seconds);
  for (pid_t parent = intermediate; parent != worker; parent = ::getppid()) {
    const bool worker_gone = ::kill(worker, 0) != 0 && errno == ESRCH;
    if (parent != intermediate || worker_gone || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

std::optional<ServedTrial> ServeTrials(int control_fd,
                                       const std::function<void(const std::map<std::string, std::string>&)>& prepare) {
  ::signal(SIGCHLD, SIG_DFL);
  const pid_t server = ::getpid();
  std::string text;
  std::vector<int> fds;
  while (ReceiveMessage(control_fd, kMaxRequest, text, fds)) {
    if (const auto ahead = PrepareRequest(text)) {
      // TrialServer::Warm: prepared now, before any trial asks; nothing is forked, and no reply is awaited.
      CloseAll(fds);
      try {
        prepare(*ahead);
      } catch (...) {
        // The first trial meets the same problem itself.
      }
      continue;
    }
    nlohmann::json reply;
    try {
      const Request request = ParseRequest(text);
      if (fds.size() != 3) throw std::runtime_error("a request carries three descriptors");
      try {
        prepare(EnvironmentMap(request.environment));
      } catch (...) {
        // The trial meets the same problem itself, and reports it where its errors go.
      }
      int pid_pipe[2];
      if (::pipe2(pid_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::strerror(errno));
      const pid_t intermediate = ::fork();
      if (intermediate == 0) {
        const pid_t trial = ::fork();
        if (trial == 0) {
          ::close(pid_pipe[0]);
          ::close(pid_pipe[1]);
          return BecomeTrial(request, fds, control_fd, server);
        }
        if (trial > 0) ::setpgid(trial, trial);  // as the trial does itself: whichever runs first
        (void)!::write(pid_pipe[1], &trial, sizeof(trial));
        ::_exit(0);  // the trial is re-parented to the worker, its subreaper
      }
      ::close(pid_pipe[1]);
      pid_t trial = -1;
      if (intermediate < 0 || ::read(pid_pipe[0], &trial, sizeof(trial)) != sizeof(trial)) trial = -1;
      ::close(pid_pipe[0]);
      if (intermediate > 0) {
        while (::waitpid(intermediate, nullptr, 0) < 0 && errno == EINTR) {
        }
      }
      if (trial <= 0) throw std::runtime_error("cannot fork a trial process");
      reply = {{"pid", trial}};
    } catch (const std::exception& e) {
      reply = {{"error", e.what()}};
    }
    CloseAll(fds);
    if (!SendMessage(control_fd, reply.dump(), {})) break;
  }
  return std::nullopt;
}

TrialServer::~TrialServer() { Shutdown(); }

void TrialServer::Shutdown() {
  if (control_fd_ >= 0) ::close(control_fd_);  // the server sees end of file and exits
  control_fd_ = -1;
  if (pid_ > 0) {
    // It exits at once; a server stuck in preparing is killed rather than waited for. (-1: already reaped.)
    bool ended = false;
    for (int i = 0; i < 50 && !ended; ++i) {
      ended = ::waitpid(pid_, nullptr, WNOHANG) != 0;
      if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(i == 0 ? 1 : 10));
    }
    if (!ended) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_ = -1;
}

bool TrialServer::EnsureRunning(const std::vector<std::string>& argv, const std::string& working_dir,
                                const std::map<std::string, std::string>& load_environment) {
  // The built-in server is one executable's; a program's is its working directory's (it is started with the command
  // line of the trial it is first asked for, and serves the others of its study, whose params differ).
  const bool program = !program_log_.empty();
  const std::vector<std::string> key = program ? std::vector<std::string>{} : std::vector<std::string>{argv.front()};
  const std::string directory = program ? working_dir : std::string();
  if (control_fd_ >= 0 && key == argv_ && directory == working_dir_ && load_environment == load_environment_) {
    return true;
  }
  Shutdown();
  int sockets[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) return false;
  // Everything the child needs is prepared before fork.
  // One thread while it serves, whatever its trials use: no OpenMP pool may exist when it forks.
  std::map<std::string, std::string> server_environment = load_environment;
  for (const char* name : kThreadCountVariables) server_environment.insert_or_assign(name, std::string(1, '1'));
  // Its trials' OpenMP reads its wait policy when the server loads, not when a trial is forked.
  if (const auto wait = PassiveWaitEnvironment()) server_environment.insert(*wait);
  if (program) {
    server_environment[kWarmServerVariable] = std::to_string(kServerControlFd);
    // torch.cuda.is_available() in a set-up then asks NVML, and does not start CUDA, which the server must not.
    server_environment.insert({"PYTORCH_NVML_BASED_CUDA_CHECK", "1"});
  }
  std::vector<std::string> env_strings = EnvironmentWith(server_environment);
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = program ? argv : std::vector<std::string>{argv.front(), "trial-server"};
  std::vector<char*> server_argv;
  server_argv.reserve(args.size() + 1);
  for (auto& arg : args) server_argv.push_back(arg.data());
  server_argv.push_back(nullptr);
  const int log_fd =
      program ? ::open(program_log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;  // NOLINT
  if (program && log_fd < 0) {
    ::close(sockets[0]);
    ::close(sockets[1]);
    return false;
  }
  const pid_t parent = ::getpid();

  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);  // out of the terminal's process group: Ctrl-C is the worker's to handle
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    // An ignored signal stays ignored across exec: a program's server, and so its trials, start as a cold trial does.
    for (const int signal : {SIGINT, SIGTERM, SIGHUP, SIGPIPE}) ::signal(signal, SIG_DFL);
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0) {
      ::dup2(null_fd, 0);
      ::dup2(program ? log_fd : null_fd, 1);
    }
    if (program) ::dup2(log_fd, 2);
    ::dup2(sockets[1], kServerControlFd);
    if (!directory.empty() && ::chdir(directory.c_str()) != 0) ::_exit(126);
    ::execve(server_argv[0], server_argv.data(), envp.data());
    ::_exit(127);
  }
  if (log_fd >= 0) ::close(log_fd);
  ::close(sockets[1]);
  if (pid < 0) {
    ::close(sockets[0]);
    return false;
  }
  pid_ = pid;
  ++servers_started_;
  control_fd_ = sockets[0];
  argv_ = key;
  working_dir_ = directory;
  load_environment_ = load_environment;
  return true;
}

bool TrialServer::WarmStartsHere() const {
  if (failed_) return false;
  if (const char* warm = std::getenv("DLTUNE_WARM_TRIALS"); warm && std::string(warm) == "0") return false;
  int subreaper = 0;
  return ::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) == 0 && subreaper != 0;
}

void TrialServer::Warm(const std::string& executable, const std::map<std::string, std::string>& load_environment,
                       const std::map<std::string, std::string>& prepare_environment) {
  if (!WarmStartsHere()) return;
  if (!EnsureRunning({executable}, "", load_environment)) {
    failed_ = true;
    return;
  }
  // Not answered: the first Start's request waits behind it, and a server that died is found out there.
  SendMessage(control_fd_, nlohmann::json{{"prepare", prepare_environment}}.dump(), {});
}

void TrialServer::StartAhead(const std::vector<std::string>& argv, const std::string& working_dir,
                             const std::map<std::string, std::string>& load_environment) {
  if (!argv.empty() && WarmStartsHere() && !EnsureRunning(argv, working_dir, load_environment)) failed_ = true;
}

std::optional<pid_t> TrialServer::Ask(const std::string& request, int out_fd, int err_fd, int report_fd, bool& stale,
                                      bool& died) {
  std::string text;
  std::vector<int> fds;
  pollfd ready{control_fd_, POLLIN, 0};
  if (!SendMessage(control_fd_, request, {out_fd, err_fd, report_fd}) || ::poll(&ready, 1, kReplyTimeoutMs) != 1 ||
      !ReceiveMessage(control_fd_, kMaxReply, text, fds)) {
    CloseAll(fds);
    Shutdown();
    died = true;  // it died or hangs
    return std::nullopt;
  }
  CloseAll(fds);
  const nlohmann::json reply = nlohmann::json::parse(text, nullptr, false);
  if (reply.is_object() && reply.contains("pid") && reply["pid"].is_number_integer()) return reply["pid"].get<pid_t>();
  stale = reply.is_object() && reply.value("stale", false);
  if (stale) Shutdown();  // it exits: a fresh one is started for the next trial
  return std::nullopt;    // this one failed; the next may not
}

std::optional<pid_t> TrialServer::Start(const std::vector<std::string>& argv,
                                        const std::vector<std::string>& environment, const std::string& working_dir,
                                        int out_fd, int err_fd, int report_fd,
                                        const std::map<std::string, std::string>& load_environment) {
  if (argv.empty() || !WarmStartsHere()) return std::nullopt;
  nlohmann::json message = {{"argv", argv}, {"env", environment}, {"cwd", working_dir}, {"parent", ::getpid()}};
  if (in_process_) message["reuse"] = true;  // the pid answered is the trial's stand-in (docs/trial-protocol.md)
  const std::string request = message.dump();
  // A program's server that is stale or died is replaced once for the trial at hand; dltune trial-server is not.
  const int attempts = program_log_.empty() ? 1 : 2;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    const int started_before = servers_started_;
    if (!EnsureRunning(argv, working_dir, load_environment)) {
      failed_ = true;
      return std::nullopt;
    }
    const bool fresh = servers_started_ != started_before;
    bool stale = false, died = false;
    if (const auto pid = Ask(request, out_fd, err_fd, report_fd, stale, died)) {
      ++trials_started_;
      return pid;
    }
    if (!stale && !died) return std::nullopt;
    // Stale as soon as it started (CUDA started by its set-up, say), or dead twice: it would be every time. Exec from
    // now on.
    if ((stale && fresh) || (died && attempt + 1 == attempts)) {
      failed_ = true;
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace dltune
