// The PostgreSQL SqlConnection against a real server: the throw-away one scripts/pg-test-server starts (CTest fixture
// `postgres`), whose URI is in DLTUNE_PG_URL_FILE. Without it the tests fail; they never skip.
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <future>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/store/sql_connection.h"

namespace dltune::internal {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string ServerUrl() {
  std::ifstream in(DLTUNE_PG_URL_FILE);
  std::string url;
  std::getline(in, url);
  return url;
}

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

class PostgresConnectionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = ServerUrl();
    ASSERT_FALSE(url_.empty()) << "no PostgreSQL test server: " << DLTUNE_PG_URL_FILE
                               << " is missing or empty; run the CTest fixture postgres_start (scripts/pg-test-server "
                                  "start DIR) first";
    db_ = OpenPostgres(url_);
    // Tests run in parallel processes on one database: every table name is unique to this process.
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    table_ = fmt::format("pgconn_{}_{}", info->name(), getpid());
    for (char& c : table_) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }

  void TearDown() override {
    if (db_) {
      db_->Rollback();
      db_->Execute(fmt::format("DROP TABLE IF EXISTS {}", table_));
    }
  }

  std::int64_t Count(SqlConnection& db) {
    return std::get<std::int64_t>(db.Query(fmt::format("SELECT count(*) FROM {}", table_)).at(0).at(0));
  }

  std::string url_;
  std::unique_ptr<SqlConnection> db_;
  std::string table_;
};

TEST_F(PostgresConnectionTest, RoundTripsEveryValueKindExactly) {
  db_->Execute(fmt::format("CREATE TABLE {} (id BIGINT PRIMARY KEY, i BIGINT, d DOUBLE PRECISION, t TEXT)", table_));
  const std::vector<double> doubles = {0.1,
                                       1e-300,
                                       -0.0,
                                       1.0 / 3.0,
                                       std::numeric_limits<double>::denorm_min(),
                                       std::numeric_limits<double>::max(),
                                       -std::numeric_limits<double>::min(),
                                       123456789.123456789,
                                       std::numeric_limits<double>::infinity(),
                                       -std::numeric_limits<double>::infinity()};
  const std::vector<std::int64_t> integers = {0, -1, 42, std::numeric_limits<std::int64_t>::max(),
                                              std::numeric_limits<std::int64_t>::min()};
  const std::vector<std::string> texts = {"", "plain", "it's a ? and a \"?\"", "line\nbreak\ttab\\backslash",
                                          "héllo ✓ 日本"};
  const std::size_t n = std::max({doubles.size(), integers.size(), texts.size()}) + 1;
  for (std::size_t k = 0; k < n; ++k) {
    // Row n-1 is all NULL.
    std::vector<SqlValue> params(4);
    params[0] = static_cast<std::int64_t>(k);
    if (k < integers.size()) params[1] = integers[k];
    if (k < doubles.size()) params[2] = doubles[k];
    if (k < texts.size()) params[3] = texts[k];
    db_->Execute(fmt::format("INSERT INTO {} (id, i, d, t) VALUES (?, ?, ?, ?)", table_), params);
  }
  const auto rows = db_->Query(fmt::format("SELECT i, d, t FROM {} ORDER BY id", table_));
  ASSERT_EQ(rows.size(), n);
  for (std::size_t k = 0; k < n; ++k) {
    SCOPED_TRACE(k);
    if (k < integers.size()) {
      EXPECT_EQ(std::get<std::int64_t>(rows[k][0]), integers[k]);
    } else {
      EXPECT_TRUE(std::holds_alternative<std::monostate>(rows[k][0]));
    }
    if (k < doubles.size()) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(std::get<double>(rows[k][1])), std::bit_cast<std::uint64_t>(doubles[k]))
          << std::get<double>(rows[k][1]) << " != " << doubles[k];
    } else {
      EXPECT_TRUE(std::holds_alternative<std::monostate>(rows[k][1]));
    }
    if (k < texts.size()) {
      EXPECT_EQ(std::get<std::string>(rows[k][2]), texts[k]);
    } else {
      EXPECT_TRUE(std::holds_alternative<std::monostate>(rows[k][2]));
    }
  }
  // NaN survives too (no bit pattern promise).
  const auto nan = db_->Query("SELECT ?", {std::numeric_limits<double>::quiet_NaN()});
  EXPECT_TRUE(std::isnan(std::get<double>(nan.at(0).at(0))));
}

TEST_F(PostgresConnectionTest, ParametersKeepTheirTypeWithoutContext) {
  const auto rows = db_->Query("SELECT ?, ?, ?, ?", {std::int64_t{7}, 2.5, std::string("s"), SqlValue()});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], SqlValue(std::int64_t{7}));
  EXPECT_EQ(rows[0][1], SqlValue(2.5));
  EXPECT_EQ(rows[0][2], SqlValue(std::string("s")));
  EXPECT_EQ(rows[0][3], SqlValue());
}

TEST_F(PostgresConnectionTest, ConvertsColumnTypes) {
  const auto rows = db_->Query(
      "SELECT 1::int2, 2::int4, 3::int8, true, false, 1.5::float4, 2.25::float8, 3.5::numeric, 'x'::text, "
      "'y'::varchar, NULL::int8, DATE '2024-01-02', 'Infinity'::float8, 'NaN'::numeric");
  ASSERT_EQ(rows.size(), 1u);
  const SqlRow& r = rows[0];
  EXPECT_EQ(r[0], SqlValue(std::int64_t{1}));
  EXPECT_EQ(r[1], SqlValue(std::int64_t{2}));
  EXPECT_EQ(r[2], SqlValue(std::int64_t{3}));
  EXPECT_EQ(r[3], SqlValue(std::int64_t{1}));
  EXPECT_EQ(r[4], SqlValue(std::int64_t{0}));
  EXPECT_EQ(r[5], SqlValue(1.5));
  EXPECT_EQ(r[6], SqlValue(2.25));
  EXPECT_EQ(r[7], SqlValue(3.5));
  EXPECT_EQ(r[8], SqlValue(std::string("x")));
  EXPECT_EQ(r[9], SqlValue(std::string("y")));
  EXPECT_EQ(r[10], SqlValue());
  EXPECT_EQ(r[11], SqlValue(std::string("2024-01-02")));
  EXPECT_EQ(r[12], SqlValue(std::numeric_limits<double>::infinity()));
  EXPECT_TRUE(std::isnan(std::get<double>(r[13])));
}

TEST_F(PostgresConnectionTest, RewritesOnlyRealPlaceholders) {
  const auto rows = db_->Query(
      "SELECT ? || '?''?' || ?, \"?\" , $$?$$, $tag$ ? $ ? $tag$, E'\\'?', ? -- a ? in a comment\n"
      " /* one ? /* nested ? */ still ? */ FROM (SELECT 'q' AS \"?\") AS s",
      {std::string("a"), std::string("b"), std::int64_t{3}});
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], SqlValue(std::string("a?'?b")));
  EXPECT_EQ(rows[0][1], SqlValue(std::string("q")));
  EXPECT_EQ(rows[0][2], SqlValue(std::string("?")));
  EXPECT_EQ(rows[0][3], SqlValue(std::string(" ? $ ? ")));
  EXPECT_EQ(rows[0][4], SqlValue(std::string("'?")));
  EXPECT_EQ(rows[0][5], SqlValue(std::int64_t{3}));
}

TEST_F(PostgresConnectionTest, ExecuteManyWritesEveryRowInOrder) {
  db_->Execute(fmt::format(
      "CREATE TABLE {} (id BIGINT PRIMARY KEY, step BIGINT, loss DOUBLE PRECISION, split TEXT, lr DOUBLE PRECISION)",
      table_));
  constexpr std::int64_t kRows = 10000;
  std::vector<SqlRow> rows;
  for (std::int64_t i = 0; i < kRows; ++i) {
    rows.push_back({i, i * 10, i % 7 == 0 ? SqlValue() : SqlValue(1.0 / static_cast<double>(i + 1)),
                    i % 5 == 0 ? SqlValue() : SqlValue(fmt::format("split{}", i % 3)),
                    // A column whose values mix integers and doubles.
                    i % 2 == 0 ? SqlValue(i) : SqlValue(0.5 + static_cast<double>(i))});
  }
  const std::string insert = fmt::format("INSERT INTO {} (id, step, loss, split, lr) VALUES (?, ?, ?, ?, ?)", table_);
  db_->ExecuteMany(insert, rows);
  const auto back = db_->Query(fmt::format("SELECT id, step, loss, split, lr FROM {} ORDER BY id", table_));
  ASSERT_EQ(back.size(), rows.size());
  for (std::size_t k = 0; k < rows.size(); ++k) {
    SqlRow expected = rows[k];
    if (const auto* lr = std::get_if<std::int64_t>(&expected[4])) expected[4] = static_cast<double>(*lr);
    ASSERT_EQ(back[k], expected) << "row " << k;
  }
  db_->ExecuteMany(insert, {});  // no rows, no statement
  EXPECT_EQ(Count(*db_), kRows);
}

TEST_F(PostgresConnectionTest, ExecuteManyIsFast) {
  db_->Execute(fmt::format(
      "CREATE TABLE {} (trial BIGINT, step BIGINT, loss DOUBLE PRECISION, lr DOUBLE PRECISION, grad DOUBLE PRECISION, "
      "time DOUBLE PRECISION, PRIMARY KEY (trial, step))",
      table_));
  constexpr std::int64_t kBatch = 1000;
  constexpr std::int64_t kBatches = 50;
  const std::string insert =
      fmt::format("INSERT INTO {} (trial, step, loss, lr, grad, time) VALUES (?, ?, ?, ?, ?, ?)", table_);
  const auto start = std::chrono::steady_clock::now();
  for (std::int64_t b = 0; b < kBatches; ++b) {
    std::vector<SqlRow> rows;
    for (std::int64_t i = 0; i < kBatch; ++i) {
      const double x = static_cast<double>(b * kBatch + i);
      rows.push_back({std::int64_t{1}, b * kBatch + i, 1.0 / (x + 1), 0.1, x * 0.01, SqlValue()});
    }
    // As the metrics sink writes: one transaction per batch.
    db_->BeginWrite();
    db_->ExecuteMany(insert, rows);
    db_->Commit();
  }
  const double seconds = Seconds(start);
  const double rate = static_cast<double>(kBatch * kBatches) / seconds;
  std::cout << fmt::format("ExecuteMany: {} rows in {:.3f} s = {:.0f} rows/s ({} rows per transaction)\n",
                           kBatch * kBatches, seconds, rate, kBatch);
  EXPECT_EQ(Count(*db_), kBatch * kBatches);
  EXPECT_GT(rate, 5000) << "ExecuteMany is too slow";
}

TEST_F(PostgresConnectionTest, ExecuteManyFailureWritesNothing) {
  db_->Execute(fmt::format("CREATE TABLE {} (id BIGINT PRIMARY KEY, t TEXT)", table_));
  const std::string insert = fmt::format("INSERT INTO {} (id, t) VALUES (?, ?)", table_);
  // A duplicate key in the middle: outside a transaction, the whole batch is undone.
  std::vector<SqlRow> rows = {{std::int64_t{1}, std::string("a")},
                              {std::int64_t{2}, std::string("b")},
                              {std::int64_t{1}, std::string("c")},
                              {std::int64_t{3}, std::string("d")}};
  EXPECT_THROW(db_->ExecuteMany(insert, rows), SqlUniqueViolation);
  EXPECT_EQ(Count(*db_), 0);
  // A NUL byte PostgreSQL cannot store fails the batch rather than truncating silently.
  rows = {{std::int64_t{1}, std::string("a")}, {std::int64_t{2}, std::string("b\0c", 3)}};
  try {
    db_->ExecuteMany(insert, rows);
    ADD_FAILURE() << "no exception";
  } catch (const SqlError& e) {
    EXPECT_THAT(e.what(), HasSubstr("row 2: parameter 2 holds a NUL byte"));
  }
  EXPECT_EQ(Count(*db_), 0);
  EXPECT_THROW(db_->Execute(insert, {std::int64_t{5}, std::string("x\0y", 3)}), SqlError);
  // The connection is fine afterwards.
  db_->ExecuteMany(insert, {{std::int64_t{1}, std::string("a")}});
  EXPECT_EQ(Count(*db_), 1);
}

TEST_F(PostgresConnectionTest, TransactionsCommitAndRollBack) {
  db_->Execute(fmt::format("CREATE TABLE {} (id BIGINT PRIMARY KEY)", table_));
  const std::string insert = fmt::format("INSERT INTO {} (id) VALUES (?)", table_);
  db_->BeginWrite();
  db_->Execute(insert, {std::int64_t{1}});
  db_->ExecuteMany(insert, {{std::int64_t{2}}, {std::int64_t{3}}});
  db_->Rollback();
  EXPECT_EQ(Count(*db_), 0);

  db_->BeginWrite();
  db_->ExecuteMany(insert, {{std::int64_t{2}}, {std::int64_t{3}}});
  db_->Commit();
  EXPECT_EQ(Count(*db_), 2);

  // A failed statement dooms the transaction: COMMIT says so instead of pretending.
  db_->BeginWrite();
  db_->Execute(insert, {std::int64_t{4}});
  EXPECT_THROW(db_->Execute(insert, {std::int64_t{2}}), SqlUniqueViolation);
  EXPECT_THROW(db_->Commit(), SqlError);
  EXPECT_EQ(Count(*db_), 2);

  // A read transaction cannot write.
  db_->BeginRead();
  EXPECT_THROW(db_->Execute(insert, {std::int64_t{9}}), SqlError);
  db_->Rollback();
}

TEST_F(PostgresConnectionTest, UniqueViolationIsTyped) {
  db_->Execute(fmt::format("CREATE TABLE {} (id BIGINT PRIMARY KEY, name TEXT UNIQUE)", table_));
  const std::string insert = fmt::format("INSERT INTO {} (id, name) VALUES (?, ?)", table_);
  db_->Execute(insert, {std::int64_t{1}, std::string("a")});
  try {
    db_->Execute(insert, {std::int64_t{2}, std::string("a")});
    ADD_FAILURE() << "no exception";
  } catch (const SqlUniqueViolation& e) {
    EXPECT_THAT(e.what(), StartsWith(db_->name() + ": INSERT INTO " + table_));
    EXPECT_THAT(e.what(), HasSubstr("duplicate key value violates unique constraint"));
    EXPECT_THAT(e.what(), Not(HasSubstr("\n")));
  }
  EXPECT_EQ(Count(*db_), 1);
}

TEST_F(PostgresConnectionTest, ErrorsAreOneLineNamingTheDatabase) {
  try {
    db_->Execute("SELEC 1");
    ADD_FAILURE() << "no exception";
  } catch (const SqlError& e) {
    EXPECT_EQ(std::string(e.what()), db_->name() + ": SELEC 1: syntax error at or near \"SELEC\"");
  }
  db_->ExecuteScript(
      fmt::format("CREATE TABLE {0} (id BIGINT); INSERT INTO {0} VALUES (1); INSERT INTO {0} VALUES (2)", table_));
  EXPECT_EQ(Count(*db_), 2);
  EXPECT_THROW(db_->ExecuteScript(fmt::format("INSERT INTO {0} VALUES (3); SELECT * FROM no_such_table", table_)),
               SqlError);
  EXPECT_EQ(Count(*db_), 2);  // a script is one transaction
  EXPECT_EQ(db_->dialect(), SqlDialect::kPostgres);
}

TEST_F(PostgresConnectionTest, NameHidesThePassword) {
  // Trust authentication ignores the password, so the connection succeeds.
  std::string with_password = url_;
  with_password.insert(with_password.find('@'), ":s3cret");
  with_password += "?password=s3cret&application_name=pgconn";
  const auto db = OpenPostgres(with_password);
  EXPECT_EQ(db->name(), url_ + "?application_name=pgconn");
  EXPECT_EQ(std::get<std::string>(db->Query("SELECT current_setting('application_name')").at(0).at(0)), "pgconn");
  EXPECT_EQ(std::get<std::string>(db_->Query("SELECT current_setting('application_name')").at(0).at(0)), "dltune");
}

TEST_F(PostgresConnectionTest, UnreachableServerFailsFastWithoutThePassword) {
  // Port 1 on localhost refuses; 192.0.2.1 (TEST-NET-1) never answers, so connect_timeout ends the wait.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"postgresql://alice:s3cret@127.0.0.1:1/dltune_test", "postgresql://alice@127.0.0.1:1/dltune_test"},
      {"postgresql://alice@192.0.2.1:5432/db?connect_timeout=1&password=s3cret",
       "postgresql://alice@192.0.2.1:5432/db?connect_timeout=1"},
      {"host=127.0.0.1 port=1 user=alice password='s3 cret' dbname=db", "host=127.0.0.1 port=1 user=alice dbname=db"},
      {"postgresql://alice:s3cret@127.0.0.1:notaport/db", "postgresql://alice@127.0.0.1:notaport/db"},
  };
  for (const auto& [uri, name] : cases) {
    SCOPED_TRACE(uri);
    const auto start = std::chrono::steady_clock::now();
    try {
      OpenPostgres(uri);
      ADD_FAILURE() << "no exception";
    } catch (const SqlError& e) {
      EXPECT_THAT(e.what(), StartsWith(name + ": cannot connect: "));
      EXPECT_THAT(e.what(), Not(HasSubstr("s3")));
      EXPECT_THAT(e.what(), Not(HasSubstr("\n")));
    }
    EXPECT_LT(Seconds(start), 5.0);
  }
}

TEST_F(PostgresConnectionTest, ConnectionsSeeEachOthersCommittedWrites) {
  db_->Execute(fmt::format("CREATE TABLE {} (id BIGINT PRIMARY KEY)", table_));
  const auto other = OpenPostgres(url_);
  const std::string insert = fmt::format("INSERT INTO {} (id) VALUES (?)", table_);
  db_->BeginWrite();
  db_->Execute(insert, {std::int64_t{1}});
  EXPECT_EQ(Count(*other), 0);  // not committed yet
  db_->Commit();
  EXPECT_EQ(Count(*other), 1);
  other->Execute(insert, {std::int64_t{2}});
  EXPECT_EQ(Count(*db_), 2);

  // A read transaction is a snapshot.
  db_->BeginRead();
  EXPECT_EQ(Count(*db_), 2);
  other->Execute(insert, {std::int64_t{3}});
  EXPECT_EQ(Count(*db_), 2);
  db_->Commit();
  EXPECT_EQ(Count(*db_), 3);
}

TEST_F(PostgresConnectionTest, DeadlockIsAConflict) {
  db_->Execute(fmt::format("CREATE TABLE {} (id BIGINT PRIMARY KEY, v BIGINT)", table_));
  db_->Execute(fmt::format("INSERT INTO {} (id, v) VALUES (1, 0), (2, 0)", table_));
  const auto other = OpenPostgres(url_);
  const std::string update = fmt::format("UPDATE {} SET v = v + 1 WHERE id = ?", table_);
  for (SqlConnection* db : {db_.get(), other.get()}) db->Execute("SET deadlock_timeout = '100ms'");
  db_->BeginWrite();
  other->BeginWrite();
  db_->Execute(update, {std::int64_t{1}});
  other->Execute(update, {std::int64_t{2}});
  // Each now waits for the other's row; the server aborts one of them.
  auto waiting = std::async(std::launch::async, [&] {
    try {
      other->Execute(update, {std::int64_t{1}});
      other->Commit();
      return false;
    } catch (const SqlConflictError&) {
      other->Rollback();
      return true;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  bool conflicts = false;
  try {
    db_->Execute(update, {std::int64_t{2}});
    db_->Commit();
  } catch (const SqlConflictError&) {
    db_->Rollback();
    conflicts = true;
  }
  conflicts = waiting.get() != conflicts;  // exactly one of the two lost
  EXPECT_TRUE(conflicts);
}

TEST_F(PostgresConnectionTest, ReconnectsBetweenTransactions) {
  const auto other = OpenPostgres(url_);
  const auto pid = std::get<std::int64_t>(db_->Query("SELECT pg_backend_pid()").at(0).at(0));
  other->Execute("SELECT pg_terminate_backend(?::int, 5000)", {pid});
  EXPECT_THROW(db_->Query("SELECT 1"), SqlError);  // the statement that finds the connection gone fails
  EXPECT_EQ(db_->Query("SELECT 1").at(0).at(0), SqlValue(std::int64_t{1}));
  EXPECT_NE(db_->Query("SELECT pg_backend_pid()").at(0).at(0), SqlValue(pid));
  EXPECT_EQ(db_->Query("SELECT ?", {0.1}).at(0).at(0), SqlValue(0.1));

  // Also when a pipeline finds it gone.
  db_->Execute(fmt::format("CREATE TABLE {} (id BIGINT PRIMARY KEY)", table_));
  other->Execute("SELECT pg_terminate_backend(?::int, 5000)",
                 {std::get<std::int64_t>(db_->Query("SELECT pg_backend_pid()").at(0).at(0))});
  const std::string insert = fmt::format("INSERT INTO {} (id) VALUES (?)", table_);
  EXPECT_THROW(db_->ExecuteMany(insert, {{std::int64_t{1}}, {std::int64_t{2}}}), SqlError);
  db_->ExecuteMany(insert, {{std::int64_t{1}}, {std::int64_t{2}}});
  EXPECT_EQ(Count(*db_), 2);

  // Inside a transaction the loss is reported, and COMMIT does not pretend.
  db_->BeginWrite();
  other->Execute("SELECT pg_terminate_backend(?::int, 5000)",
                 {std::get<std::int64_t>(db_->Query("SELECT pg_backend_pid()").at(0).at(0))});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_THROW(db_->Query("SELECT 1"), SqlError);
  EXPECT_THROW(db_->Query("SELECT 1"), SqlError);
  EXPECT_THROW(db_->Commit(), SqlError);
  EXPECT_EQ(db_->Query("SELECT 1").at(0).at(0), SqlValue(std::int64_t{1}));
}

}  // namespace
}  // namespace dltune::internal
