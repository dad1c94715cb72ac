#include "gpu/mps_daemon.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <system_error>

#include <fmt/format.h>

#include "core/files.h"
#include "core/strings.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;

constexpr const char* kControlProgram = "nvidia-cuda-mps-control";
constexpr const char* kPrefix = "dltune-mps-";

// $DLTUNE_MPS_CONTROL, else the control program found on PATH, else empty.
std::string FindControlProgram() {
  if (const char* given = std::getenv("DLTUNE_MPS_CONTROL"); given != nullptr && *given != '\0') return given;
  const char* path = std::getenv("PATH");
  std::istringstream entries(path != nullptr ? path : "");
  for (std::string entry; std::getline(entries, entry, ':');) {
    const fs::path candidate = fs::path(entry.empty() ? "." : entry) / kControlProgram;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

std::string DaemonVariables(const fs::path& directory) {
  return fmt::format("CUDA_MPS_PIPE_DIRECTORY={} CUDA_MPS_LOG_DIRECTORY={}", ShellQuote((directory / "pipe").string()),
                     ShellQuote((directory / "log").string()));
}

// Tells the daemon of `directory` to quit, waiting at most 10 s, and removes the directory.
void Quit(const std::string& program, const fs::path& directory) {
  const std::string command =
      fmt::format("echo quit | {} timeout 10 {} >/dev/null 2>&1", DaemonVariables(directory), ShellQuote(program));
  [[maybe_unused]] const int status = std::system(command.c_str());
  std::error_code ignored;
  RemoveTree(directory, ignored);
}

// Quits the daemons of workers that no longer exist (killed before they could), by their directories' names.
void QuitAbandoned(const std::string& program, const fs::path& temporary) {
  std::error_code error;
  for (const fs::directory_entry& entry : fs::directory_iterator(temporary, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kPrefix)) continue;
    const std::string rest = name.substr(std::string(kPrefix).size());
    const pid_t worker = static_cast<pid_t>(std::atol(rest.substr(0, rest.find('-')).c_str()));
    if (worker <= 0 || ::kill(worker, 0) == 0 || errno != ESRCH) continue;
    if (::access((entry.path() / "pipe").c_str(), W_OK) == 0) Quit(program, entry.path());
  }
}

}  // namespace

fs::path MpsDirectoryOf(pid_t worker) { return fs::temp_directory_path() / fmt::format("{}{}-", kPrefix, worker); }

MpsDaemon::MpsDaemon(const std::vector<std::string>& uuids) : program_(FindControlProgram()) {
  if (program_.empty()) {
    throw Error(fmt::format("{} is not on PATH (it comes with the NVIDIA driver's utilities)", kControlProgram));
  }
  if (uuids.empty()) throw Error("MPS: no GPU to start it for");
  std::error_code error;
  const fs::path temporary = fs::temp_directory_path(error);
  if (error) throw IoError(fmt::format("MPS: no temporary directory: {}", error.message()));
  QuitAbandoned(program_, temporary);
  std::string name = MpsDirectoryOf(::getpid()).string() + "XXXXXX";
  if (::mkdtemp(name.data()) == nullptr) {
    throw IoError(fmt::format("MPS: cannot create a directory like {}: {}", name, std::strerror(errno)));
  }
  directory_ = name;
  fs::create_directories(directory_ / "pipe", error);
  if (!error) fs::create_directories(directory_ / "log", error);
  if (error) {
    RemoveTree(directory_, error);
    throw IoError(fmt::format("MPS: cannot create {}: {}", (directory_ / "pipe").string(), error.message()));
  }
  std::string visible;
  for (const std::string& uuid : uuids) visible += (visible.empty() ? "" : ",") + uuid;
  // -d returns once the daemon has forked; its own output goes to a file, never to a pipe it would keep open.
  const fs::path output = directory_ / "start.log";
  const std::string command =
      fmt::format("{} CUDA_VISIBLE_DEVICES={} {} -d >{} 2>&1 </dev/null", DaemonVariables(directory_),
                  ShellQuote(visible), ShellQuote(program_), ShellQuote(output.string()));
  const int status = std::system(command.c_str());
  if (status != 0) {
    std::string said = ReadFileIfReadable(output).value_or("");
    while (!said.empty() && std::isspace(static_cast<unsigned char>(said.back()))) said.pop_back();
    RemoveTree(directory_, error);
    throw Error(fmt::format("{} -d failed (exit status {}){}", program_, WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                            said.empty() ? "" : ": " + said));
  }
}

MpsDaemon::~MpsDaemon() { Quit(program_, directory_); }

std::map<std::string, std::string> MpsDaemon::ClientEnvironment() const {
  return {{"CUDA_MPS_PIPE_DIRECTORY", (directory_ / "pipe").string()},
          {"CUDA_MPS_LOG_DIRECTORY", (directory_ / "log").string()}};
}

std::string MpsDaemon::Describe() const {
  return fmt::format("a private MPS control daemon ({}; its pipes in {})", program_, (directory_ / "pipe").string());
}

}  // namespace dltune
