#include "core/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {

void WriteFileAtomically(const std::filesystem::path& path, std::string_view content, bool sync) {
  const std::filesystem::path temporary = path.string() + fmt::format(".tmp-{}", ::getpid());
  const auto fail = [&](const char* what, int error) {
    ::unlink(temporary.c_str());
    throw IoError(fmt::format("{}: cannot {}: {}", path.string(), what, std::strerror(error)));
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw IoError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      ::close(fd);
      fail("write", error);
    }
    written += static_cast<std::size_t>(n);
  }
  // Some file systems report a full disk only when the data is flushed.
  if (sync && ::fsync(fd) != 0) {
    const int error = errno;
    ::close(fd);
    fail("write", error);
  }
  if (::close(fd) != 0) fail("write", errno);
  if (::rename(temporary.c_str(), path.c_str()) != 0) fail("replace", errno);
}

std::optional<std::string> ReadFileIfReadable(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (in) bytes << in.rdbuf();
  if (!in) return std::nullopt;
  return std::move(bytes).str();
}

std::string ReadWholeFile(const std::filesystem::path& path) {
  std::optional<std::string> bytes = ReadFileIfReadable(path);
  if (!bytes) throw IoError(fmt::format("{}: cannot read it: {}", path.string(), std::strerror(errno)));
  return std::move(*bytes);
}

namespace {

constexpr auto kRemoveFailed = static_cast<std::uintmax_t>(-1);

// Removes everything in the open directory `dir_fd` (closed here), depth first; the count of entries removed.
std::uintmax_t RemoveDirectoryContents(int dir_fd, std::error_code& error) {
  DIR* dir = ::fdopendir(dir_fd);
  if (dir == nullptr) {
    error.assign(errno, std::generic_category());
    ::close(dir_fd);
    return 0;
  }
  std::uintmax_t removed = 0;
  while (!error) {
    errno = 0;
    const dirent* entry = ::readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) error.assign(errno, std::generic_category());
      break;
    }
    const std::string_view name = entry->d_name;
    if (name == "." || name == "..") continue;
    struct stat status {};
    if (::fstatat(::dirfd(dir), entry->d_name, &status, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) error.assign(errno, std::generic_category());  // gone meanwhile: nothing to remove
      continue;
    }
    int flags = 0;
    if (S_ISDIR(status.st_mode)) {
      const int child = ::openat(::dirfd(dir), entry->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (child < 0) {
        if (errno != ENOENT) error.assign(errno, std::generic_category());
        continue;
      }
      removed += RemoveDirectoryContents(child, error);
      if (error) break;
      flags = AT_REMOVEDIR;
    }
    if (::unlinkat(::dirfd(dir), entry->d_name, flags) == 0) {
      ++removed;
    } else if (errno != ENOENT) {
      error.assign(errno, std::generic_category());
    }
  }
  ::closedir(dir);
  return removed;
}

}  // namespace

std::uintmax_t RemoveTree(const std::filesystem::path& path, std::error_code& error) noexcept {
  error.clear();
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) {
    if (errno == ENOENT) return 0;
    error.assign(errno, std::generic_category());
    return kRemoveFailed;
  }
  std::uintmax_t removed = 0;
  if (S_ISDIR(status.st_mode)) {
    const int dir_fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dir_fd < 0) {
      error.assign(errno, std::generic_category());
      return kRemoveFailed;
    }
    removed = RemoveDirectoryContents(dir_fd, error);
    if (error) return kRemoveFailed;
    if (::rmdir(path.c_str()) != 0 && errno != ENOENT) {
      error.assign(errno, std::generic_category());
      return kRemoveFailed;
    }
  } else if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    error.assign(errno, std::generic_category());
    return kRemoveFailed;
  }
  return removed + 1;
}

std::uintmax_t RemoveTree(const std::filesystem::path& path) {
  std::error_code error;
  const std::uintmax_t removed = RemoveTree(path, error);
  if (error) throw IoError(fmt::format("cannot remove {}: {}", path.string(), error.message()));
  return removed;
}

void RemoveTreeInUse(const std::filesystem::path& path, std::error_code& error,
                     std::chrono::milliseconds patience) noexcept {
  error.clear();
  const std::filesystem::path aside =
      path.parent_path() / fmt::format(".{}.removing-{}", path.filename().string(), ::getpid());
  if (::rename(path.c_str(), aside.c_str()) != 0) {
    if (errno == ENOENT) return;
    error.assign(errno, std::generic_category());
    return;
  }
  const auto give_up = std::chrono::steady_clock::now() + patience;
  while (true) {
    RemoveTree(aside, error);
    // ENOTEMPTY: a writer made a file through a directory it holds open after that directory was emptied.
    if (!error || error.value() != ENOTEMPTY || std::chrono::steady_clock::now() >= give_up) return;
    ::usleep(20'000);
  }
}

}  // namespace dltune
