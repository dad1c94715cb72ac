#include "schema.h"

#include <fmt/format.h>

#include "dltune/store/store.h"

namespace dltune::internal {
namespace {

// Types that differ between the dialects; the scripts below name them as {pk}, {int} and {real} (so a literal
// brace is written twice: {{}} is the text {}).
std::string Render(const std::string& script, SqlDialect dialect) {
  const bool sqlite = dialect == SqlDialect::kSqlite;
  return fmt::format(fmt::runtime(script), fmt::arg("pk", sqlite ? "INTEGER PRIMARY KEY" : "BIGSERIAL PRIMARY KEY"),
                     fmt::arg("int", sqlite ? "INTEGER" : "BIGINT"),
                     fmt::arg("real", sqlite ? "REAL" : "DOUBLE PRECISION"),
                     fmt::arg("random_uid", sqlite ? "lower(hex(randomblob(6)))"
                                                   : "substr(md5(random()::text || clock_timestamp()::text), 1, 12)"));
}

// Migration to version i + 1 is kMigrations[i]. Never edit a released migration: add a new one.
const char* const kMigrations[] = {
    // 1: studies, trials, measurements, checkpoints.
    R"(
CREATE TABLE studies (
  id {pk},
  name TEXT NOT NULL UNIQUE,
  description TEXT NOT NULL DEFAULT '',
  spec_text TEXT NOT NULL,
  spec_hash TEXT NOT NULL,
  spec_path TEXT NOT NULL DEFAULT '',
  command_line TEXT NOT NULL DEFAULT '',
  dltune_version TEXT NOT NULL DEFAULT '',
  git_commit TEXT NOT NULL DEFAULT '',
  created_at {real} NOT NULL,
  updated_at {real} NOT NULL
);
CREATE TABLE trials (
  id {pk},
  study_id {int} NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
  number {int} NOT NULL,
  substudy {int} NOT NULL,
  substudy_label TEXT NOT NULL,
  params TEXT NOT NULL,
  seed {int} NOT NULL,
  state TEXT NOT NULL,
  worker TEXT NOT NULL DEFAULT '',
  heartbeat_at {real},
  started_at {real},
  ended_at {real},
  reason TEXT NOT NULL DEFAULT '',
  retries {int} NOT NULL DEFAULT 0,
  best_step {int},
  best_value {real},
  final_value {real},
  UNIQUE (study_id, number)
);
CREATE INDEX trials_by_state ON trials (study_id, state, number);
CREATE TABLE train_measurements (
  trial_id {int} NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  step {int} NOT NULL,
  loss {real},
  learning_rate {real},
  grad_norm {real},
  clipped {int},
  step_time {real},
  data_wait {real},
  examples_per_second {real},
  PRIMARY KEY (trial_id, step)
);
CREATE TABLE eval_measurements (
  trial_id {int} NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  step {int} NOT NULL,
  split TEXT NOT NULL,
  metric TEXT NOT NULL,
  value {real} NOT NULL,
  examples {int} NOT NULL,
  PRIMARY KEY (trial_id, step, split, metric)
);
CREATE TABLE checkpoints (
  id {pk},
  trial_id {int} NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  step {int} NOT NULL,
  path TEXT NOT NULL,
  objective {real},
  checksum TEXT NOT NULL,
  pool TEXT NOT NULL,
  deleted {int} NOT NULL DEFAULT 0,
  created_at {real} NOT NULL
);
CREATE INDEX checkpoints_by_trial ON checkpoints (trial_id, step);
)",
    // 2: how a trial process ended, for trials recorded as failed.
    R"(
ALTER TABLE trials ADD COLUMN exit_status {int};
ALTER TABLE trials ADD COLUMN stderr_tail TEXT NOT NULL DEFAULT '';
)",
    // 3: a study's uid, which names its trial directories (<run_dir>/<uid>/trial_<n>); studies made before get one
    // here, and their trials' old directories are left as they are. A trial's furthest step, so that a reclaim
    // counts as a retry only when the trial made no progress. Indexes for best-trial reads of large studies, and
    // the trials of each study by state, kept as they change, so counting them costs the same at any size.
    R"(
ALTER TABLE studies ADD COLUMN uid TEXT NOT NULL DEFAULT '';
UPDATE studies SET uid = {random_uid} WHERE uid = '';
ALTER TABLE trials ADD COLUMN furthest_step {int};
CREATE INDEX trials_by_best ON trials (study_id, state, best_value, number);
CREATE INDEX trials_by_substudy_best ON trials (study_id, state, substudy, best_value, number);
CREATE TABLE trial_counts (
  study_id {int} NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
  state TEXT NOT NULL,
  count {int} NOT NULL,
  PRIMARY KEY (study_id, state)
);
INSERT INTO trial_counts (study_id, state, count) SELECT study_id, state, COUNT(*) FROM trials GROUP BY study_id, state;
)",
    // 4: the process across studies. A trial's configuration and replica (trials of one configuration differ only
    // by seed; earlier trials are each their own configuration). A study's parent (the study it was planned from)
    // and whether the user's checkout had uncommitted changes (unknown before). Notes and decisions about a study;
    // evaluations of a chosen checkpoint on a split; launches.
    R"(
ALTER TABLE trials ADD COLUMN configuration {int} NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN replica {int} NOT NULL DEFAULT 0;
UPDATE trials SET configuration = number;
ALTER TABLE studies ADD COLUMN parent TEXT NOT NULL DEFAULT '';
ALTER TABLE studies ADD COLUMN git_dirty {int};
CREATE TABLE study_notes (
  id {pk},
  study_id {int} NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
  kind TEXT NOT NULL,
  adopt TEXT NOT NULL DEFAULT '',
  text TEXT NOT NULL,
  author TEXT NOT NULL DEFAULT '',
  created_at {real} NOT NULL
);
CREATE INDEX study_notes_by_study ON study_notes (study_id, id);
CREATE TABLE checkpoint_evaluations (
  id {pk},
  study_id {int} NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
  trial_id {int} NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  step {int} NOT NULL,
  checkpoint_path TEXT NOT NULL,
  checksum TEXT NOT NULL,
  split TEXT NOT NULL,
  metrics TEXT NOT NULL,
  examples {int} NOT NULL,
  created_at {real} NOT NULL
);
CREATE INDEX checkpoint_evaluations_by_study ON checkpoint_evaluations (study_id, split, id);
CREATE TABLE launches (
  id {pk},
  study_id {int} NOT NULL REFERENCES studies(id) ON DELETE CASCADE,
  trial_id {int} NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  evaluation_id {int} NOT NULL REFERENCES checkpoint_evaluations(id) ON DELETE CASCADE,
  reason TEXT NOT NULL,
  author TEXT NOT NULL DEFAULT '',
  git_commit TEXT NOT NULL DEFAULT '',
  git_dirty {int},
  export_path TEXT NOT NULL DEFAULT '',
  created_at {real} NOT NULL
);
CREATE INDEX launches_by_study ON launches (study_id, id);
)",
    // 5: where each trial's time went (a JSON object of seconds by phase, summed over its attempts).
    R"(
ALTER TABLE trials ADD COLUMN time_split TEXT NOT NULL DEFAULT '{{}}';
)",
    // 6: the decision a launch carried out (a study_notes id; NULL for a launch that followed none).
    R"(
ALTER TABLE launches ADD COLUMN decision_id {int};
)",
    // 7: the finding a note marks handled (dltune note --resolves; '' for any other note).
    R"(
ALTER TABLE study_notes ADD COLUMN resolves TEXT NOT NULL DEFAULT '';
)",
    // 8: the resources (GPUs) a trial's latest attempt used, as a JSON object.
    R"(
ALTER TABLE trials ADD COLUMN resources TEXT NOT NULL DEFAULT '{{}}';
)",
    // 9: how to reproduce a study beyond its spec and commit: a JSON object of the versions, machine, environment and
    // uncommitted patch it was created with ('' for studies created before), and that patch as stored.
    R"(
ALTER TABLE studies ADD COLUMN reproduction TEXT NOT NULL DEFAULT '';
ALTER TABLE studies ADD COLUMN git_patch TEXT NOT NULL DEFAULT '';
)",
};
static_assert(std::size(kMigrations) == kStoreSchemaVersion, "one migration per schema version");

void EnsureMetaTable(SqlConnection& connection) {
  connection.ExecuteScript("CREATE TABLE IF NOT EXISTS dltune_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)");
}

int VersionInTransaction(SqlConnection& connection) {
  const auto rows = connection.Query("SELECT value FROM dltune_meta WHERE key = 'schema_version'");
  if (rows.empty()) return 0;
  const auto* text = std::get_if<std::string>(&rows.front().front());
  return text ? std::stoi(*text) : 0;
}

}  // namespace

int ReadSchemaVersion(SqlConnection& connection) {
  const bool exists = !connection
                           .Query(connection.dialect() == SqlDialect::kSqlite
                                      ? "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'dltune_meta'"
                                      : "SELECT 1 FROM information_schema.tables WHERE table_name = 'dltune_meta' "
                                        "AND table_schema = current_schema()")
                           .empty();
  return exists ? VersionInTransaction(connection) : 0;
}

int Migrate(SqlConnection& connection, int target) {
  connection.BeginWrite();
  try {
    // PostgreSQL: serialize concurrent migrations (the lock ends with the transaction).
    if (connection.dialect() == SqlDialect::kPostgres) connection.Query("SELECT pg_advisory_xact_lock(7243150)");
    EnsureMetaTable(connection);
    int version = VersionInTransaction(connection);
    if (version > kStoreSchemaVersion) {
      throw CorruptError(
          fmt::format("{}: the store was written by a newer dltune (schema version {}; this dltune knows up "
                      "to {}); upgrade dltune to use it",
                      connection.name(), version, kStoreSchemaVersion));
    }
    for (; version < target; ++version) {
      connection.ExecuteScript(Render(kMigrations[version], connection.dialect()));
    }
    connection.Execute(
        "INSERT INTO dltune_meta (key, value) VALUES ('schema_version', ?) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        {std::to_string(version)});
    connection.Commit();
    return version;
  } catch (...) {
    connection.Rollback();
    throw;
  }
}

}  // namespace dltune::internal
