#include "core/git.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/strings.h"

namespace dltune {
namespace {

std::string ReadFirstLine(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string line;
  std::getline(in, line);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

bool IsCommitHash(const std::string& text) {
  return text.size() == 40 && text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// The git directory of the checkout containing `start`: `.git` itself, or where a `.git` file points.
std::optional<std::filesystem::path> FindGitDir(std::filesystem::path start) {
  std::error_code error;
  start = std::filesystem::absolute(start, error);
  for (auto dir = start; !dir.empty(); dir = dir.parent_path()) {
    const auto dot_git = dir / ".git";
    if (std::filesystem::is_directory(dot_git, error)) return dot_git;
    if (std::filesystem::is_regular_file(dot_git, error)) {
      const std::string line = ReadFirstLine(dot_git);
      if (line.rfind("gitdir: ", 0) == 0) {
        std::filesystem::path target = line.substr(8);
        return target.is_absolute() ? target : dir / target;
      }
    }
    if (dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> GitCommitOf(const std::filesystem::path& directory) {
  const auto git_dir = FindGitDir(directory);
  if (!git_dir) return std::nullopt;
  const std::string head = ReadFirstLine(*git_dir / "HEAD");
  if (IsCommitHash(head)) return head;  // detached
  if (head.rfind("ref: ", 0) != 0) return std::nullopt;
  const std::string ref = head.substr(5);
  // A worktree keeps its HEAD but shares refs with the main repository (named in `commondir`).
  std::filesystem::path common = *git_dir;
  if (const std::string commondir = ReadFirstLine(*git_dir / "commondir"); !commondir.empty()) {
    const std::filesystem::path shared(commondir);
    common = shared.is_absolute() ? shared : *git_dir / shared;
  }
  for (const auto& base : {*git_dir, common}) {
    const std::string loose = ReadFirstLine(base / ref);
    if (IsCommitHash(loose)) return loose;
  }
  std::ifstream packed(common / "packed-refs");
  for (std::string line; std::getline(packed, line);) {
    if (line.size() > 41 && line.compare(41, std::string::npos, ref) == 0 && IsCommitHash(line.substr(0, 40))) {
      return line.substr(0, 40);
    }
  }
  return std::nullopt;
}

std::optional<bool> GitDirtyOf(const std::filesystem::path& directory) {
  if (!FindGitDir(directory)) return std::nullopt;
  // Reading the index and comparing the work tree is git's own job; its exit status tells whether it could.
  const std::string command =
      "git -C " + ShellQuote(directory.string()) + " status --porcelain --untracked-files=no 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  bool any = false;
  char buffer[256];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) any = true;
  if (pclose(pipe) != 0) return std::nullopt;
  return any;
}

}  // namespace dltune
