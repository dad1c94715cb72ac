#include <cstdlib>
#include <filesystem>

#include <fmt/format.h>

#include "dltune/store/store.h"
#include "sql_store.h"

namespace dltune {

std::string CheckpointPoolName(CheckpointPool pool) { return pool == CheckpointPool::kBest ? "best" : "latest"; }

std::string NoteKindName(NoteKind kind) { return kind == NoteKind::kDecision ? "decision" : "note"; }

namespace {

bool StartsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// The URL with any password replaced, for messages.
std::string Redacted(const std::string& url) {
  const auto scheme_end = url.find("://");
  const auto at = url.find('@');
  if (scheme_end == std::string::npos || at == std::string::npos) return url;
  const auto colon = url.find(':', scheme_end + 3);
  if (colon == std::string::npos || colon > at) return url;
  return url.substr(0, colon) + url.substr(at);
}

// The SQLite file a URL names: sqlite:///abs/path, sqlite://relative/path, or a plain path.
std::string SqlitePath(const std::string& url) { return StartsWith(url, "sqlite://") ? url.substr(9) : url; }

std::unique_ptr<Store> OpenSqliteStore(const std::string& url, const std::string& path, bool create_if_missing) {
  if (path.empty()) throw Error(fmt::format("{}: the SQLite URL names no file (sqlite:///path/to/file.db)", url));
  const std::filesystem::path file(path);
  if (!create_if_missing && !std::filesystem::exists(file)) {
    throw Error(
        fmt::format("{}: no store there (the file does not exist); pass --storage URL or set DLTUNE_STORAGE", url));
  }
  if (std::filesystem::is_directory(file)) {
    throw Error(fmt::format("{}: is a directory, not a store file", url));
  }
  if (file.has_parent_path() && !std::filesystem::is_directory(file.parent_path())) {
    throw Error(
        fmt::format("{}: cannot create the database: directory {} does not exist", url, file.parent_path().string()));
  }
  return std::make_unique<internal::SqlStore>(internal::OpenSqlite(path), "sqlite://" + path);
}

}  // namespace

std::unique_ptr<Store> OpenStore(const std::string& url, bool create_if_missing) {
  if (StartsWith(url, "sqlite://")) return OpenSqliteStore(url, url.substr(9), create_if_missing);
  if (StartsWith(url, "postgresql://") || StartsWith(url, "postgres://")) {
    return std::make_unique<internal::SqlStore>(internal::OpenPostgres(url), Redacted(url));
  }
  const auto scheme = url.find("://");
  if (scheme != std::string::npos) {
    throw Error(
        fmt::format("{}: unknown storage scheme '{}'; use sqlite:///path/file.db or "
                    "postgresql://user@host:port/db",
                    Redacted(url), url.substr(0, scheme)));
  }
  if (url.empty()) throw Error("the storage URL is empty");
  return OpenSqliteStore(url, url, create_if_missing);  // a plain path
}

std::unique_ptr<Store> OpenStoreReadOnly(const std::string& url) {
  if (StartsWith(url, "postgresql://") || StartsWith(url, "postgres://")) {
    return std::make_unique<internal::SqlStore>(internal::OpenPostgres(url, true), Redacted(url), true);
  }
  if (url.find("://") != std::string::npos && !StartsWith(url, "sqlite://")) return OpenStore(url, false);  // its error
  const std::string path = SqlitePath(url);
  if (path.empty()) throw Error(fmt::format("{}: the SQLite URL names no file (sqlite:///path/to/file.db)", url));
  if (!std::filesystem::exists(path)) {
    throw Error(
        fmt::format("{}: no store there (the file does not exist); pass --storage URL or set DLTUNE_STORAGE", url));
  }
  if (std::filesystem::is_directory(path)) throw Error(fmt::format("{}: is a directory, not a store file", url));
  try {
    return std::make_unique<internal::SqlStore>(internal::OpenSqlite(path, true), "sqlite://" + path, true);
  } catch (const internal::StaleSchemaError&) {
    // Read an upgraded copy in memory: the file stays as it is, readable by the dltune that wrote it.
    return std::make_unique<internal::SqlStore>(internal::OpenSqliteCopyInMemory(path), "sqlite://" + path);
  }
}

bool StoreMayExist(const std::string& url) {
  if (url.find("://") != std::string::npos && !StartsWith(url, "sqlite://")) return true;
  const std::string path = SqlitePath(url);
  std::error_code error;
  return !path.empty() && std::filesystem::exists(path, error);
}

std::string DefaultStoreUrl() {
  if (const char* env = std::getenv("DLTUNE_STORAGE"); env != nullptr && *env != '\0') return env;
  return "sqlite://" + (std::filesystem::current_path() / "dltune.db").string();
}

std::string StoreUrlOrDefault(const std::string& url) { return url.empty() ? DefaultStoreUrl() : url; }

}  // namespace dltune
