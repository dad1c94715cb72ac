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
    case ErrorKind::kInvalidInput: return kExitInvalidInput;
    case ErrorKind::kUnavailable: return kExitUnavailable;
    case ErrorKind::kIo: return kExitIo;
    case ErrorKind::kConflict: return kExitConflict;
    case ErrorKind::kCorrupt: return kExitCorrupt;
  }
  return kExitInvalidInput;
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
