// `dltune copy`: a study copied SQLite → PostgreSQL → SQLite reads the same (every record equal, every export and
// view byte-identical); a name clash is refused unless told; a copy killed half-way leaves the target without it.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/files.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"
#include "store/sql_connection.h"

namespace dltune {
namespace {

using test::RunDltune;
using ::testing::HasSubstr;

constexpr const char* kParent = "copy-parent";
constexpr const char* kChild = "copy-child";

// Quickstart's trials 0..count-1 of `study`.
void AddQuickstartTrials(Store& store, std::int64_t study, std::uint64_t count) {
  const StudySpec spec = LoadStudySpec(DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
  const StudyPlan plan(spec);
  std::vector<NewTrial> trials;
  for (std::uint64_t n = 0; n < count; ++n) {
    const PlannedTrial t = plan.Trial(n);
    trials.push_back({n, t.substudy, plan.SubStudyAt(t.substudy).label, t.params, 1000 + n, n, 0});
  }
  store.AddTrials(study, trials);
}

NewStudy QuickstartStudy(const std::string& name, const std::string& parent) {
  const StudySpec spec = LoadStudySpec(DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
  return {.name = name,
          .description = spec.description,
          .spec_text = spec.text,
          .spec_hash = "0123456789abcdef",
          .spec_path = "examples/quickstart.yaml",
          .command_line = "dltune run examples/quickstart.yaml",
          .dltune_version = "0.1.0",
          .git_commit = "abc123",
          .git_dirty = true,
          .parent = parent,
          .reproduction = R"({"dltune":{"version":"0.1.0","build":"abc"},"environment":{"OMP_NUM_THREADS":"1"},)"
                          R"("git":{"patch":{"bytes":6,"stored":true,"encoding":"base64","sha256":)"
                          R"("0ace3c180294ea88af3dcb1e1f75d125296ec98cb07f0501ce22dc87cf9a5ccf"}}})",
          .git_patch = "AAECA/8K"};
}

// A parent study with one completed trial, and a study planned from it with a trial in every state, measurements
// with gaps, checkpoints (one deleted), notes, a decision, an evaluation and a launch that carried the decision out.
void FillSource(const std::string& url) {
  auto store = OpenStore(url);
  const StudyRecord parent = store->CreateStudy(QuickstartStudy(kParent, ""));
  AddQuickstartTrials(*store, parent.id, 2);
  {
    const auto claim = store->ClaimNext(parent.id, "host-a:1");
    store->Record(claim->second,
                  {.evals = {{100, "valid", "error_rate", 0.3, 500}}, .best_step = 100, .best_value = 0.3});
    store->Finish(claim->second, {.state = TrialState::kCompleted, .final_value = 0.3});
  }
  const StudyRecord child = store->CreateStudy(QuickstartStudy(kChild, kParent));
  AddQuickstartTrials(*store, child.id, 7);
  // 0: completed, with measurements, a deleted and a kept checkpoint, a GPU.
  auto claim = store->ClaimNext(child.id, "host-a:1");
  MeasurementBatch batch;
  batch.train.push_back({.step = 1,
                         .loss = 2.5,
                         .learning_rate = 0.1,
                         .grad_norm = 3.25,
                         .clipped = true,
                         .step_time = 0.012345678901234567,
                         .data_wait = 0.001,
                         .examples_per_second = 1234.5});
  batch.train.push_back({.step = 2, .loss = 1.0 / 3.0});  // the others NULL
  batch.train.push_back({.step = 3, .loss = 0.5, .clipped = false});
  batch.evals.push_back({2, "valid", "error_rate", 0.25, 10000});
  batch.evals.push_back({2, "valid", "loss", 0.7071067811865476, 10000});
  batch.evals.push_back({3, "train", "loss", 0.1, 512});
  batch.best_step = 2;
  batch.best_value = 0.25;
  store->Record(claim->second, batch);
  const std::int64_t old = store->AddCheckpoint(
      claim->second,
      {.step = 1, .path = "/runs/x/trial_0/ckpt_1", .checksum = "sha256:1", .pool = CheckpointPool::kLatest});
  store->AddCheckpoint(claim->second, {.step = 2,
                                       .path = "/runs/x/trial_0/ckpt_2",
                                       .objective = 0.25,
                                       .checksum = "sha256:2",
                                       .pool = CheckpointPool::kBest});
  store->MarkCheckpointDeleted(claim->second, old);
  store->Finish(claim->second,
                {.state = TrialState::kCompleted,
                 .final_value = 0.25,
                 .time_split = {{"train", 1.5}, {"startup", 0.25}},
                 .resources = R"({"model":"NVIDIA H100 80GB HBM3","uuids":["GPU-1"],"driver":"550.54",)"
                              R"("peak_memory_bytes":123456789,"mean_utilization_percent":87.5,"trials_at_once":1})"});
  // 1: infeasible; 2: failed with its stderr; 3: stopped; 4: running; 5, 6: pending.
  claim = store->ClaimNext(child.id, "host-b:2");
  store->Finish(claim->second, {.state = TrialState::kInfeasible, .reason = "loss is NaN at step 37"});
  claim = store->ClaimNext(child.id, "host-b:2");
  store->Finish(claim->second, {.state = TrialState::kFailed,
                                .reason = "the trial process exited with status 3",
                                .exit_status = 3,
                                .stderr_tail = "Traceback: boom\n",
                                .time_split = {{"startup", 0.5}}});
  claim = store->ClaimNext(child.id, "host-b:2");
  store->Record(claim->second, {.train = {{.step = 1, .loss = 4.0}}});
  store->Finish(claim->second, {.state = TrialState::kStopped, .reason = "stopped by Ctrl-C"});
  claim = store->ClaimNext(child.id, "host-c:3");
  store->Record(claim->second, {.train = {{.step = 1, .loss = 3.0}}});

  store->AddNote(child.id, {.text = "looks noisy", .author = "ann@laptop"});
  store->AddNote(child.id,
                 {.text = "validation is periodic", .author = "ann@laptop", .resolves = "periodic_validation"});
  const StudyNote decision = store->AddNote(
      child.id,
      {.kind = NoteKind::kDecision, .adopt = "trial 0 (optimizer=nesterov)", .text = "best", .author = "ann"});
  store->AddEvaluation(child.id, {.trial = 0,
                                  .step = 2,
                                  .checkpoint_path = "/runs/x/trial_0/ckpt_2",
                                  .checksum = "sha256:2",
                                  .split = "valid",
                                  .metrics = {{"error_rate", 0.25}},
                                  .examples = 10000});
  store->AddLaunch(child.id, {.evaluation = {.trial = 0,
                                             .step = 2,
                                             .checkpoint_path = "/runs/x/trial_0/ckpt_2",
                                             .checksum = "sha256:2",
                                             .split = "test",
                                             .metrics = {{"error_rate", 0.26}, {"loss", 0.75}},
                                             .examples = 10000},
                              .reason = "the best of the study",
                              .author = "ann@laptop",
                              .git_commit = "abc123",
                              .git_dirty = false,
                              .export_path = "/runs/x/launches/launch_1/model.pt",
                              .decision = decision.id});
}

// Every record of a copy, ids replaced by positions (each store gives its own ids), as comparable text.
std::string Records(const StudyCopy& copy) {
  nlohmann::json out;
  const StudyRecord& s = copy.study;
  out["study"] = {s.name,      s.uid,          s.description,    s.spec_text,    s.spec_hash,
                  s.spec_path, s.command_line, s.dltune_version, s.git_commit,   s.git_dirty ? int(*s.git_dirty) : -1,
                  s.parent,    s.created_at,   s.updated_at,     s.reproduction, copy.git_patch};
  for (const StudyCopyTrial& trial : copy.trials) {
    const TrialRecord& t = trial.trial;
    nlohmann::json params;
    for (const auto& [id, value] : t.params) params[id] = ValueToJson(value);
    nlohmann::json row = {t.number,
                          t.substudy,
                          t.substudy_label,
                          params,
                          t.seed,
                          t.configuration,
                          t.replica,
                          TrialStateName(t.state),
                          t.worker,
                          t.heartbeat_at ? *t.heartbeat_at : -1,
                          t.started_at ? *t.started_at : -1,
                          t.ended_at ? *t.ended_at : -1,
                          t.reason,
                          t.retries,
                          t.best_step ? *t.best_step : -1,
                          t.best_value ? *t.best_value : -1,
                          t.final_value ? *t.final_value : -1,
                          t.exit_status ? *t.exit_status : -1,
                          t.stderr_tail,
                          t.time_split,
                          t.resources,
                          trial.furthest_step ? *trial.furthest_step : -1};
    for (const TrainMeasurement& m : trial.train) {
      row.push_back({m.step, m.loss ? *m.loss : -1, m.learning_rate ? *m.learning_rate : -1,
                     m.grad_norm ? *m.grad_norm : -1, m.clipped ? int(*m.clipped) : -1, m.step_time ? *m.step_time : -1,
                     m.data_wait ? *m.data_wait : -1, m.examples_per_second ? *m.examples_per_second : -1});
    }
    for (const EvalMeasurement& e : trial.evals) row.push_back({e.step, e.split, e.metric, e.value, e.examples});
    for (const CheckpointRecord& c : trial.checkpoints) {
      row.push_back({c.step, c.path, c.objective ? *c.objective : -1, c.checksum, CheckpointPoolName(c.pool), c.deleted,
                     c.created_at});
    }
    out["trials"].push_back(row);
  }
  std::map<std::int64_t, std::size_t> note_position, evaluation_position;
  for (const StudyNote& n : copy.notes) {
    note_position[n.id] = note_position.size();
    out["notes"].push_back({NoteKindName(n.kind), n.adopt, n.text, n.author, n.resolves, n.created_at});
  }
  for (const CheckpointEvaluation& e : copy.evaluations) {
    evaluation_position[e.id] = evaluation_position.size();
    out["evaluations"].push_back(
        {e.trial, e.step, e.checkpoint_path, e.checksum, e.split, e.metrics, e.examples, e.created_at});
  }
  for (const LaunchRecord& l : copy.launches) {
    out["launches"].push_back({l.study, evaluation_position.at(l.evaluation.id), l.reason, l.author, l.git_commit,
                               l.git_dirty ? int(*l.git_dirty) : -1, l.export_path,
                               l.decision ? static_cast<std::int64_t>(note_position.at(*l.decision)) : -1,
                               l.created_at});
  }
  return out.dump(1);
}

std::string RecordsOf(const std::string& url, const std::string& name) {
  auto store = OpenStoreReadOnly(url);
  const auto study = store->FindStudy(name);
  if (!study) return "no study " + name;
  return Records(store->ReadStudyCopy(study->id));
}

// What a person or a script reads of the study: every view and export of it. Nothing in them depends on the store.
std::vector<std::pair<std::string, std::string>> Views(const std::string& url) {
  std::vector<std::pair<std::string, std::string>> views;
  std::vector<std::string> commands = {"studies --wide", "studies --tree", "launches",
                                       "launches " + std::string(kChild)};
  for (const auto& [study, trials] : {std::pair{kParent, 2}, std::pair{kChild, 7}}) {
    for (const char* what : {"trials", "measurements"}) {
      for (const char* format : {"json", "csv"}) {
        commands.push_back(fmt::format("export {} --format {} --what {}", study, format, what));
      }
    }
    commands.push_back(fmt::format("show {} --all", study));
    commands.push_back(fmt::format("show {} --spec", study));
    commands.push_back(fmt::format("show {} --patch", study));
    for (int trial = 0; trial < trials; ++trial) commands.push_back(fmt::format("show {} {}", study, trial));
  }
  for (const std::string& command : commands) {
    const auto result = RunDltune(command + " --storage '" + url + "'", {}, "TZ=UTC");
    views.emplace_back(command, fmt::format("exit {}\n{}{}", result.exit_code, result.out, result.err));
  }
  return views;
}

void ExpectSameViews(const std::string& original, const std::string& copy) {
  const auto expected = Views(original);
  const auto actual = Views(copy);
  ASSERT_EQ(expected.size(), actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(expected[i].second, actual[i].second) << "dltune " << expected[i].first;
  }
}

class StoreCopy : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dltune_copy_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    source_ = "sqlite://" + (dir_ / "laptop.db").string();
    FillSource(source_);
  }
  void TearDown() override { RemoveTree(dir_); }
  std::string Sqlite(const std::string& file) const { return "sqlite://" + (dir_ / file).string(); }

  std::filesystem::path dir_;
  std::string source_;
};

TEST_F(StoreCopy, ACopyReadsTheSameAsTheOriginal) {
  const std::string target = Sqlite("lab.db");
  const auto copied = RunDltune(fmt::format("copy {} --with-lineage --from {} --to {}", kChild, source_, target));
  ASSERT_EQ(copied.exit_code, 0) << copied.err;
  EXPECT_THAT(copied.out, HasSubstr("copied study copy-child from"));
  EXPECT_THAT(copied.out, HasSubstr("7 trials, 8 measurements, 2 checkpoint records, 2 notes, 1 decision, 1 launch"));
  EXPECT_THAT(copied.out, HasSubstr("copied along study copy-parent"));
  EXPECT_THAT(copied.err, HasSubstr("1 trial was running in the source"));
  for (const char* study : {kParent, kChild}) EXPECT_EQ(RecordsOf(source_, study), RecordsOf(target, study));
  ExpectSameViews(source_, target);
}

TEST_F(StoreCopy, TheLineageIsCopiedAlongOrFoundInTheTarget) {
  const std::string target = Sqlite("lab.db");
  const auto refused = RunDltune(fmt::format("copy {} --from {} --to {}", kChild, source_, target));
  EXPECT_EQ(refused.exit_code, kExitConflict);
  EXPECT_THAT(refused.err, HasSubstr("planned from 'copy-parent', which"));
  EXPECT_THAT(refused.err, HasSubstr("--with-lineage"));
  EXPECT_EQ(RecordsOf(target, kChild), "no study copy-child");
  // The parent copied first: the child finds it there.
  ASSERT_EQ(RunDltune(fmt::format("copy {} --from {} --to {}", kParent, source_, target)).exit_code, 0);
  const auto child = RunDltune(fmt::format("copy {} --from {} --to {}", kChild, source_, target));
  ASSERT_EQ(child.exit_code, 0) << child.err;
  EXPECT_THAT(child.out, ::testing::Not(HasSubstr("copied along")));
  const auto tree = RunDltune("studies --tree --storage " + target);
  EXPECT_EQ(tree.out, RunDltune("studies --tree --storage " + source_).out);
  // A study of the parent's name that is another study is not taken for the parent.
  const std::string other = Sqlite("other.db");
  OpenStore(other)->CreateStudy(QuickstartStudy(kParent, ""));
  const auto wrong = RunDltune(fmt::format("copy {} --with-lineage --from {} --to {}", kChild, source_, other));
  EXPECT_EQ(wrong.exit_code, kExitConflict);
  EXPECT_THAT(wrong.err, HasSubstr("has another study of that name"));
  EXPECT_EQ(RecordsOf(other, kChild), "no study copy-child");
}

TEST_F(StoreCopy, ANameTheTargetHasIsRefusedUnlessTold) {
  const std::string target = Sqlite("lab.db");
  ASSERT_EQ(RunDltune(fmt::format("copy {} --from {} --to {}", kParent, source_, target)).exit_code, 0);
  const std::string before = RecordsOf(target, kParent);
  const auto again = RunDltune(fmt::format("copy {} --from {} --to {}", kParent, source_, target));
  EXPECT_EQ(again.exit_code, kExitConflict);
  EXPECT_THAT(again.err, HasSubstr("a study named 'copy-parent' already exists"));
  // Under another name it is still the same study (its uid names its trial directories): refused too.
  const auto renamed = RunDltune(fmt::format("copy {} --from {} --to {} --as twin", kParent, source_, target));
  EXPECT_EQ(renamed.exit_code, kExitConflict);
  EXPECT_THAT(renamed.err, HasSubstr("holds study 'copy-parent' already, as 'copy-parent'"));
  EXPECT_EQ(RecordsOf(target, kParent), before);
  EXPECT_EQ(RecordsOf(target, "twin"), "no study twin");

  // --replace: the target's study goes, the source's takes its place, in one transaction.
  auto source = OpenStore(source_);
  source->AddNote(source->FindStudy(kParent)->id, {.text = "a later note", .author = "ann@laptop"});
  const auto replaced = RunDltune(fmt::format("copy {} --from {} --to {} --replace", kParent, source_, target));
  ASSERT_EQ(replaced.exit_code, 0) << replaced.err;
  EXPECT_EQ(RecordsOf(target, kParent), RecordsOf(source_, kParent));
  EXPECT_NE(RecordsOf(target, kParent), before);

  // --as: a study of the same name from another store.
  const std::string other = Sqlite("other.db");
  OpenStore(other)->CreateStudy(QuickstartStudy(kParent, ""));
  const auto as = RunDltune(fmt::format("copy {} --from {} --to {} --as parent-from-laptop", kParent, source_, other));
  ASSERT_EQ(as.exit_code, 0) << as.err;
  EXPECT_THAT(as.out, HasSubstr("copied study copy-parent as parent-from-laptop"));
  EXPECT_EQ(RunDltune("export parent-from-laptop --format json --storage " + other).out,
            RunDltune(std::string("export ") + kParent + " --format json --storage " + source_).out);
}

// A copy killed after `after` trials are written leaves the target without the study or its ancestors, and the same
// copy run again then succeeds.
void ExpectKilledCopyLeavesNothing(const std::string& source, const std::string& target) {
  const auto killed = RunDltune(fmt::format("copy {} --with-lineage --from '{}' --to '{}'", kChild, source, target), {},
                                "DLTUNE_INJECT_FAULT=kill@copy:4");
  ASSERT_EQ(killed.exit_code, 128 + SIGKILL) << killed.out << killed.err;
  EXPECT_EQ(RecordsOf(target, kParent), "no study copy-parent");
  EXPECT_EQ(RecordsOf(target, kChild), "no study copy-child");
  EXPECT_EQ(OpenStoreReadOnly(target)->ListStudies().size(), 0U);
  const auto again = RunDltune(fmt::format("copy {} --with-lineage --from '{}' --to '{}'", kChild, source, target));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  for (const char* study : {kParent, kChild}) EXPECT_EQ(RecordsOf(source, study), RecordsOf(target, study));
}

TEST_F(StoreCopy, AKilledCopyLeavesNothingInTheTarget) { ExpectKilledCopyLeavesNothing(source_, Sqlite("lab.db")); }

// PostgreSQL: the throw-away server of the `postgres` fixture, each test in a schema of its own (fresh ids).
class StoreCopyPostgres : public StoreCopy {
 protected:
  void SetUp() override {
    StoreCopy::SetUp();
    std::ifstream in(DLTUNE_PG_URL_FILE);
    std::getline(in, server_);
    ASSERT_FALSE(server_.empty()) << "no PostgreSQL test server: " << DLTUNE_PG_URL_FILE
                                  << " is missing (the postgres_start fixture must run first)";
    schema_ = fmt::format("copy_{}_{}", ::getpid(), ++count_);
    internal::OpenPostgres(server_)->Execute("CREATE SCHEMA " + schema_);
    postgres_ = server_ + (server_.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" + schema_;
  }
  void TearDown() override {
    if (!schema_.empty()) internal::OpenPostgres(server_)->Execute("DROP SCHEMA " + schema_ + " CASCADE");
    StoreCopy::TearDown();
  }

  std::string server_, schema_, postgres_;
  static inline int count_ = 0;
};

TEST_F(StoreCopyPostgres, SqliteToPostgresToSqliteKeepsEveryRecord) {
  const auto up = RunDltune(fmt::format("copy {} --with-lineage --from {} --to '{}'", kChild, source_, postgres_));
  ASSERT_EQ(up.exit_code, 0) << up.err;
  const std::string back = Sqlite("back.db");
  const auto down = RunDltune(fmt::format("copy {} --with-lineage --from '{}' --to {}", kChild, postgres_, back));
  ASSERT_EQ(down.exit_code, 0) << down.err;
  for (const char* study : {kParent, kChild}) {
    EXPECT_EQ(RecordsOf(source_, study), RecordsOf(postgres_, study)) << study;
    EXPECT_EQ(RecordsOf(source_, study), RecordsOf(back, study)) << study;
  }
  ExpectSameViews(source_, postgres_);
  ExpectSameViews(source_, back);
}

TEST_F(StoreCopyPostgres, AKilledCopyLeavesNothingInTheTarget) { ExpectKilledCopyLeavesNothing(source_, postgres_); }

}  // namespace
}  // namespace dltune
