// SqlConnection over SQLite: WAL journaling so readers never block the writer, a long busy timeout, and write
// transactions that take the write lock up front (BEGIN IMMEDIATE) so two processes never deadlock upgrading a read
// lock — the source of the "database is locked" failures of SQLite-backed tuners.
#include <fcntl.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <thread>

#include <fmt/format.h>

#include "sql_connection.h"

namespace dltune::internal {
namespace {

constexpr int kBusyTimeoutMs = 60000;

class SqliteConnection final : public SqlConnection {
 public:
  SqliteConnection(const std::string& path, bool read_only)
      : name_("sqlite://" + path), path_(path), read_only_(read_only) {
    if (!read_only) {
      Open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
      // WAL needs the write lock once, when the file is new; retry past a concurrent creator.
      WithBusyRetry([&] { ExecuteScript("PRAGMA journal_mode=WAL"); });
      ExecuteScript("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
      return;
    }
    Open(path, SQLITE_OPEN_READONLY);
    try {
      Query("SELECT COUNT(*) FROM sqlite_master", {});
    } catch (const SqlError&) {
      // A WAL database on a read-only mount cannot make its shared-memory file: read it as an immutable file
      // (nothing else can be writing to a read-only mount).
      sqlite3_close(db_);
      db_ = nullptr;
      Open("file:" + UriPath(path) + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI);
      Query("SELECT COUNT(*) FROM sqlite_master", {});
    }
  }

  // An in-memory copy of the database at `path` (read through the backup API, which never writes the source).
  static std::unique_ptr<SqliteConnection> InMemoryCopyOf(const std::string& path) {
    SqliteConnection source(path, true);
    auto copy = std::unique_ptr<SqliteConnection>(new SqliteConnection());
    copy->name_ = source.name_;
    copy->Open(":memory:", SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    sqlite3_backup* backup = sqlite3_backup_init(copy->db_, "main", source.db_, "main");
    if (backup == nullptr)
      throw SqlError(fmt::format("{}: cannot copy the database: {}", copy->name_, sqlite3_errmsg(copy->db_)));
    const int code = sqlite3_backup_step(backup, -1);
    sqlite3_backup_finish(backup);
    if (code != SQLITE_DONE) copy->Throw(code, "cannot copy the database into memory");
    copy->ExecuteScript("PRAGMA foreign_keys=ON;");
    return copy;
  }

  ~SqliteConnection() override {
    for (auto& [sql, statement] : statements_) sqlite3_finalize(statement);
    sqlite3_close(db_);
  }
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  SqlDialect dialect() const override { return SqlDialect::kSqlite; }
  const std::string& name() const override { return name_; }

  void Execute(const std::string& sql, const std::vector<SqlValue>& params) override {
    sqlite3_stmt* statement = Prepare(sql);
    Bind(statement, params);
    Step(statement, sql, nullptr);
  }

  void ExecuteMany(const std::string& sql, const std::vector<SqlRow>& rows) override {
    sqlite3_stmt* statement = Prepare(sql);
    for (const auto& row : rows) {
      Bind(statement, row);
      Step(statement, sql, nullptr);
    }
  }

  std::vector<SqlRow> Query(const std::string& sql, const std::vector<SqlValue>& params) override {
    sqlite3_stmt* statement = Prepare(sql);
    Bind(statement, params);
    std::vector<SqlRow> rows;
    Step(statement, sql, &rows);
    return rows;
  }

  void ExecuteScript(const std::string& sql) override {
    char* error = nullptr;
    const int code = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
    if (code != SQLITE_OK) {
      const std::string message = error ? error : sqlite3_errstr(code);
      sqlite3_free(error);
      Throw(code, message);
    }
  }

  void BeginWrite() override {
    // The busy handler waits up to kBusyTimeoutMs; a writer that is slower still gets more rounds, never an error.
    WithBusyRetry([&] { ExecuteScript("BEGIN IMMEDIATE"); });
  }
  void BeginRead() override { ExecuteScript("BEGIN DEFERRED"); }
  void Commit() override {
    WithBusyRetry([&] { ExecuteScript("COMMIT"); });
  }
  void Rollback() override {
    if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }

  std::unique_ptr<SqlConnection> OpenAnother() const override {
    if (path_.empty()) return nullptr;
    return std::make_unique<SqliteConnection>(path_, read_only_);
  }

  std::unique_ptr<StoreLock> TryLock(std::int64_t key) override {
    if (path_.empty()) throw SqlError(name_ + ": a copy in memory takes no locks");
    // Not the database file itself: SQLite's own POSIX locks on it would be dropped by closing another descriptor.
    const std::string lock_path = path_ + ".locks";
    const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) throw SqlError(fmt::format("{}: cannot open {}: {}", name_, lock_path, std::strerror(errno)));
    struct flock byte {};
    byte.l_type = F_WRLCK;
    byte.l_whence = SEEK_SET;
    byte.l_start = static_cast<off_t>(key);
    byte.l_len = 1;
    // An open file description's lock: held by this descriptor alone, released when it closes or the process dies.
    if (::fcntl(fd, F_OFD_SETLK, &byte) != 0) {
      const int error = errno;
      ::close(fd);
      if (error == EAGAIN || error == EACCES) return nullptr;
      throw SqlError(fmt::format("{}: cannot lock {}: {}", name_, lock_path, std::strerror(error)));
    }
    struct FileLock final : StoreLock {
      explicit FileLock(int descriptor) : fd(descriptor) {}
      ~FileLock() override { ::close(fd); }
      int fd;
    };
    return std::make_unique<FileLock>(fd);
  }

 private:
  SqliteConnection() = default;

  void Open(const std::string& target, int flags) {
    if (sqlite3_open_v2(target.c_str(), &db_, flags | SQLITE_OPEN_NOMUTEX, nullptr) != SQLITE_OK) {
      const std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      db_ = nullptr;
      throw SqlError(fmt::format("{}: cannot open the database: {}", name_, message));
    }
    sqlite3_busy_timeout(db_, kBusyTimeoutMs);
    sqlite3_extended_result_codes(db_, 1);
  }

  // `path` with the characters a URI gives meaning to escaped.
  static std::string UriPath(const std::string& path) {
    std::string escaped;
    for (const char c : path) {
      if (c == '%' || c == '?' || c == '#') {
        escaped += fmt::format("%{:02X}", static_cast<unsigned char>(c));
      } else {
        escaped += c;
      }
    }
    return escaped;
  }

  template <typename F>
  void WithBusyRetry(F&& action) {
    for (int attempt = 0;; ++attempt) {
      try {
        action();
        return;
      } catch (const SqlConflictError&) {
        if (attempt >= 10) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  [[noreturn]] void Throw(int code, const std::string& message) const {
    const int primary = code & 0xff;
    const std::string text = fmt::format("{}: {}", name_, message);
    if (code == SQLITE_CONSTRAINT_UNIQUE || code == SQLITE_CONSTRAINT_PRIMARYKEY) throw SqlUniqueViolation(text);
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) throw SqlConflictError(text);
    // Damaged or not a database at all: waiting cannot help, a person must look at the file.
    if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB) {
      throw SqlError(fmt::format("{}: the database file is damaged or is not a SQLite database ({})", name_, message),
                     ErrorKind::kCorrupt);
    }
    // A file past the size limit of `ulimit -f` (EFBIG) stays past it: an I/O error, not an outage to wait out.
    // SQLite does not always keep the errno of the write that failed, so a disk error under such a limit is one.
    if (primary == SQLITE_IOERR || primary == SQLITE_FULL) {
      rlimit size_limit{};
      const bool limited = ::getrlimit(RLIMIT_FSIZE, &size_limit) == 0 && size_limit.rlim_cur != RLIM_INFINITY;
      if ((db_ != nullptr && sqlite3_system_errno(db_) == EFBIG) || limited) {
        throw SqlError(limited ? fmt::format("{} ({}: this process may write files of at most {} bytes, ulimit -f)",
                                             text, std::strerror(EFBIG), static_cast<long long>(size_limit.rlim_cur))
                               : fmt::format("{} ({})", text, std::strerror(EFBIG)));
      }
    }
    if (primary == SQLITE_FULL || primary == SQLITE_IOERR || primary == SQLITE_CANTOPEN) {
      throw SqlUnavailableError(text);  // the disk, not the statement
    }
    throw SqlError(text);
  }

  sqlite3_stmt* Prepare(const std::string& sql) {
    auto it = statements_.find(sql);
    if (it != statements_.end()) {
      sqlite3_reset(it->second);
      sqlite3_clear_bindings(it->second);
      return it->second;
    }
    sqlite3_stmt* statement = nullptr;
    const int code = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT,
                                        &statement, nullptr);
    if (code != SQLITE_OK) Throw(code, fmt::format("cannot prepare SQL: {}", sqlite3_errmsg(db_)));
    statements_.emplace(sql, statement);
    return statement;
  }

  void Bind(sqlite3_stmt* statement, const std::vector<SqlValue>& params) {
    sqlite3_reset(statement);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const int index = static_cast<int>(i) + 1;
      int code = SQLITE_OK;
      if (std::holds_alternative<std::monostate>(params[i])) {
        code = sqlite3_bind_null(statement, index);
      } else if (const auto* integer = std::get_if<std::int64_t>(&params[i])) {
        code = sqlite3_bind_int64(statement, index, *integer);
      } else if (const auto* real = std::get_if<double>(&params[i])) {
        code = sqlite3_bind_double(statement, index, *real);
      } else {
        const auto& text = std::get<std::string>(params[i]);
        code = sqlite3_bind_text(statement, index, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
      }
      if (code != SQLITE_OK) Throw(code, "cannot bind a parameter");
    }
  }

  void Step(sqlite3_stmt* statement, const std::string& sql, std::vector<SqlRow>* rows) {
    for (;;) {
      const int code = sqlite3_step(statement);
      if (code == SQLITE_DONE) break;
      if (code != SQLITE_ROW) {
        const std::string message = sqlite3_errmsg(db_);
        sqlite3_reset(statement);
        Throw(sqlite3_extended_errcode(db_), fmt::format("{} (in: {})", message, sql.substr(0, 80)));
      }
      if (rows == nullptr) continue;
      SqlRow row;
      const int columns = sqlite3_column_count(statement);
      row.reserve(static_cast<std::size_t>(columns));
      for (int c = 0; c < columns; ++c) {
        switch (sqlite3_column_type(statement, c)) {
          case SQLITE_NULL: row.emplace_back(std::monostate{}); break;
          case SQLITE_INTEGER: row.emplace_back(static_cast<std::int64_t>(sqlite3_column_int64(statement, c))); break;
          case SQLITE_FLOAT: row.emplace_back(sqlite3_column_double(statement, c)); break;
          default: {
            const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, c));
            row.emplace_back(std::string(text, static_cast<std::size_t>(sqlite3_column_bytes(statement, c))));
          }
        }
      }
      rows->push_back(std::move(row));
    }
    sqlite3_reset(statement);
  }

  std::string name_;
  std::string path_;  // the database file; empty for a copy in memory
  bool read_only_ = false;
  sqlite3* db_ = nullptr;
  std::map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace

std::unique_ptr<SqlConnection> OpenSqlite(const std::string& path, bool read_only) {
  return std::make_unique<SqliteConnection>(path, read_only);
}

std::unique_ptr<SqlConnection> OpenSqliteCopyInMemory(const std::string& path) {
  return SqliteConnection::InMemoryCopyOf(path);
}

}  // namespace dltune::internal
