#include "core/files.h"

#include <fcntl.h>
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

}  // namespace dltune
