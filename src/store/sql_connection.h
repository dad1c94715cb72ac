// Internal: the small slice of a SQL database that SqlStore needs, implemented once per backend (SQLite, PostgreSQL).
// SqlStore holds all the store's logic and SQL; a connection only runs statements and converts values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "dltune/core/error.h"
#include "dltune/store/store.h"

namespace dltune::internal {

// NULL, INTEGER/BIGINT, REAL/DOUBLE PRECISION, TEXT.
using SqlValue = std::variant<std::monostate, std::int64_t, double, std::string>;
using SqlRow = std::vector<SqlValue>;

enum class SqlDialect { kSqlite, kPostgres };

// A failure of the database itself (not a broken lease or a user's mistake the store detects).
class SqlError : public Error {
 public:
  explicit SqlError(const std::string& message, ErrorKind kind = ErrorKind::kIo) : Error(message, kind) {}
};

// The database cannot be reached or written: the server is down or restarting, the connection was lost, the disk is
// full or failing. Nothing of the transaction is known to have happened; trying again later may succeed.
class SqlUnavailableError : public SqlError {
 public:
  explicit SqlUnavailableError(const std::string& message) : SqlError(message, ErrorKind::kUnavailable) {}
};

// A transaction that lost a race (SQLite busy, PostgreSQL serialization failure or deadlock): retry it.
class SqlConflictError : public SqlError {
 public:
  explicit SqlConflictError(const std::string& message) : SqlError(message, ErrorKind::kConflict) {}
};

// A unique or primary-key constraint refused a row.
class SqlUniqueViolation : public SqlError {
 public:
  using SqlError::SqlError;
};

// One open connection. Not thread-safe. Statements use `?` placeholders in both dialects (a PostgreSQL connection
// rewrites them to $1, $2, ...). Every method throws SqlError on failure, naming the database.
class SqlConnection {
 public:
  virtual ~SqlConnection() = default;

  virtual SqlDialect dialect() const = 0;
  // The database as the user named it, without a password, for messages.
  virtual const std::string& name() const = 0;

  // Runs one statement.
  virtual void Execute(const std::string& sql, const std::vector<SqlValue>& params = {}) = 0;
  // Runs one statement for each row of parameters, reusing the prepared statement (or batching rows) for speed.
  virtual void ExecuteMany(const std::string& sql, const std::vector<SqlRow>& rows) = 0;
  // Runs one statement and returns its rows. Integer columns come back as int64, real ones as double, text as
  // string, NULL as monostate.
  virtual std::vector<SqlRow> Query(const std::string& sql, const std::vector<SqlValue>& params = {}) = 0;
  // Runs several ;-separated statements without parameters (schema scripts).
  virtual void ExecuteScript(const std::string& sql) = 0;

  // Starts a transaction that will write: SQLite takes the write lock up front (BEGIN IMMEDIATE, waiting for it
  // rather than failing with "database is locked"); PostgreSQL begins a READ COMMITTED transaction.
  virtual void BeginWrite() = 0;
  // Starts a transaction that only reads (a consistent snapshot).
  virtual void BeginRead() = 0;
  virtual void Commit() = 0;
  virtual void Rollback() = 0;

  // Opens another connection to the same database, with the same settings, for use on another thread; nullptr for
  // a database no other connection can reach (a SQLite copy in memory). Safe to call from any thread.
  virtual std::unique_ptr<SqlConnection> OpenAnother() const = 0;

  // Takes this database's advisory lock `key` for as long as the returned object lives, or returns nullptr at once
  // when another holder has it. A holder's death releases it. SQLite: an open file description's lock on byte `key`
  // of "<database file>.locks" beside it; PostgreSQL: a session advisory lock on a connection of its own.
  virtual std::unique_ptr<StoreLock> TryLock(std::int64_t key) = 0;
};

// Opens a SQLite database file, creating it if needed (WAL mode, a busy timeout, foreign keys on). With
// `read_only`, opens it without writing anything — a mode-444 file or a read-only mount included — and never
// creates it.
std::unique_ptr<SqlConnection> OpenSqlite(const std::string& path, bool read_only = false);
// A private in-memory copy of a SQLite database file, for reading a store whose schema must be upgraded without
// writing the file.
std::unique_ptr<SqlConnection> OpenSqliteCopyInMemory(const std::string& path);
// Connects to PostgreSQL with a libpq connection URI (postgresql://...). With `read_only`, every transaction of the
// session is read-only.
std::unique_ptr<SqlConnection> OpenPostgres(const std::string& uri, bool read_only = false);

}  // namespace dltune::internal
