// SqlConnection over libpq. Values travel as text: parameters are formatted with full round-trip precision and typed
// (int64 as bigint, double as double precision, strings and NULL left for the server to infer from context); results
// are converted by column type. ExecuteMany sends every row in one pipeline (one network round trip per batch).
// A connection lost between transactions is re-established on the next call.
#include <libpq-fe.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "sql_connection.h"

namespace dltune::internal {
namespace {

// Type OIDs from PostgreSQL's catalog/pg_type.h (only the server headers define them).
constexpr Oid kBoolOid = 16;
constexpr Oid kInt8Oid = 20;
constexpr Oid kInt2Oid = 21;
constexpr Oid kInt4Oid = 23;
constexpr Oid kFloat4Oid = 700;
constexpr Oid kFloat8Oid = 701;
constexpr Oid kNumericOid = 1700;
constexpr Oid kUnknownOid = 0;  // lets the server infer the type

// Seconds to wait for a server, unless the URI says otherwise (libpq's default waits forever).
constexpr const char* kConnectTimeoutSeconds = "10";
// The high half of dltune's advisory lock keys ("dlt"), apart from other programs' locks in the same database.
constexpr std::int64_t kAdvisoryLockClass = 0x646c74;
// Statements are quoted in messages up to this many characters.
constexpr std::size_t kQuotedSqlLength = 60;

struct ResultDeleter {
  void operator()(PGresult* result) const { PQclear(result); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

// The first line of a libpq message, without trailing whitespace.
std::string FirstLine(const char* message) {
  std::string_view text = message ? message : "";
  text = text.substr(0, text.find('\n'));
  while (!text.empty() && (text.back() == ' ' || text.back() == '\r' || text.back() == '\t')) text.remove_suffix(1);
  return std::string(text.empty() ? "unknown error" : text);
}

// The statement as one short line, for messages.
std::string QuoteSql(std::string_view sql) {
  std::string line;
  for (const char c : sql) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (line.empty() || line.back() == ' ')) continue;
    line += space ? ' ' : c;
    if (line.size() >= kQuotedSqlLength) return line + "...";
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// Removes a password from a connection URI (user:password@, password=... in the query) or key=value string.
std::string WithoutPassword(const std::string& uri) {
  std::string result;
  std::size_t rest = 0;
  for (const std::string_view scheme : {"postgresql://", "postgres://"}) {
    if (uri.compare(0, scheme.size(), scheme) != 0) continue;
    const std::size_t authority_end = std::min(uri.find_first_of("/?#", scheme.size()), uri.size());
    const std::size_t at = uri.rfind('@', authority_end);
    const std::size_t colon =
        at == std::string::npos || at < scheme.size() ? std::string::npos : uri.find(':', scheme.size());
    if (colon != std::string::npos && colon < at) {
      result = uri.substr(0, colon);
      rest = at;
    }
    break;
  }
  std::string_view tail = std::string_view(uri).substr(rest);
  // Drop every password=value: in a URI query separated by &, in a key=value string by spaces (value maybe quoted).
  std::size_t pos = 0;
  while ((pos = tail.find("password", pos)) != std::string_view::npos) {
    const bool starts_key = pos == 0 || tail[pos - 1] == '?' || tail[pos - 1] == '&' || tail[pos - 1] == ' ';
    std::size_t eq = pos + 8;
    while (eq < tail.size() && tail[eq] == ' ') ++eq;
    if (!starts_key || eq >= tail.size() || tail[eq] != '=') {
      pos += 8;
      continue;
    }
    std::size_t end = eq + 1;
    while (end < tail.size() && tail[end] == ' ') ++end;
    if (end < tail.size() && tail[end] == '\'') {
      for (++end; end < tail.size() && tail[end] != '\''; ++end) {
        if (tail[end] == '\\') ++end;
      }
      end = std::min(end + 1, tail.size());
    } else {
      while (end < tail.size() && tail[end] != '&' && tail[end] != ' ' && tail[end] != '#') ++end;
    }
    std::size_t begin = pos;
    if (end < tail.size() && (tail[end] == '&' || tail[end] == ' ')) {
      ++end;  // also the separator after it
    } else if (begin > 0 && (tail[begin - 1] == '&' || tail[begin - 1] == ' ' || tail[begin - 1] == '?')) {
      --begin;  // or, as the last one, the separator before it (the '?' of a query holding only the password)
    }
    result.append(tail.substr(0, begin));
    tail = tail.substr(end);
    pos = 0;
  }
  result.append(tail);
  return result;
}

bool IsIdentifierChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

// Rewrites `?` placeholders to $1, $2, ... outside string literals, quoted identifiers, dollar quotes and comments.
std::string RewritePlaceholders(std::string_view sql, int* count) {
  std::string out;
  out.reserve(sql.size() + 16);
  int n = 0;
  std::size_t i = 0;
  const auto copy_until = [&](std::size_t end) {
    out.append(sql.substr(i, end - i));
    i = end;
  };
  while (i < sql.size()) {
    const char c = sql[i];
    const char next = i + 1 < sql.size() ? sql[i + 1] : '\0';
    if (c == '?') {
      out += fmt::format("${}", ++n);
      ++i;
    } else if (c == '\'') {
      // E'...' strings take backslash escapes; '' is a quote in every string.
      const bool escapes =
          i > 0 && (sql[i - 1] == 'E' || sql[i - 1] == 'e') && (i < 2 || !IsIdentifierChar(sql[i - 2]));
      std::size_t j = i + 1;
      while (j < sql.size()) {
        if (escapes && sql[j] == '\\') {
          j += 2;
        } else if (sql[j] == '\'') {
          if (j + 1 < sql.size() && sql[j + 1] == '\'') {
            j += 2;
          } else {
            break;
          }
        } else {
          ++j;
        }
      }
      copy_until(std::min(j + 1, sql.size()));
    } else if (c == '"') {
      std::size_t j = i + 1;
      while (j < sql.size() && !(sql[j] == '"' && (j + 1 >= sql.size() || sql[j + 1] != '"')))
        j += sql[j] == '"' ? 2 : 1;
      copy_until(std::min(j + 1, sql.size()));
    } else if (c == '-' && next == '-') {
      copy_until(std::min(sql.find('\n', i), sql.size()));
    } else if (c == '/' && next == '*') {
      int depth = 0;
      std::size_t j = i;
      do {
        if (sql.compare(j, 2, "/*") == 0) {
          ++depth;
          j += 2;
        } else if (sql.compare(j, 2, "*/") == 0) {
          --depth;
          j += 2;
        } else {
          ++j;
        }
      } while (depth > 0 && j < sql.size());
      copy_until(std::min(j, sql.size()));
    } else if (c == '$' && (i == 0 || !IsIdentifierChar(sql[i - 1])) && !(next >= '0' && next <= '9')) {
      // $tag$ ... $tag$ (a $ followed by a digit is a positional parameter).
      std::size_t j = i + 1;
      while (j < sql.size() && IsIdentifierChar(sql[j])) ++j;
      if (j < sql.size() && sql[j] == '$') {
        const std::string_view tag = sql.substr(i, j - i + 1);
        const std::size_t close = sql.find(tag, j + 1);
        copy_until(close == std::string_view::npos ? sql.size() : close + tag.size());
      } else {
        copy_until(j);
      }
    } else {
      std::size_t j = i + 1;
      while (j < sql.size() && std::strchr("?'\"-/$", sql[j]) == nullptr) ++j;
      copy_until(j);
    }
  }
  *count = n;
  return out;
}

// Parameters in libpq's text format; buffers are reused from row to row.
class TextParams {
 public:
  // Formats `params`; the pointers stay valid until the next Set or until `params` changes. Returns the 1-based
  // number of a text parameter PostgreSQL cannot take (it holds a NUL byte), 0 if all are fine.
  std::size_t Set(const std::vector<SqlValue>& params) {
    std::size_t bad = 0;
    if (storage_.size() < params.size()) storage_.resize(params.size());
    values_.assign(params.size(), nullptr);
    for (std::size_t i = 0; i < params.size(); ++i) {
      const SqlValue& param = params[i];
      if (const auto* text = std::get_if<std::string>(&param)) {
        values_[i] = text->c_str();
        if (bad == 0 && text->find('\0') != std::string::npos) bad = i + 1;
      } else if (const auto* integer = std::get_if<std::int64_t>(&param)) {
        storage_[i].clear();
        fmt::format_to(std::back_inserter(storage_[i]), "{}", *integer);
        values_[i] = storage_[i].c_str();
      } else if (const auto* real = std::get_if<double>(&param)) {
        storage_[i].clear();
        fmt::format_to(std::back_inserter(storage_[i]), "{}", *real);  // shortest repr that reads back exactly
        values_[i] = storage_[i].c_str();
      }
    }
    return bad;
  }

  int size() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }

 private:
  std::vector<std::string> storage_;
  std::vector<const char*> values_;
};

// The type a parameter is sent as: bigint, double precision, or (text, NULL) whatever the server infers.
Oid TypeOf(const SqlValue& value) {
  if (std::holds_alternative<std::int64_t>(value)) return kInt8Oid;
  if (std::holds_alternative<double>(value)) return kFloat8Oid;
  return kUnknownOid;
}

class PostgresConnection final : public SqlConnection {
 public:
  PostgresConnection(const std::string& uri, bool read_only)
      : uri_(uri), name_(WithoutPassword(uri)), read_only_(read_only) {
    // Keywords before dbname are defaults the URI may override.
    const char* const keywords[] = {"connect_timeout", "fallback_application_name", "dbname", nullptr};
    const char* const values[] = {kConnectTimeoutSeconds, "dltune", uri.c_str(), nullptr};
    conn_ = PQconnectdbParams(keywords, values, /*expand_dbname=*/1);
    if (conn_ == nullptr) throw SqlError(name_ + ": cannot connect: out of memory");
    if (PQstatus(conn_) != CONNECTION_OK) {
      const std::string reason = FirstLine(PQerrorMessage(conn_));
      PQfinish(conn_);
      conn_ = nullptr;
      const std::string message = fmt::format("{}: cannot connect: {}", name_, reason);
      // A refused login or a missing database is the URL's mistake; anything else (refused, timed out, a name not
      // resolved yet, a server starting up) may pass, so a script can retry it.
      const bool mistake =
          reason.find("authentication") != std::string::npos || reason.find("does not exist") != std::string::npos ||
          reason.find("password") != std::string::npos || reason.find("permission denied") != std::string::npos ||
          reason.find("invalid") != std::string::npos;
      if (mistake) throw SqlError(message, ErrorKind::kInvalidInput);
      throw SqlUnavailableError(message);
    }
    PQsetNoticeProcessor(
        conn_, [](void*, const char*) {}, nullptr);
    SetUpSession();
  }

  ~PostgresConnection() override { PQfinish(conn_); }

  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  SqlDialect dialect() const override { return SqlDialect::kPostgres; }
  const std::string& name() const override { return name_; }

  void Execute(const std::string& sql, const std::vector<SqlValue>& params) override { Run(sql, params); }

  void ExecuteMany(const std::string& sql, const std::vector<SqlRow>& rows) override {
    if (rows.empty()) return;
    EnsureConnected();
    int count = 0;
    const std::string text = RewritePlaceholders(sql, &count);
    std::vector<Oid> types(static_cast<std::size_t>(count), kUnknownOid);
    for (std::size_t column = 0; column < types.size(); ++column) {
      bool first = true;
      for (const SqlRow& row : rows) {
        if (column >= row.size() || std::holds_alternative<std::monostate>(row[column])) continue;
        const Oid type = TypeOf(row[column]);
        if (first) {
          types[column] = type;
          first = false;
        } else if (type != types[column]) {
          const bool numbers = type != kUnknownOid && types[column] != kUnknownOid;
          types[column] = numbers ? kFloat8Oid : kUnknownOid;  // bigint text reads as double precision too
        }
      }
    }

    // One pipeline: parse once into the unnamed statement, bind and execute it per row, then one sync. Outside a
    // transaction the sync makes the whole batch one implicit transaction; an error aborts the rest of it.
    if (PQenterPipelineMode(conn_) != 1) ThrowConnectionError(sql);
    bool sent = PQsendPrepare(conn_, "", text.c_str(), count, types.data()) == 1;
    TextParams params;
    std::string failure;
    for (std::size_t i = 0; sent && i < rows.size(); ++i) {
      if (const std::size_t bad = params.Set(rows[i]); bad != 0) {
        // The rows before it are sent already: fail the batch's transaction so that none of them stays written.
        failure = fmt::format("row {}: {}", i + 1, NulMessage(bad));
        sent = PQsendQueryParams(conn_, "SELECT 1/0", 0, nullptr, nullptr, nullptr, nullptr, 0) == 1;
        break;
      }
      sent = PQsendQueryPrepared(conn_, "", params.size(), params.values(), nullptr, nullptr, 0) == 1;
    }
    sent = sent && PQpipelineSync(conn_) == 1;
    if (!sent && failure.empty()) failure = FirstLine(PQerrorMessage(conn_));
    std::string sqlstate;
    if (sent) {
      int empty_in_a_row = 0;
      while (true) {
        Result result(PQgetResult(conn_));
        if (!result) {
          // A null separates the results of consecutive statements; more than one in a row means nothing is coming.
          if (++empty_in_a_row > 1 || PQstatus(conn_) == CONNECTION_BAD) {
            if (failure.empty()) failure = FirstLine(PQerrorMessage(conn_));
            break;
          }
          continue;
        }
        empty_in_a_row = 0;
        const ExecStatusType status = PQresultStatus(result.get());
        if (status == PGRES_PIPELINE_SYNC) break;
        if (status == PGRES_FATAL_ERROR && failure.empty()) {
          failure = ErrorText(result.get());
          const char* state = PQresultErrorField(result.get(), PG_DIAG_SQLSTATE);
          sqlstate = state ? state : "";
        }
      }
    }
    PQexitPipelineMode(conn_);
    if (!failure.empty()) Throw(sql, sqlstate, failure);
  }

  std::vector<SqlRow> Query(const std::string& sql, const std::vector<SqlValue>& params) override {
    const Result result = Run(sql, params);
    const PGresult* r = result.get();
    const int columns = PQnfields(r);
    std::vector<Oid> types(static_cast<std::size_t>(columns));
    for (int c = 0; c < columns; ++c) types[static_cast<std::size_t>(c)] = PQftype(r, c);
    std::vector<SqlRow> rows(static_cast<std::size_t>(PQntuples(r)));
    for (int i = 0; i < PQntuples(r); ++i) {
      SqlRow& row = rows[static_cast<std::size_t>(i)];
      row.reserve(static_cast<std::size_t>(columns));
      for (int c = 0; c < columns; ++c) row.push_back(Value(sql, r, i, c, types[static_cast<std::size_t>(c)]));
    }
    return rows;
  }

  void ExecuteScript(const std::string& sql) override {
    EnsureConnected();
    const Result result(PQexec(conn_, sql.c_str()));
    Check(sql, result.get());
  }

  void BeginWrite() override { Begin("BEGIN ISOLATION LEVEL READ COMMITTED"); }
  void BeginRead() override { Begin("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"); }

  void Commit() override {
    const bool lost = in_transaction_ && PQstatus(conn_) != CONNECTION_OK;
    in_transaction_ = false;
    if (lost) throw SqlUnavailableError(name_ + ": COMMIT: the connection was lost in the middle of the transaction");
    const Result result = Run("COMMIT", {});
    // COMMIT of a transaction that failed earlier succeeds as a ROLLBACK.
    if (std::strcmp(PQcmdStatus(result.get()), "ROLLBACK") == 0) {
      throw SqlError(name_ + ": COMMIT: the transaction was rolled back because a statement in it failed");
    }
  }

  std::unique_ptr<SqlConnection> OpenAnother() const override {
    return std::make_unique<PostgresConnection>(uri_, read_only_);
  }

  std::unique_ptr<StoreLock> TryLock(std::int64_t key) override {
    // A connection of the lock's own: reconnecting this one after an outage would drop the lock unnoticed, and
    // closing it (or the process's death) releases the lock.
    auto holder = std::make_unique<PostgresConnection>(uri_, false);
    const std::int64_t lock_key = (kAdvisoryLockClass << 32) ^ key;
    const auto rows =
        holder->Query(fmt::format("SELECT CASE WHEN pg_try_advisory_lock({}) THEN 1 ELSE 0 END", lock_key), {});
    if (rows.empty() || std::get<std::int64_t>(rows.front().front()) != 1) return nullptr;
    struct SessionLock final : StoreLock {
      explicit SessionLock(std::unique_ptr<PostgresConnection> c) : connection(std::move(c)) {}
      std::unique_ptr<PostgresConnection> connection;
    };
    return std::make_unique<SessionLock>(std::move(holder));
  }

  void Rollback() override {
    in_transaction_ = false;
    if (PQstatus(conn_) != CONNECTION_OK) return;  // the server ended the transaction with the connection
    Run("ROLLBACK", {});
  }

 private:
  void SetUpSession() {
    // Only warnings and errors reach the client; doubles print with round-trip precision whatever the server says.
    const Result result(PQexec(conn_, read_only_ ? "SET client_min_messages = warning; SET extra_float_digits = 3; "
                                                   "SET default_transaction_read_only = on"
                                                 : "SET client_min_messages = warning; SET extra_float_digits = 3"));
    Check("SET", result.get());
  }

  // Reconnects a connection lost between transactions; inside one, the transaction is gone and the caller must
  // roll back first.
  void EnsureConnected() {
    if (PQstatus(conn_) == CONNECTION_OK) return;
    if (in_transaction_) {
      throw SqlUnavailableError(name_ + ": the connection was lost in the middle of a transaction");
    }
    PQreset(conn_);
    if (PQstatus(conn_) != CONNECTION_OK) {
      throw SqlUnavailableError(fmt::format("{}: cannot reconnect: {}", name_, FirstLine(PQerrorMessage(conn_))));
    }
    SetUpSession();
  }

  void Begin(const char* sql) {
    in_transaction_ = false;
    Run(sql, {});
    in_transaction_ = true;
  }

  // Runs one parameterized statement and returns its result, throwing on failure.
  Result Run(const std::string& sql, const std::vector<SqlValue>& params) {
    EnsureConnected();
    int count = 0;
    const std::string text = RewritePlaceholders(sql, &count);
    TextParams values;
    if (const std::size_t bad = values.Set(params); bad != 0) Throw(sql, "", NulMessage(bad));
    std::vector<Oid> types(params.size());
    for (std::size_t i = 0; i < params.size(); ++i) types[i] = TypeOf(params[i]);
    Result result(PQexecParams(conn_, text.c_str(), values.size(), types.data(), values.values(), nullptr, nullptr, 0));
    Check(sql, result.get());
    return result;
  }

  void Check(std::string_view sql, const PGresult* result) {
    const ExecStatusType status = result ? PQresultStatus(result) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK || status == PGRES_EMPTY_QUERY) return;
    const char* state = result ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
    Throw(sql, state ? state : "", result ? ErrorText(result) : FirstLine(PQerrorMessage(conn_)));
  }

  std::string ErrorText(const PGresult* result) const {
    const char* primary = PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
    if (primary != nullptr && *primary != '\0') return FirstLine(primary);
    const char* message = PQresultErrorMessage(result);
    return FirstLine(message != nullptr && *message != '\0' ? message : PQerrorMessage(conn_));
  }

  static std::string NulMessage(std::size_t parameter) {
    return fmt::format("parameter {} holds a NUL byte, which PostgreSQL text cannot store", parameter);
  }

  [[noreturn]] void ThrowConnectionError(std::string_view sql) { Throw(sql, "", FirstLine(PQerrorMessage(conn_))); }

  [[noreturn]] void Throw(std::string_view sql, std::string_view sqlstate, const std::string& reason) const {
    const std::string message = fmt::format("{}: {}: {}", name_, QuoteSql(sql), reason);
    if (sqlstate == "23505") throw SqlUniqueViolation(message);
    if (sqlstate == "40001" || sqlstate == "40P01") throw SqlConflictError(message);
    // Connection exceptions (08...), a server shutting down or starting (57P01-57P03), a full disk (53100): the
    // database, not the statement.
    if (PQstatus(conn_) != CONNECTION_OK || sqlstate.substr(0, 2) == "08" || sqlstate == "57P01" ||
        sqlstate == "57P02" || sqlstate == "57P03" || sqlstate == "53100") {
      throw SqlUnavailableError(message);
    }
    throw SqlError(message);
  }

  SqlValue Value(std::string_view sql, const PGresult* result, int row, int column, Oid type) const {
    if (PQgetisnull(result, row, column)) return std::monostate{};
    const char* text = PQgetvalue(result, row, column);
    const std::size_t length = static_cast<std::size_t>(PQgetlength(result, row, column));
    switch (type) {
      case kBoolOid: return std::int64_t{text[0] == 't' ? 1 : 0};
      case kInt2Oid:
      case kInt4Oid:
      case kInt8Oid: {
        std::int64_t value = 0;
        const auto [end, error] = std::from_chars(text, text + length, value);
        if (error == std::errc() && end == text + length) return value;
        break;
      }
      case kFloat4Oid:
      case kFloat8Oid:
      case kNumericOid: {
        double value = 0;
        const auto [end, error] = std::from_chars(text, text + length, value);
        if (error == std::errc() && end == text + length) return value;
        if (error == std::errc::result_out_of_range) return std::strtod(text, nullptr);  // huge or tiny numeric
        break;
      }
      default: return std::string(text, length);
    }
    throw SqlError(fmt::format("{}: {}: cannot read column {} value '{}' as a number", name_, QuoteSql(sql),
                               PQfname(result, column), std::string_view(text, length)));
  }

  std::string uri_;  // as given, password included: the lock's own connection is opened with it
  std::string name_;
  PGconn* conn_ = nullptr;
  bool in_transaction_ = false;
  bool read_only_ = false;
};

}  // namespace

std::unique_ptr<SqlConnection> OpenPostgres(const std::string& uri, bool read_only) {
  return std::make_unique<PostgresConnection>(uri, read_only);
}

}  // namespace dltune::internal
