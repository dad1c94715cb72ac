// Runs the dltune command as a user would, for the CLI tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/files.h"

namespace dltune::test {

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `dltune ARGUMENTS` through the shell (in `working_dir` when given, with `environment`, "VAR=value ...", when
// given); returns its exit code, stdout and stderr.
inline Result RunDltune(const std::string& arguments, const std::filesystem::path& working_dir = {},
                        const std::string& environment = "") {
  const auto dir = std::filesystem::temp_directory_path() / ("dltune_cli_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string command = (working_dir.empty() ? std::string() : "cd '" + working_dir.string() + "' && ") +
                              (environment.empty() ? std::string() : "env " + environment + " ") +
                              std::string(DLTUNE_CLI) + " " + arguments + " >" + (dir / "out").string() + " 2>" +
                              (dir / "err").string();
  const int status = std::system(command.c_str());
  Result result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = Slurp(dir / "out");
  result.err = Slurp(dir / "err");
  dltune::RemoveTree(dir);
  return result;
}

// Whether any process works in `dir` or below it (a worker, its trial server and its trials work where the run
// started or in their trial directory): what a test checks to find a process that outlived its run.
inline bool SomeProcessWorksIn(const std::filesystem::path& dir) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::error_code error;
    const std::filesystem::path cwd = std::filesystem::read_symlink(entry.path() / "cwd", error);
    if (!error && cwd.string().rfind(dir.string(), 0) == 0) return true;
  }
  return false;
}

}  // namespace dltune::test
