#include "dltune/core/error.h"

#include <fmt/format.h>

namespace dltune {

std::string SourceLocation::ToString() const {
  if (line <= 0) return file;
  if (column <= 0) return fmt::format("{}:{}", file, line);
  return fmt::format("{}:{}:{}", file, line, column);
}

int ExitStatusFor(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput: return 2;
    case ErrorKind::kUnavailable: return 69;  // EX_UNAVAILABLE
    case ErrorKind::kIo: return 74;           // EX_IOERR
    case ErrorKind::kConflict: return 76;
    case ErrorKind::kCorrupt: return 65;  // EX_DATAERR
  }
  return 2;
}

namespace {
std::string Compose(const SourceLocation& where, const std::string& key, const std::string& message) {
  std::string text = where.ToString();
  if (!text.empty()) text += ": ";
  if (!key.empty()) text += key + " ";
  return text + message;
}
}  // namespace

SpecError::SpecError(SourceLocation where, std::string key, const std::string& message)
    : Error(Compose(where, key, message)), where_(std::move(where)), key_(std::move(key)) {}

}  // namespace dltune
