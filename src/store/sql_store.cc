// The Store, written once over SqlConnection: every backend runs this logic and this SQL (with `{now}` and
// `{skip_locked}` filled in per dialect).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "core/strings.h"
#include "dltune/store/store.h"
#include "schema.h"
#include "sql_store.h"

namespace dltune::internal {
namespace {

constexpr int kConflictRetries = 20;

std::int64_t AsInt(const SqlValue& value) {
  if (const auto* integer = std::get_if<std::int64_t>(&value)) return *integer;
  if (const auto* real = std::get_if<double>(&value)) return static_cast<std::int64_t>(*real);
  return 0;
}
std::optional<std::int64_t> AsOptionalInt(const SqlValue& value) {
  if (std::holds_alternative<std::monostate>(value)) return std::nullopt;
  return AsInt(value);
}
double AsDouble(const SqlValue& value) {
  if (const auto* real = std::get_if<double>(&value)) return *real;
  if (const auto* integer = std::get_if<std::int64_t>(&value)) return static_cast<double>(*integer);
  return 0;
}
std::optional<double> AsOptionalDouble(const SqlValue& value) {
  if (std::holds_alternative<std::monostate>(value)) return std::nullopt;
  return AsDouble(value);
}
std::string AsText(const SqlValue& value) {
  if (const auto* text = std::get_if<std::string>(&value)) return *text;
  return {};
}

template <typename T>
SqlValue Optional(const std::optional<T>& value) {
  if (!value) return std::monostate{};
  if constexpr (std::is_same_v<T, bool>) {
    return std::int64_t{*value ? 1 : 0};
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<std::int64_t>(*value);
  } else {
    return static_cast<double>(*value);
  }
}

// 12 hex digits from the system's entropy source: two studies (in one store or in two) never share trial
// directories.
std::string NewStudyUid() {
  std::random_device entropy;
  const std::uint64_t bits = (static_cast<std::uint64_t>(entropy()) << 32) ^ entropy();
  return fmt::format("{:012x}", bits & 0xffffffffffffULL);
}

std::string ParamsToJson(const Assignment& params) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [id, value] : params) object[id] = ValueToJson(value);
  return object.dump();
}

// A state's name as an SQL string literal (names are plain lowercase words).
std::string StateLiteral(TrialState state) { return fmt::format("'{}'", TrialStateName(state)); }

// "state = 'pending'" or "state IN ('a', 'b')": the trials `transition` moves from.
std::string FromCondition(TrialTransition transition) {
  const auto& from = TransitionRule(transition).from;
  if (from.size() == 1) return "state = " + StateLiteral(from.front());
  std::vector<std::string> literals;
  literals.reserve(from.size());
  for (const TrialState state : from) literals.push_back(StateLiteral(state));
  return fmt::format("state IN ({})", fmt::join(literals, ", "));
}

// "state = 'running'": the one state `transition` moves trials to.
std::string TargetAssignment(TrialTransition transition) {
  return "state = " + StateLiteral(TransitionRule(transition).Target());
}

Assignment ParamsFromJson(const std::string& text) {
  Assignment params;
  const auto object = nlohmann::json::parse(text, nullptr, false);
  if (!object.is_object()) return params;
  for (const auto& [id, value] : object.items()) {
    if (auto parsed = ValueFromJson(value)) params[id] = std::move(*parsed);
  }
  return params;
}

constexpr const char* kStudyColumns =
    "id, name, description, spec_text, spec_hash, spec_path, command_line, dltune_version, git_commit, created_at, "
    "updated_at, uid, parent, git_dirty, reproduction";

StudyRecord StudyFromRow(const SqlRow& row) {
  StudyRecord study;
  study.id = AsInt(row[0]);
  study.name = AsText(row[1]);
  study.description = AsText(row[2]);
  study.spec_text = AsText(row[3]);
  study.spec_hash = AsText(row[4]);
  study.spec_path = AsText(row[5]);
  study.command_line = AsText(row[6]);
  study.dltune_version = AsText(row[7]);
  study.git_commit = AsText(row[8]);
  study.created_at = AsDouble(row[9]);
  study.updated_at = AsDouble(row[10]);
  study.uid = AsText(row[11]);
  study.parent = AsText(row[12]);
  if (const auto dirty = AsOptionalInt(row[13])) study.git_dirty = *dirty != 0;
  study.reproduction = AsText(row[14]);
  return study;
}

constexpr const char* kTrialColumns =
    "id, study_id, number, substudy, substudy_label, params, seed, state, worker, heartbeat_at, started_at, ended_at, "
    "reason, retries, best_step, best_value, final_value, exit_status, stderr_tail, configuration, replica, "
    "time_split, resources";

// A time split as the trials table keeps it: a JSON object of seconds by phase; anything else reads as empty.
TimeSplit TimeSplitFromJson(const std::string& text) {
  TimeSplit split;
  const auto object = nlohmann::json::parse(text, nullptr, false);
  if (!object.is_object()) return split;
  for (const auto& [phase, seconds] : object.items()) {
    if (seconds.is_number()) split[phase] = seconds.get<double>();
  }
  return split;
}

std::string TimeSplitToJson(const TimeSplit& split) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [phase, seconds] : split) {
    if (std::isfinite(seconds)) object[phase] = seconds;
  }
  return object.dump();
}

// Resources as the trials table keeps them: a JSON object, compact; anything else is refused.
std::string ResourcesJson(const std::string& text) {
  const auto object = nlohmann::json::parse(text, nullptr, false);
  if (!object.is_object()) throw Error("a trial's resources must be a JSON object, not: " + text.substr(0, 80));
  return object.dump();
}

TrialRecord TrialFromRow(const SqlRow& row) {
  TrialRecord trial;
  trial.id = AsInt(row[0]);
  trial.study_id = AsInt(row[1]);
  trial.number = static_cast<std::uint64_t>(AsInt(row[2]));
  trial.substudy = static_cast<std::size_t>(AsInt(row[3]));
  trial.substudy_label = AsText(row[4]);
  trial.params = ParamsFromJson(AsText(row[5]));
  trial.seed = static_cast<std::uint64_t>(AsInt(row[6]));
  trial.state = ParseTrialState(AsText(row[7])).value_or(TrialState::kFailed);
  trial.worker = AsText(row[8]);
  trial.heartbeat_at = AsOptionalDouble(row[9]);
  trial.started_at = AsOptionalDouble(row[10]);
  trial.ended_at = AsOptionalDouble(row[11]);
  trial.reason = AsText(row[12]);
  trial.retries = static_cast<int>(AsInt(row[13]));
  trial.best_step = AsOptionalInt(row[14]);
  trial.best_value = AsOptionalDouble(row[15]);
  trial.final_value = AsOptionalDouble(row[16]);
  if (const auto status = AsOptionalInt(row[17])) trial.exit_status = static_cast<int>(*status);
  trial.stderr_tail = AsText(row[18]);
  trial.configuration = static_cast<std::uint64_t>(AsInt(row[19]));
  trial.replica = static_cast<std::uint64_t>(AsInt(row[20]));
  trial.time_split = TimeSplitFromJson(AsText(row[21]));
  trial.resources = AsText(row[22]);
  return trial;
}

}  // namespace

SqlStore::SqlStore(std::unique_ptr<SqlConnection> connection, std::string url, bool read_only)
    : connection_(std::move(connection)), url_(std::move(url)) {
  const bool sqlite = connection_->dialect() == SqlDialect::kSqlite;
  now_ = sqlite ? "((julianday('now') - 2440587.5) * 86400.0)" : "extract(epoch from clock_timestamp())::float8";
  skip_locked_ = sqlite ? "" : "FOR UPDATE SKIP LOCKED";
  if (!read_only) {
    Migrate(*connection_, kStoreSchemaVersion);
    keeper_ = std::make_unique<LeaseKeeper>(
        [connection = connection_.get(), url = url_] {
          std::unique_ptr<SqlConnection> another = connection->OpenAnother();
          if (!another) throw Error(url + ": no second connection to keep leases alive on");
          return another;
        },
        now_);
    return;
  }
  const int version = SchemaVersion();
  if (version == 0) throw Error(fmt::format("{}: not a dltune store (it has no dltune tables)", url_));
  if (version > kStoreSchemaVersion) {
    throw Error(
        fmt::format("{}: the store was written by a newer dltune (schema version {}; this dltune knows up to "
                    "{}); upgrade dltune to use it",
                    url_, version, kStoreSchemaVersion));
  }
  if (version < kStoreSchemaVersion) {
    throw StaleSchemaError(
        fmt::format("{}: the store was written by an older dltune (schema version {}); a command "
                    "that writes (dltune run, dltune worker) upgrades it to version {}",
                    url_, version, kStoreSchemaVersion));
  }
}

std::string SqlStore::Sql(const std::string& text) const {
  return fmt::format(fmt::runtime(text), fmt::arg("now", now_), fmt::arg("skip_locked", skip_locked_));
}

template <typename F>
auto SqlStore::Transaction(bool write, F&& body) -> decltype(body()) {
  for (int attempt = 0;; ++attempt) {
    try {
      write ? connection_->BeginWrite() : connection_->BeginRead();
      if constexpr (std::is_void_v<decltype(body())>) {
        body();
        connection_->Commit();
        return;
      } else {
        auto result = body();
        connection_->Commit();
        return result;
      }
    } catch (const SqlConflictError&) {
      connection_->Rollback();
      if (attempt >= kConflictRetries) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * (attempt + 1)));
    } catch (const SqlUnavailableError& e) {
      try {
        connection_->Rollback();
      } catch (const SqlError&) {
        // The database is gone: so is the transaction.
      }
      throw StoreUnavailableError(e.what());
    } catch (...) {
      connection_->Rollback();
      throw;
    }
  }
}

std::string SqlStore::url() const { return url_; }

int SqlStore::SchemaVersion() {
  return Transaction(false, [&] { return ReadSchemaVersion(*connection_); });
}

StudyRecord SqlStore::CreateStudy(const NewStudy& study) {
  if (study.name.empty()) throw Error("a study needs a name");
  return Transaction(true, [&] {
    try {
      const auto rows = connection_->Query(
          Sql("INSERT INTO studies (name, uid, description, spec_text, spec_hash, spec_path, command_line, "
              "dltune_version, git_commit, git_dirty, parent, reproduction, git_patch, created_at, updated_at) "
              "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {now}, {now}) RETURNING ") +
              kStudyColumns,
          {study.name, NewStudyUid(), study.description, study.spec_text, study.spec_hash, study.spec_path,
           study.command_line, study.dltune_version, study.git_commit, Optional(study.git_dirty), study.parent,
           study.reproduction, study.git_patch});
      // The parent's page lists the studies planned from it: it changed too.
      if (!study.parent.empty()) {
        connection_->Execute(Sql("UPDATE studies SET updated_at = {now} WHERE name = ?"), {study.parent});
      }
      StudyRecord created = StudyFromRow(rows.front());
      study_names_[created.id] = created.name;
      return created;
    } catch (const SqlUniqueViolation&) {
      throw Error(fmt::format("{}: a study named '{}' already exists", url_, study.name));
    }
  });
}

std::optional<StudyRecord> SqlStore::FindStudy(const std::string& name) {
  return Transaction(false, [&]() -> std::optional<StudyRecord> {
    const auto rows =
        connection_->Query(std::string("SELECT ") + kStudyColumns + " FROM studies WHERE name = ?", {name});
    if (rows.empty()) return std::nullopt;
    StudyRecord found = StudyFromRow(rows.front());
    study_names_[found.id] = found.name;
    return found;
  });
}

std::string SqlStore::StudyPatch(std::int64_t study_id) {
  return Transaction(false, [&] {
    const auto rows = connection_->Query("SELECT git_patch FROM studies WHERE id = ?", {study_id});
    if (rows.empty()) throw Error(fmt::format("{}: no study with id {}", url_, study_id));
    return AsText(rows.front()[0]);
  });
}

std::vector<StudyRecord> SqlStore::ListStudies() {
  return Transaction(false, [&] {
    std::vector<StudyRecord> studies;
    for (const auto& row :
         connection_->Query(std::string("SELECT ") + kStudyColumns + " FROM studies ORDER BY created_at, id")) {
      studies.push_back(StudyFromRow(row));
      study_names_[studies.back().id] = studies.back().name;
    }
    return studies;
  });
}

void SqlStore::AddTrials(std::int64_t study_id, const std::vector<NewTrial>& trials) {
  Transaction(true, [&] {
    RequireStudy(study_id);
    std::vector<SqlRow> rows;
    rows.reserve(trials.size());
    for (const auto& trial : trials) {
      rows.push_back({study_id, static_cast<std::int64_t>(trial.number), static_cast<std::int64_t>(trial.substudy),
                      trial.substudy_label, ParamsToJson(trial.params), static_cast<std::int64_t>(trial.seed),
                      static_cast<std::int64_t>(trial.configuration), static_cast<std::int64_t>(trial.replica)});
    }
    try {
      connection_->ExecuteMany(
          "INSERT INTO trials (study_id, number, substudy, substudy_label, params, seed, configuration, replica, "
          "state) VALUES (?, ?, ?, ?, ?, ?, ?, ?, " +
              StateLiteral(TransitionRule(TrialTransition::kCreate).Target()) + ")",
          rows);
    } catch (const SqlUniqueViolation&) {
      throw Error(fmt::format("{}: the study already has a trial with one of these numbers", url_));
    }
    CountMove(study_id, TrialTransition::kCreate, TrialState::kPending, static_cast<std::int64_t>(trials.size()));
    TouchStudy(study_id);
  });
}

void SqlStore::CountMove(std::int64_t study_id, TrialTransition transition, TrialState to_state, std::int64_t count) {
  const TrialTransitionRule& rule = TransitionRule(transition);
  if (rule.from.size() > 1 || !rule.Reaches(to_state)) {
    throw Error(
        fmt::format("the trial transition '{}' does not move trials to {}", rule.name, TrialStateName(to_state)));
  }
  const std::string from = rule.from.empty() ? "" : TrialStateName(rule.from.front());
  const std::string to = TrialStateName(to_state);
  if (count == 0 || from == to) return;
  for (const auto& [state, delta] : {std::pair{from, -count}, std::pair{to, count}}) {
    if (state.empty()) continue;
    connection_->Execute(
        "INSERT INTO trial_counts (study_id, state, count) VALUES (?, ?, ?) "
        "ON CONFLICT (study_id, state) DO UPDATE SET count = trial_counts.count + excluded.count",
        {study_id, state, delta});
  }
}

void SqlStore::TouchStudy(std::int64_t study_id) {
  connection_->Execute(Sql("UPDATE studies SET updated_at = {now} WHERE id = ?"), {study_id});
}

std::vector<TrialRecord> SqlStore::ListTrials(std::int64_t study_id) {
  return Transaction(false, [&] {
    std::vector<TrialRecord> trials;
    for (const auto& row : connection_->Query(
             std::string("SELECT ") + kTrialColumns + " FROM trials WHERE study_id = ? ORDER BY number", {study_id})) {
      trials.push_back(TrialFromRow(row));
    }
    return trials;
  });
}

std::optional<TrialRecord> SqlStore::FindTrial(std::int64_t study_id, std::uint64_t number) {
  return Transaction(false, [&]() -> std::optional<TrialRecord> {
    const auto rows =
        connection_->Query(std::string("SELECT ") + kTrialColumns + " FROM trials WHERE study_id = ? AND number = ?",
                           {study_id, static_cast<std::int64_t>(number)});
    if (rows.empty()) return std::nullopt;
    return TrialFromRow(rows.front());
  });
}

TrialCounts SqlStore::CountTrials(std::int64_t study_id) {
  return Transaction(false, [&] {
    TrialCounts counts;
    for (const auto& row : connection_->Query("SELECT state, count FROM trial_counts WHERE study_id = ?", {study_id})) {
      const std::int64_t count = AsInt(row[1]);
      if (const auto state = ParseTrialState(AsText(row[0]))) counts.by_state[static_cast<std::size_t>(*state)] = count;
      counts.made += count;
    }
    const auto max = connection_->Query("SELECT MAX(number) FROM trials WHERE study_id = ?", {study_id});
    if (const auto number = AsOptionalInt(max.front().front())) counts.max_number = static_cast<std::uint64_t>(*number);
    return counts;
  });
}

std::vector<TrialRecord> SqlStore::ListTrialsInState(std::int64_t study_id, TrialState state, std::size_t limit) {
  return Transaction(false, [&] {
    std::vector<TrialRecord> trials;
    const std::string sql = std::string("SELECT ") + kTrialColumns +
                            " FROM trials WHERE study_id = ? AND state = ? ORDER BY number" +
                            (limit > 0 ? " LIMIT " + std::to_string(limit) : "");
    for (const auto& row : connection_->Query(sql, {study_id, TrialStateName(state)})) {
      trials.push_back(TrialFromRow(row));
    }
    return trials;
  });
}

std::vector<TrialRecord> SqlStore::BestTrials(std::int64_t study_id, Direction direction, std::size_t limit,
                                              bool per_substudy) {
  const bool ascending = direction == Direction::kMinimize;
  // Every read below walks an index (trials_by_best, trials_by_substudy_best) a few rows deep: the cost does not
  // grow with the study.
  return Transaction(false, [&] {
    const std::string completed =
        "study_id = ? AND state = " + StateLiteral(TrialState::kCompleted) + " AND best_value IS NOT NULL";
    std::vector<TrialRecord> trials;
    if (!per_substudy) {
      // Descending by value and number reads the index backwards; ties go back to the lower number below.
      const std::string order = ascending ? "best_value ASC, number ASC" : "best_value DESC, number DESC";
      for (const auto& row : connection_->Query(fmt::format("SELECT {} FROM trials WHERE {} ORDER BY {} LIMIT {}",
                                                            kTrialColumns, completed, order, limit),
                                                {study_id})) {
        trials.push_back(TrialFromRow(row));
      }
      std::stable_sort(trials.begin(), trials.end(), [&](const TrialRecord& a, const TrialRecord& b) {
        if (*a.best_value != *b.best_value) return IsBetter(*a.best_value, *b.best_value, direction);
        return a.number < b.number;
      });
      return trials;
    }
    // Sub-study by sub-study: the next one with a completed trial, then its best (the lowest number among ties).
    const std::string next_substudy =
        fmt::format("SELECT MIN(substudy) FROM trials WHERE {} AND substudy > ?", completed);
    const std::string best_of = fmt::format(
        "SELECT {0} FROM trials WHERE {1} AND substudy = ? AND best_value = (SELECT best_value FROM trials WHERE {1} "
        "AND substudy = ? ORDER BY best_value {2} LIMIT 1) ORDER BY number LIMIT 1",
        kTrialColumns, completed, ascending ? "ASC" : "DESC");
    std::int64_t after = -1;
    while (trials.size() < limit) {
      const auto next = AsOptionalInt(connection_->Query(next_substudy, {study_id, after}).front().front());
      if (!next) break;
      const auto rows = connection_->Query(best_of, {study_id, *next, study_id, *next});
      if (!rows.empty()) trials.push_back(TrialFromRow(rows.front()));
      after = *next;
    }
    return trials;
  });
}

std::optional<std::pair<TrialRecord, TrialLease>> SqlStore::ClaimNext(std::int64_t study_id, const std::string& worker,
                                                                      std::optional<std::size_t> substudy) {
  if (worker.empty()) throw Error("a worker needs a non-empty id to claim trials");
  return Transaction(true, [&]() -> std::optional<std::pair<TrialRecord, TrialLease>> {
    // SQLite holds the write lock for the whole transaction; PostgreSQL skips rows other claimers have locked.
    const auto rows =
        connection_->Query(Sql("UPDATE trials SET " + TargetAssignment(TrialTransition::kClaim) +
                               ", worker = ?, heartbeat_at = {now}, started_at = COALESCE(started_at, {now}) "
                               "WHERE id = (SELECT id FROM trials WHERE study_id = ? AND " +
                               FromCondition(TrialTransition::kClaim) + (substudy ? " AND substudy = ?" : "") +
                               " ORDER BY number LIMIT 1 {skip_locked}) RETURNING ") +
                               kTrialColumns,
                           substudy ? std::vector<SqlValue>{worker, study_id, static_cast<std::int64_t>(*substudy)}
                                    : std::vector<SqlValue>{worker, study_id});
    if (rows.empty()) {
      RequireStudy(study_id);  // none pending, or no study any more
      return std::nullopt;
    }
    CountMove(study_id, TrialTransition::kClaim, TrialState::kRunning);
    TouchStudy(study_id);
    TrialRecord trial = TrialFromRow(rows.front());
    TrialLease lease{trial.id, worker};
    return std::make_pair(std::move(trial), std::move(lease));
  });
}

// Locks the leased trial's row for the rest of the transaction; throws LeaseLostError unless the worker still
// holds it. Returns the study id.
std::int64_t SqlStore::CheckLease(const TrialLease& lease) {
  const auto rows = connection_->Query(std::string("SELECT study_id, state, worker, number FROM trials WHERE id = ?") +
                                           (connection_->dialect() == SqlDialect::kPostgres ? " FOR UPDATE" : ""),
                                       {lease.trial_id});
  if (rows.empty()) {
    throw LeaseLostError(fmt::format("{}: trial id {} does not exist: its study was deleted", url_, lease.trial_id));
  }
  const std::string state = AsText(rows.front()[1]);
  const std::string holder = AsText(rows.front()[2]);
  const bool running = state == TrialStateName(TrialState::kRunning);
  if (!running || holder != lease.worker) {
    throw LeaseLostError(fmt::format("{}: trial {} is {}{} and no longer held by worker '{}'", url_,
                                     AsInt(rows.front()[3]), state, running ? " by worker '" + holder + "'" : "",
                                     lease.worker));
  }
  return AsInt(rows.front()[0]);
}

void SqlStore::RequireStudy(std::int64_t study_id) {
  if (!connection_->Query("SELECT id FROM studies WHERE id = ?", {study_id}).empty()) return;
  const auto name = study_names_.find(study_id);
  throw StudyDeletedError(
      fmt::format("{}: study {} was deleted (dltune delete) while this command was using it; its records are gone",
                  url_, name != study_names_.end() ? "'" + name->second + "'" : "id " + std::to_string(study_id)));
}

void SqlStore::Heartbeat(const TrialLease& lease) {
  Transaction(true, [&] {
    CheckLease(lease);
    connection_->Execute(Sql("UPDATE trials SET heartbeat_at = {now} WHERE id = ?"), {lease.trial_id});
  });
  if (keeper_) keeper_->Stamped(lease.trial_id);
}

namespace {

// What KeepAlive returns where no lease is kept.
class NotKept final : public KeptLease {};

}  // namespace

std::unique_ptr<KeptLease> SqlStore::KeepAlive(const TrialLease& lease, double every_seconds) {
  if (!keeper_) return std::make_unique<NotKept>();
  return keeper_->Keep(lease, every_seconds);
}

void SqlStore::Record(const TrialLease& lease, const MeasurementBatch& batch) {
  if (batch.best_step.has_value() != batch.best_value.has_value()) {
    throw Error("a measurement batch sets best_step and best_value together or neither");
  }
  Transaction(true, [&] {
    const std::int64_t study_id = CheckLease(lease);
    if (!batch.train.empty()) {
      std::vector<SqlRow> rows;
      rows.reserve(batch.train.size());
      for (const auto& m : batch.train) {
        rows.push_back({lease.trial_id, m.step, Optional(m.loss), Optional(m.learning_rate), Optional(m.grad_norm),
                        Optional(m.clipped), Optional(m.step_time), Optional(m.data_wait),
                        Optional(m.examples_per_second)});
      }
      connection_->ExecuteMany(
          "INSERT INTO train_measurements (trial_id, step, loss, learning_rate, grad_norm, clipped, step_time, "
          "data_wait, examples_per_second) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (trial_id, step) DO UPDATE SET loss = excluded.loss, learning_rate = excluded.learning_rate, "
          "grad_norm = excluded.grad_norm, clipped = excluded.clipped, step_time = excluded.step_time, "
          "data_wait = excluded.data_wait, examples_per_second = excluded.examples_per_second",
          rows);
    }
    if (!batch.evals.empty()) {
      std::vector<SqlRow> rows;
      rows.reserve(batch.evals.size());
      for (const auto& e : batch.evals)
        rows.push_back({lease.trial_id, e.step, e.split, e.metric, e.value, e.examples});
      connection_->ExecuteMany(
          "INSERT INTO eval_measurements (trial_id, step, split, metric, value, examples) VALUES (?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (trial_id, step, split, metric) DO UPDATE SET value = excluded.value, "
          "examples = excluded.examples",
          rows);
    }
    if (batch.best_step) {
      connection_->Execute(Sql("UPDATE trials SET best_step = ?, best_value = ?, heartbeat_at = {now} WHERE id = ?"),
                           {*batch.best_step, *batch.best_value, lease.trial_id});
    } else {
      connection_->Execute(Sql("UPDATE trials SET heartbeat_at = {now} WHERE id = ?"), {lease.trial_id});
    }
    TouchStudy(study_id);
  });
  if (keeper_) keeper_->Stamped(lease.trial_id);
}

void SqlStore::TruncateAfter(const TrialLease& lease, std::int64_t step) {
  Transaction(true, [&] {
    CheckLease(lease);
    connection_->Execute("DELETE FROM train_measurements WHERE trial_id = ? AND step > ?", {lease.trial_id, step});
    connection_->Execute("DELETE FROM eval_measurements WHERE trial_id = ? AND step > ?", {lease.trial_id, step});
    // Checkpoints of the discarded future go with its measurements: none may stand ahead of them (a resume limit).
    connection_->Execute("DELETE FROM checkpoints WHERE trial_id = ? AND step > ?", {lease.trial_id, step});
  });
}

void SqlStore::Finish(const TrialLease& lease, const TrialOutcome& outcome) {
  if (!TransitionRule(TrialTransition::kFinish).Allows(TrialState::kRunning, outcome.state)) {
    throw Error(fmt::format("a trial cannot finish as {}", TrialStateName(outcome.state)));
  }
  Transaction(true, [&] {
    const std::int64_t study_id = CheckLease(lease);
    const bool stopped = outcome.state == TrialState::kStopped;
    // This attempt's time added to the earlier attempts'.
    TimeSplit time_split = TimeSplitFromJson(
        AsText(connection_->Query("SELECT time_split FROM trials WHERE id = ?", {lease.trial_id}).front().front()));
    for (const auto& [phase, seconds] : outcome.time_split) time_split[phase] += seconds;
    // An attempt that recorded no resources leaves the last ones that did.
    const std::string resources = outcome.resources.empty() ? "resources" : "?";
    std::vector<SqlValue> values = {TrialStateName(outcome.state),     SanitizeUtf8(outcome.reason),
                                    Optional(outcome.final_value),     Optional(outcome.exit_status),
                                    SanitizeUtf8(outcome.stderr_tail), TimeSplitToJson(time_split)};
    if (!outcome.resources.empty()) values.emplace_back(ResourcesJson(outcome.resources));
    values.emplace_back(lease.trial_id);
    connection_->Execute(
        Sql(std::string("UPDATE trials SET state = ?, reason = ?, final_value = COALESCE(?, final_value), "
                        "exit_status = ?, stderr_tail = ?, time_split = ?, resources = ") +
            resources + ", ended_at = " + (stopped ? "NULL" : "{now}") + " WHERE id = ?"),
        values);
    CountMove(study_id, TrialTransition::kFinish, outcome.state);
    TouchStudy(study_id);
  });
}

std::vector<ReclaimedTrial> SqlStore::ReclaimStale(std::int64_t study_id, double grace_seconds, int max_retries) {
  return Reclaim(study_id, "(heartbeat_at IS NULL OR heartbeat_at < {now} - ?)", grace_seconds, "stopped heartbeating",
                 max_retries);
}

std::vector<ReclaimedTrial> SqlStore::ReclaimWorker(std::int64_t study_id, const std::string& worker) {
  return Reclaim(study_id, "worker = ?", worker, "is gone", std::nullopt);
}

std::vector<ReclaimedTrial> SqlStore::Reclaim(std::int64_t study_id, const std::string& condition,
                                              const SqlValue& condition_arg, const std::string& why,
                                              std::optional<int> max_retries) {
  return Transaction(true, [&] {
    RequireStudy(study_id);
    const auto stale = connection_->Query(
        Sql("SELECT id, number, worker, retries, furthest_step, "
            "(SELECT MAX(step) FROM train_measurements m WHERE m.trial_id = trials.id) "
            "FROM trials WHERE study_id = ? AND " +
            FromCondition(TrialTransition::kReclaim) + " AND " + condition + " ORDER BY number {skip_locked}"),
        {study_id, condition_arg});
    std::vector<ReclaimedTrial> reclaimed;
    for (const auto& row : stale) {
      const std::int64_t furthest = AsOptionalInt(row[4]).value_or(-1);
      const std::int64_t reached = AsOptionalInt(row[5]).value_or(-1);
      // Only a worker lost before the trial got any further counts against the trial (it may be what kills it).
      const bool counted = max_retries && reached <= furthest;
      const int retries = static_cast<int>(AsInt(row[3])) + (counted ? 1 : 0);
      const std::string worker = AsText(row[2]);
      const bool give_up = counted && retries > *max_retries;
      const std::string reason =
          give_up ? fmt::format("worker '{}' {} {} times without the trial getting further; the limit is {}", worker,
                                why, retries, *max_retries)
          : counted
              ? fmt::format("worker '{}' {} before the trial got further; retry {} of {}", worker, why, retries,
                            *max_retries)
              : fmt::format("worker '{}' {} at step {}; it resumes from its latest checkpoint", worker, why, reached);
      const TrialState target = give_up ? TrialState::kFailed : TrialState::kPending;
      connection_->Execute(
          Sql(std::string("UPDATE trials SET state = ?, retries = ?, reason = ?, furthest_step = ?, worker = ") +
              (give_up ? "worker, ended_at = {now}" : "''") + " WHERE id = ?"),
          {TrialStateName(target), std::int64_t{retries}, reason, std::max(furthest, reached), AsInt(row[0])});
      reclaimed.push_back({static_cast<std::uint64_t>(AsInt(row[1])), worker, target, counted});
      CountMove(study_id, TrialTransition::kReclaim, target);
    }
    if (!reclaimed.empty()) TouchStudy(study_id);
    return reclaimed;
  });
}

int SqlStore::ResumeStopped(std::int64_t study_id) {
  return Transaction(true, [&] {
    RequireStudy(study_id);
    const auto rows = connection_->Query("UPDATE trials SET " + TargetAssignment(TrialTransition::kResume) +
                                             ", worker = '' WHERE study_id = ? AND " +
                                             FromCondition(TrialTransition::kResume) + " RETURNING id",
                                         {study_id});
    CountMove(study_id, TrialTransition::kResume, TrialState::kPending, static_cast<std::int64_t>(rows.size()));
    if (!rows.empty()) TouchStudy(study_id);
    return static_cast<int>(rows.size());
  });
}

void SqlStore::ExtendStudy(std::int64_t study_id, const std::string& spec_text, const std::string& spec_hash,
                           const std::string& description) {
  Transaction(true, [&] {
    const auto rows = connection_->Query(
        Sql("UPDATE studies SET spec_text = ?, spec_hash = ?, description = ?, updated_at = {now} WHERE id = ? "
            "RETURNING id"),
        {spec_text, spec_hash, SanitizeUtf8(description), study_id});
    if (rows.empty()) throw Error(fmt::format("{}: no study with id {}", url_, study_id));
  });
}

int SqlStore::RetryFailed(std::int64_t study_id) {
  return Transaction(true, [&] {
    RequireStudy(study_id);
    const auto rows = connection_->Query("UPDATE trials SET " + TargetAssignment(TrialTransition::kRetry) +
                                             ", worker = '', ended_at = NULL, retries = 0, "
                                             "reason = 'retried after it failed: ' || reason WHERE study_id = ? AND " +
                                             FromCondition(TrialTransition::kRetry) + " RETURNING id",
                                         {study_id});
    CountMove(study_id, TrialTransition::kRetry, TrialState::kPending, static_cast<std::int64_t>(rows.size()));
    if (!rows.empty()) TouchStudy(study_id);
    return static_cast<int>(rows.size());
  });
}

namespace {

// A train_measurements row whose columns `first`.. are step, loss, learning_rate, grad_norm, clipped, step_time,
// data_wait, examples_per_second.
TrainMeasurement TrainMeasurementOf(const SqlRow& row, std::size_t first) {
  TrainMeasurement m;
  m.step = AsInt(row[first]);
  m.loss = AsOptionalDouble(row[first + 1]);
  m.learning_rate = AsOptionalDouble(row[first + 2]);
  m.grad_norm = AsOptionalDouble(row[first + 3]);
  if (const auto clipped = AsOptionalInt(row[first + 4])) m.clipped = *clipped != 0;
  m.step_time = AsOptionalDouble(row[first + 5]);
  m.data_wait = AsOptionalDouble(row[first + 6]);
  m.examples_per_second = AsOptionalDouble(row[first + 7]);
  return m;
}

}  // namespace

std::vector<TrainMeasurement> SqlStore::TrainSeries(std::int64_t trial_id) {
  return Transaction(false, [&] {
    std::vector<TrainMeasurement> series;
    for (const auto& row : connection_->Query(
             "SELECT step, loss, learning_rate, grad_norm, clipped, step_time, data_wait, examples_per_second "
             "FROM train_measurements WHERE trial_id = ? ORDER BY step",
             {trial_id})) {
      series.push_back(TrainMeasurementOf(row, 0));
    }
    return series;
  });
}

std::vector<StudyTrainRow> SqlStore::StudyTraining(std::int64_t study_id) {
  return Transaction(false, [&] {
    std::vector<StudyTrainRow> rows;
    for (const auto& row : connection_->Query(
             "SELECT t.number, m.step, m.loss, m.learning_rate, m.grad_norm, m.clipped, m.step_time, m.data_wait, "
             "m.examples_per_second FROM train_measurements m JOIN trials t ON t.id = m.trial_id "
             "WHERE t.study_id = ? ORDER BY t.number, m.step",
             {study_id})) {
      rows.push_back({static_cast<std::uint64_t>(AsInt(row[0])), TrainMeasurementOf(row, 1)});
    }
    return rows;
  });
}

std::vector<EvalMeasurement> SqlStore::EvalSeries(std::int64_t trial_id) {
  return Transaction(false, [&] {
    std::vector<EvalMeasurement> series;
    for (const auto& row :
         connection_->Query("SELECT step, split, metric, value, examples FROM eval_measurements WHERE trial_id = ? "
                            "ORDER BY step, split, metric",
                            {trial_id})) {
      series.push_back({AsInt(row[0]), AsText(row[1]), AsText(row[2]), AsDouble(row[3]), AsInt(row[4])});
    }
    return series;
  });
}

std::vector<StudyEvalRow> SqlStore::StudyEvaluations(std::int64_t study_id) {
  return Transaction(false, [&] {
    std::vector<StudyEvalRow> rows;
    for (const auto& row : connection_->Query(
             "SELECT t.number, e.step, e.split, e.metric, e.value, e.examples FROM eval_measurements e "
             "JOIN trials t ON t.id = e.trial_id WHERE t.study_id = ? ORDER BY t.number, e.step, e.split, e.metric",
             {study_id})) {
      rows.push_back({static_cast<std::uint64_t>(AsInt(row[0])),
                      {AsInt(row[1]), AsText(row[2]), AsText(row[3]), AsDouble(row[4]), AsInt(row[5])}});
    }
    return rows;
  });
}

std::int64_t SqlStore::AddCheckpoint(const TrialLease& lease, const CheckpointRecord& checkpoint) {
  return Transaction(true, [&] {
    CheckLease(lease);
    const auto rows = connection_->Query(
        Sql("INSERT INTO checkpoints (trial_id, step, path, objective, checksum, pool, deleted, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 0, {now}) RETURNING id"),
        {lease.trial_id, checkpoint.step, checkpoint.path, Optional(checkpoint.objective), checkpoint.checksum,
         CheckpointPoolName(checkpoint.pool)});
    return AsInt(rows.front().front());
  });
}

void SqlStore::MarkCheckpointDeleted(const TrialLease& lease, std::int64_t checkpoint_id) {
  Transaction(true, [&] {
    CheckLease(lease);
    connection_->Execute("UPDATE checkpoints SET deleted = 1 WHERE id = ? AND trial_id = ?",
                         {checkpoint_id, lease.trial_id});
  });
}

namespace {

constexpr const char* kCheckpointColumns =
    "c.id, c.step, c.path, c.objective, c.checksum, c.pool, c.deleted, c.created_at";

// A checkpoints row whose columns `first`.. are kCheckpointColumns.
CheckpointRecord CheckpointFromRow(const SqlRow& row, std::size_t first = 0) {
  CheckpointRecord c;
  c.id = AsInt(row[first]);
  c.step = AsInt(row[first + 1]);
  c.path = AsText(row[first + 2]);
  c.objective = AsOptionalDouble(row[first + 3]);
  c.checksum = AsText(row[first + 4]);
  c.pool = AsText(row[first + 5]) == "best" ? CheckpointPool::kBest : CheckpointPool::kLatest;
  c.deleted = AsInt(row[first + 6]) != 0;
  c.created_at = AsDouble(row[first + 7]);
  return c;
}

}  // namespace

std::vector<CheckpointRecord> SqlStore::ListCheckpoints(std::int64_t trial_id) {
  return Transaction(false, [&] {
    std::vector<CheckpointRecord> checkpoints;
    for (const auto& row : connection_->Query(std::string("SELECT ") + kCheckpointColumns +
                                                  " FROM checkpoints c WHERE c.trial_id = ? ORDER BY c.step, c.id",
                                              {trial_id})) {
      checkpoints.push_back(CheckpointFromRow(row));
    }
    return checkpoints;
  });
}

namespace {

std::string MetricsToJson(const std::map<std::string, double>& metrics) {
  nlohmann::json object = nlohmann::json::object();
  for (const auto& [name, value] : metrics) object[name] = value;
  return object.dump();
}

std::map<std::string, double> MetricsFromJson(const std::string& text) {
  std::map<std::string, double> metrics;
  const auto object = nlohmann::json::parse(text, nullptr, false);
  if (!object.is_object()) return metrics;
  for (const auto& [name, value] : object.items()) {
    if (value.is_number()) metrics[name] = value.get<double>();
  }
  return metrics;
}

constexpr const char* kEvaluationColumns =
    "e.id, t.number, e.step, e.checkpoint_path, e.checksum, e.split, e.metrics, e.examples, e.created_at";

CheckpointEvaluation EvaluationFromRow(const SqlRow& row, std::size_t first = 0) {
  CheckpointEvaluation evaluation;
  evaluation.id = AsInt(row[first]);
  evaluation.trial = static_cast<std::uint64_t>(AsInt(row[first + 1]));
  evaluation.step = AsInt(row[first + 2]);
  evaluation.checkpoint_path = AsText(row[first + 3]);
  evaluation.checksum = AsText(row[first + 4]);
  evaluation.split = AsText(row[first + 5]);
  evaluation.metrics = MetricsFromJson(AsText(row[first + 6]));
  evaluation.examples = AsInt(row[first + 7]);
  evaluation.created_at = AsDouble(row[first + 8]);
  return evaluation;
}

}  // namespace

StudyNote SqlStore::AddNote(std::int64_t study_id, const StudyNote& note) {
  return Transaction(true, [&] {
    RequireStudy(study_id);
    const auto rows = connection_->Query(
        Sql("INSERT INTO study_notes (study_id, kind, adopt, text, author, resolves, created_at) VALUES (?, ?, ?, ?, "
            "?, ?, {now}) RETURNING id, created_at"),
        {study_id, NoteKindName(note.kind), SanitizeUtf8(note.adopt), SanitizeUtf8(note.text),
         SanitizeUtf8(note.author), SanitizeUtf8(note.resolves)});
    TouchStudy(study_id);
    StudyNote stored = note;
    stored.id = AsInt(rows.front()[0]);
    stored.created_at = AsDouble(rows.front()[1]);
    return stored;
  });
}

namespace {

// Inside a transaction: the study's notes, by id.
std::vector<StudyNote> QueryNotes(SqlConnection& connection, std::int64_t study_id) {
  std::vector<StudyNote> notes;
  for (const auto& row : connection.Query(
           "SELECT id, kind, adopt, text, author, created_at, resolves FROM study_notes WHERE study_id = ? "
           "ORDER BY id",
           {study_id})) {
    notes.push_back({.id = AsInt(row[0]),
                     .kind = AsText(row[1]) == "decision" ? NoteKind::kDecision : NoteKind::kNote,
                     .adopt = AsText(row[2]),
                     .text = AsText(row[3]),
                     .author = AsText(row[4]),
                     .resolves = AsText(row[6]),
                     .created_at = AsDouble(row[5])});
  }
  return notes;
}

}  // namespace

std::vector<StudyNote> SqlStore::ListNotes(std::int64_t study_id) {
  return Transaction(false, [&] { return QueryNotes(*connection_, study_id); });
}

std::int64_t SqlStore::InsertEvaluation(std::int64_t study_id, const CheckpointEvaluation& evaluation) {
  RequireStudy(study_id);
  const auto trial = connection_->Query("SELECT id FROM trials WHERE study_id = ? AND number = ?",
                                        {study_id, static_cast<std::int64_t>(evaluation.trial)});
  if (trial.empty()) throw Error(fmt::format("{}: the study has no trial {}", url_, evaluation.trial));
  const auto rows = connection_->Query(
      Sql("INSERT INTO checkpoint_evaluations (study_id, trial_id, step, checkpoint_path, checksum, split, metrics, "
          "examples, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, {now}) RETURNING id"),
      {study_id, AsInt(trial.front()[0]), evaluation.step, evaluation.checkpoint_path, evaluation.checksum,
       evaluation.split, MetricsToJson(evaluation.metrics), evaluation.examples});
  TouchStudy(study_id);
  return AsInt(rows.front()[0]);
}

CheckpointEvaluation SqlStore::ReadEvaluation(std::int64_t evaluation_id) {
  const auto rows = connection_->Query(std::string("SELECT ") + kEvaluationColumns +
                                           " FROM checkpoint_evaluations e JOIN trials t ON t.id = e.trial_id "
                                           "WHERE e.id = ?",
                                       {evaluation_id});
  return EvaluationFromRow(rows.front());
}

CheckpointEvaluation SqlStore::AddEvaluation(std::int64_t study_id, const CheckpointEvaluation& evaluation) {
  return Transaction(true, [&] { return ReadEvaluation(InsertEvaluation(study_id, evaluation)); });
}

namespace {

// Inside a transaction: the study's checkpoint evaluations, by id.
std::vector<CheckpointEvaluation> QueryEvaluations(SqlConnection& connection, std::int64_t study_id) {
  std::vector<CheckpointEvaluation> evaluations;
  for (const auto& row : connection.Query(std::string("SELECT ") + kEvaluationColumns +
                                              " FROM checkpoint_evaluations e JOIN trials t ON t.id = e.trial_id "
                                              "WHERE e.study_id = ? ORDER BY e.id",
                                          {study_id})) {
    evaluations.push_back(EvaluationFromRow(row));
  }
  return evaluations;
}

}  // namespace

std::vector<CheckpointEvaluation> SqlStore::ListEvaluations(std::int64_t study_id) {
  return Transaction(false, [&] { return QueryEvaluations(*connection_, study_id); });
}

LaunchRecord SqlStore::AddLaunch(std::int64_t study_id, const LaunchRecord& launch) {
  const std::int64_t id = Transaction(true, [&] {
    const std::int64_t evaluation_id = InsertEvaluation(study_id, launch.evaluation);
    const auto rows = connection_->Query(
        Sql("INSERT INTO launches (study_id, trial_id, evaluation_id, reason, author, git_commit, git_dirty, "
            "export_path, decision_id, created_at) SELECT study_id, trial_id, id, ?, ?, ?, ?, ?, ?, {now} "
            "FROM checkpoint_evaluations WHERE id = ? RETURNING id"),
        {SanitizeUtf8(launch.reason), SanitizeUtf8(launch.author), launch.git_commit, Optional(launch.git_dirty),
         launch.export_path, Optional(launch.decision), evaluation_id});
    return AsInt(rows.front()[0]);
  });
  for (LaunchRecord& stored : ListLaunches(study_id)) {
    if (stored.id == id) return stored;
  }
  throw Error(fmt::format("{}: launch {} was recorded but cannot be read back", url_, id));
}

namespace {

// Inside a transaction: the study's launches (every study's when study_id is 0), by id.
std::vector<LaunchRecord> QueryLaunches(SqlConnection& connection, std::int64_t study_id) {
  std::vector<LaunchRecord> launches;
  const std::string sql = std::string(
                              "SELECT l.id, s.name, l.reason, l.author, l.git_commit, l.git_dirty, "
                              "l.export_path, l.created_at, l.decision_id, ") +
                          kEvaluationColumns +
                          " FROM launches l JOIN studies s ON s.id = l.study_id JOIN checkpoint_evaluations e ON "
                          "e.id = l.evaluation_id JOIN trials t ON t.id = l.trial_id" +
                          (study_id != 0 ? " WHERE l.study_id = ?" : "") + " ORDER BY l.id";
  const std::vector<SqlValue> args = study_id != 0 ? std::vector<SqlValue>{study_id} : std::vector<SqlValue>{};
  for (const auto& row : connection.Query(sql, args)) {
    LaunchRecord launch;
    launch.id = AsInt(row[0]);
    launch.study = AsText(row[1]);
    launch.reason = AsText(row[2]);
    launch.author = AsText(row[3]);
    launch.git_commit = AsText(row[4]);
    if (const auto dirty = AsOptionalInt(row[5])) launch.git_dirty = *dirty != 0;
    launch.export_path = AsText(row[6]);
    launch.created_at = AsDouble(row[7]);
    launch.decision = AsOptionalInt(row[8]);
    launch.evaluation = EvaluationFromRow(row, 9);
    launches.push_back(std::move(launch));
  }
  return launches;
}

}  // namespace

std::vector<LaunchRecord> SqlStore::ListLaunches(std::int64_t study_id) {
  return Transaction(false, [&] { return QueryLaunches(*connection_, study_id); });
}

void SqlStore::DeleteStudy(std::int64_t study_id) {
  Transaction(true, [&] {
    // Every table of a study's records refers to it (or to its trials) with ON DELETE CASCADE.
    if (connection_->Query("DELETE FROM studies WHERE id = ? RETURNING id", {study_id}).empty()) {
      throw Error(fmt::format("{}: no study with id {}", url_, study_id));
    }
  });
}

std::unique_ptr<StoreLock> SqlStore::LockTestSplit(std::int64_t study_id) {
  auto lock = connection_->TryLock(study_id);
  if (!lock) {
    throw Error(fmt::format("{}: another dltune is evaluating the test split of this study right now (a launch, or "
                            "evaluate --split test); once it is done, dltune launches lists it",
                            url_),
                ErrorKind::kConflict);
  }
  return lock;
}

StudyCopy SqlStore::ReadStudyCopy(std::int64_t study_id) {
  return Transaction(false, [&] {
    StudyCopy copy;
    const auto study =
        connection_->Query(std::string("SELECT ") + kStudyColumns + " FROM studies WHERE id = ?", {study_id});
    if (study.empty()) throw Error(fmt::format("{}: no study with id {}", url_, study_id));
    copy.study = StudyFromRow(study.front());
    copy.git_patch = AsText(connection_->Query("SELECT git_patch FROM studies WHERE id = ?", {study_id}).front()[0]);
    std::map<std::int64_t, std::size_t> position;  // trial id -> index in copy.trials
    for (const auto& row : connection_->Query(
             std::string("SELECT ") + kTrialColumns + ", furthest_step FROM trials WHERE study_id = ? ORDER BY number",
             {study_id})) {
      StudyCopyTrial trial{.trial = TrialFromRow(row), .furthest_step = AsOptionalInt(row[23])};
      position[trial.trial.id] = copy.trials.size();
      copy.trials.push_back(std::move(trial));
    }
    for (const auto& row : connection_->Query(
             "SELECT m.trial_id, m.step, m.loss, m.learning_rate, m.grad_norm, m.clipped, m.step_time, m.data_wait, "
             "m.examples_per_second FROM train_measurements m JOIN trials t ON t.id = m.trial_id "
             "WHERE t.study_id = ? ORDER BY t.number, m.step",
             {study_id})) {
      copy.trials[position.at(AsInt(row[0]))].train.push_back(TrainMeasurementOf(row, 1));
    }
    for (const auto& row : connection_->Query(
             "SELECT e.trial_id, e.step, e.split, e.metric, e.value, e.examples FROM eval_measurements e "
             "JOIN trials t ON t.id = e.trial_id WHERE t.study_id = ? ORDER BY t.number, e.step, e.split, e.metric",
             {study_id})) {
      copy.trials[position.at(AsInt(row[0]))].evals.push_back(
          {AsInt(row[1]), AsText(row[2]), AsText(row[3]), AsDouble(row[4]), AsInt(row[5])});
    }
    for (const auto& row : connection_->Query(std::string("SELECT c.trial_id, ") + kCheckpointColumns +
                                                  " FROM checkpoints c JOIN trials t ON t.id = c.trial_id "
                                                  "WHERE t.study_id = ? ORDER BY t.number, c.step, c.id",
                                              {study_id})) {
      copy.trials[position.at(AsInt(row[0]))].checkpoints.push_back(CheckpointFromRow(row, 1));
    }
    copy.notes = QueryNotes(*connection_, study_id);
    copy.evaluations = QueryEvaluations(*connection_, study_id);
    copy.launches = QueryLaunches(*connection_, study_id);
    return copy;
  });
}

std::int64_t SqlStore::InsertStudyCopy(const StudyCopy& copy, const std::string& name, bool replace,
                                       const std::function<void(std::size_t)>& on_trial_written,
                                       std::size_t& trials_written) {
  const StudyRecord& study = copy.study;
  // No two studies of a store share a name, nor a uid (it names their trial directories).
  for (const auto& row :
       connection_->Query("SELECT id, name, uid FROM studies WHERE name = ? OR uid = ?", {name, study.uid})) {
    const std::string other = AsText(row[1]);
    if (other == name && replace) {
      connection_->Execute("DELETE FROM studies WHERE id = ?", {AsInt(row[0])});
    } else if (other == name) {
      throw Error(fmt::format("{}: a study named '{}' already exists", url_, name), ErrorKind::kConflict);
    } else {
      throw Error(
          fmt::format("{}: the store holds study '{}' already, as '{}' (uid {})", url_, study.name, other, study.uid),
          ErrorKind::kConflict);
    }
  }
  std::int64_t study_id = 0;
  try {
    study_id =
        AsInt(connection_
                  ->Query("INSERT INTO studies (name, uid, description, spec_text, spec_hash, spec_path, command_line, "
                          "dltune_version, git_commit, git_dirty, parent, reproduction, git_patch, created_at, "
                          "updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                          {name, study.uid, study.description, study.spec_text, study.spec_hash, study.spec_path,
                           study.command_line, study.dltune_version, study.git_commit, Optional(study.git_dirty),
                           study.parent, study.reproduction, copy.git_patch, study.created_at, study.updated_at})
                  .front()
                  .front());
  } catch (const SqlUniqueViolation&) {
    throw Error(fmt::format("{}: a study named '{}' already exists", url_, name), ErrorKind::kConflict);
  }
  // The parent's page lists the studies planned from it: it changed when this one was made.
  if (!study.parent.empty()) {
    connection_->Execute("UPDATE studies SET updated_at = ? WHERE name = ? AND updated_at < ?",
                         {study.created_at, study.parent, study.created_at});
  }

  std::vector<SqlRow> trial_rows;
  std::map<std::string, std::int64_t> counts;
  trial_rows.reserve(copy.trials.size());
  for (const StudyCopyTrial& trial : copy.trials) {
    const TrialRecord& t = trial.trial;
    trial_rows.push_back({study_id,
                          static_cast<std::int64_t>(t.number),
                          static_cast<std::int64_t>(t.substudy),
                          t.substudy_label,
                          ParamsToJson(t.params),
                          static_cast<std::int64_t>(t.seed),
                          static_cast<std::int64_t>(t.configuration),
                          static_cast<std::int64_t>(t.replica),
                          TrialStateName(t.state),
                          t.worker,
                          Optional(t.heartbeat_at),
                          Optional(t.started_at),
                          Optional(t.ended_at),
                          t.reason,
                          std::int64_t{t.retries},
                          Optional(t.best_step),
                          Optional(t.best_value),
                          Optional(t.final_value),
                          Optional(t.exit_status),
                          t.stderr_tail,
                          TimeSplitToJson(t.time_split),
                          ResourcesJson(t.resources),
                          Optional(trial.furthest_step)});
    ++counts[TrialStateName(t.state)];
  }
  connection_->ExecuteMany(
      "INSERT INTO trials (study_id, number, substudy, substudy_label, params, seed, configuration, replica, state, "
      "worker, heartbeat_at, started_at, ended_at, reason, retries, best_step, best_value, final_value, exit_status, "
      "stderr_tail, time_split, resources, furthest_step) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      trial_rows);
  for (const auto& [state, count] : counts) {
    connection_->Execute("INSERT INTO trial_counts (study_id, state, count) VALUES (?, ?, ?)",
                         {study_id, state, count});
  }
  std::map<std::uint64_t, std::int64_t> trial_ids;  // by number
  for (const auto& row : connection_->Query("SELECT number, id FROM trials WHERE study_id = ?", {study_id})) {
    trial_ids[static_cast<std::uint64_t>(AsInt(row[0]))] = AsInt(row[1]);
  }

  for (const StudyCopyTrial& trial : copy.trials) {
    const std::int64_t trial_id = trial_ids.at(trial.trial.number);
    std::vector<SqlRow> rows;
    for (const TrainMeasurement& m : trial.train) {
      rows.push_back({trial_id, m.step, Optional(m.loss), Optional(m.learning_rate), Optional(m.grad_norm),
                      Optional(m.clipped), Optional(m.step_time), Optional(m.data_wait),
                      Optional(m.examples_per_second)});
    }
    if (!rows.empty()) {
      connection_->ExecuteMany(
          "INSERT INTO train_measurements (trial_id, step, loss, learning_rate, grad_norm, clipped, step_time, "
          "data_wait, examples_per_second) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
          rows);
    }
    rows.clear();
    for (const EvalMeasurement& e : trial.evals)
      rows.push_back({trial_id, e.step, e.split, e.metric, e.value, e.examples});
    if (!rows.empty()) {
      connection_->ExecuteMany(
          "INSERT INTO eval_measurements (trial_id, step, split, metric, value, examples) VALUES (?, ?, ?, ?, ?, ?)",
          rows);
    }
    rows.clear();
    for (const CheckpointRecord& c : trial.checkpoints) {
      rows.push_back({trial_id, c.step, c.path, Optional(c.objective), c.checksum, CheckpointPoolName(c.pool),
                      std::int64_t{c.deleted ? 1 : 0}, c.created_at});
    }
    if (!rows.empty()) {
      connection_->ExecuteMany(
          "INSERT INTO checkpoints (trial_id, step, path, objective, checksum, pool, deleted, created_at) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
          rows);
    }
    if (on_trial_written) on_trial_written(++trials_written);
  }

  // Notes, evaluations and launches, in their order, each referring to the others by its new id.
  std::map<std::int64_t, std::int64_t> note_ids;
  for (const StudyNote& note : copy.notes) {
    note_ids[note.id] =
        AsInt(connection_
                  ->Query("INSERT INTO study_notes (study_id, kind, adopt, text, author, resolves, created_at) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
                          {study_id, NoteKindName(note.kind), note.adopt, note.text, note.author, note.resolves,
                           note.created_at})
                  .front()
                  .front());
  }
  auto trial_id_of = [&](std::uint64_t number) {
    const auto found = trial_ids.find(number);
    if (found == trial_ids.end()) {
      throw Error(fmt::format("{}: study '{}' has a record of trial {}, which it lacks", url_, name, number));
    }
    return found->second;
  };
  std::map<std::int64_t, std::int64_t> evaluation_ids;
  for (const CheckpointEvaluation& e : copy.evaluations) {
    evaluation_ids[e.id] = AsInt(
        connection_
            ->Query("INSERT INTO checkpoint_evaluations (study_id, trial_id, step, checkpoint_path, checksum, split, "
                    "metrics, examples, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    {study_id, trial_id_of(e.trial), e.step, e.checkpoint_path, e.checksum, e.split,
                     MetricsToJson(e.metrics), e.examples, e.created_at})
            .front()
            .front());
  }
  for (const LaunchRecord& launch : copy.launches) {
    const auto evaluation = evaluation_ids.find(launch.evaluation.id);
    if (evaluation == evaluation_ids.end()) {
      throw Error(fmt::format("{}: a launch of study '{}' names an evaluation the copy lacks", url_, name));
    }
    std::optional<std::int64_t> decision;
    if (launch.decision) {
      const auto found = note_ids.find(*launch.decision);
      if (found != note_ids.end()) decision = found->second;
    }
    connection_->Execute(
        "INSERT INTO launches (study_id, trial_id, evaluation_id, reason, author, git_commit, git_dirty, export_path, "
        "decision_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        {study_id, trial_id_of(launch.evaluation.trial), evaluation->second, launch.reason, launch.author,
         launch.git_commit, Optional(launch.git_dirty), launch.export_path, Optional(decision), launch.created_at});
  }
  return study_id;
}

StudyRecord SqlStore::WriteStudyCopy(const StudyCopyWrite& write) {
  if (write.studies.empty()) throw Error("no study to copy");
  return Transaction(true, [&] {
    std::size_t trials_written = 0;
    std::int64_t last = 0;
    for (std::size_t i = 0; i < write.studies.size(); ++i) {
      const bool is_last = i + 1 == write.studies.size();
      const StudyCopy& copy = write.studies[i];
      last = InsertStudyCopy(copy, is_last && !write.name.empty() ? write.name : copy.study.name,
                             is_last && write.replace, write.on_trial_written, trials_written);
    }
    StudyRecord written = StudyFromRow(
        connection_->Query(std::string("SELECT ") + kStudyColumns + " FROM studies WHERE id = ?", {last}).front());
    study_names_[written.id] = written.name;
    return written;
  });
}

}  // namespace dltune::internal
