// One contract, every backend: the same tests run against SQLite and PostgreSQL (a throw-away server started by
// the `postgres` CTest fixture; these tests fail, never skip, when it is missing).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/store/store.h"
#include "src/store/sql_connection.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

std::string UniqueName(const std::string& prefix) {
  static int counter = 0;
  std::random_device device;
  return prefix + "_" + std::to_string(::getpid()) + "_" + std::to_string(++counter) + "_" +
         std::to_string(device() % 100000);
}

std::string PostgresUrl() {
  std::ifstream in(DLTUNE_PG_URL_FILE);
  std::string url;
  std::getline(in, url);
  return url;
}

class StoreContract : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "sqlite") {
      dir_ = std::filesystem::temp_directory_path() / UniqueName("dltune_store_test");
      std::filesystem::create_directories(dir_);
      url_ = "sqlite://" + (dir_ / "store.db").string();
    } else {
      url_ = PostgresUrl();
      ASSERT_FALSE(url_.empty()) << "no PostgreSQL test server: " << DLTUNE_PG_URL_FILE
                                 << " is missing (the postgres_start fixture must run first)";
    }
    store_ = OpenStore(url_);
  }
  void TearDown() override {
    // Whatever the test did, the counts the store keeps agree with its trials.
    if (store_ && !HasFatalFailure()) {
      for (const auto& study : store_->ListStudies()) {
        TrialCounts tally;
        for (const auto& trial : store_->ListTrials(study.id)) {
          ++tally.by_state[static_cast<std::size_t>(trial.state)];
          ++tally.made;
        }
        const TrialCounts kept = store_->CountTrials(study.id);
        EXPECT_EQ(kept.by_state, tally.by_state) << "study " << study.name;
        EXPECT_EQ(kept.made, tally.made) << "study " << study.name;
      }
    }
    store_.reset();
    if (!dir_.empty()) dltune::RemoveTree(dir_);
  }

  StudyRecord NewStudyWithTrials(int count, const std::string& prefix = "study") {
    NewStudy study;
    study.name = UniqueName(prefix);
    study.description = "a study";
    study.spec_text = "name: x\n";
    study.spec_hash = "abc";
    const StudyRecord record = store_->CreateStudy(study);
    std::vector<NewTrial> trials;
    for (int i = 0; i < count; ++i) {
      trials.push_back({static_cast<std::uint64_t>(i),
                        static_cast<std::size_t>(i % 2),
                        i % 2 ? "o=b" : "o=a",
                        {{"lr", Value(0.001 * (i + 1))}, {"o", Value(std::string(i % 2 ? "b" : "a"))}},
                        static_cast<std::uint64_t>(100 + i)});
    }
    store_->AddTrials(record.id, trials);
    return record;
  }

  std::filesystem::path dir_;
  std::string url_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreContract, StudiesRoundTrip) {
  NewStudy study;
  study.name = UniqueName("tracked");
  study.description = "Nesterov vs Adam";
  study.spec_text = "name: tracked\nspace: {}\n";
  study.spec_hash = "0123abcd";
  study.spec_path = "/home/me/study.yaml";
  study.command_line = "dltune run study.yaml";
  study.dltune_version = "0.1.0";
  study.git_commit = "deadbeef";
  study.reproduction = R"({"os":"Linux","environment":{"OMP_NUM_THREADS":"1"}})";
  study.git_patch = "diff --git a/x b/x\n+é\n";
  const StudyRecord created = store_->CreateStudy(study);
  EXPECT_GT(created.id, 0);
  EXPECT_GT(created.created_at, 1.6e9);
  const auto found = store_->FindStudy(study.name);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->description, study.description);
  EXPECT_EQ(found->spec_text, study.spec_text);
  EXPECT_EQ(found->spec_path, study.spec_path);
  EXPECT_EQ(found->command_line, study.command_line);
  EXPECT_EQ(found->git_commit, study.git_commit);
  EXPECT_EQ(found->reproduction, study.reproduction);
  EXPECT_EQ(created.reproduction, study.reproduction);
  EXPECT_EQ(store_->StudyPatch(found->id), study.git_patch);
  EXPECT_FALSE(store_->FindStudy(study.name + "_absent"));
  try {
    store_->CreateStudy(study);
    FAIL() << "a second study of the same name";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("already exists"));
  }
  const auto all = store_->ListStudies();
  EXPECT_TRUE(std::any_of(all.begin(), all.end(), [&](const StudyRecord& s) { return s.name == study.name; }));
  EXPECT_EQ(store_->SchemaVersion(), kStoreSchemaVersion);
}

TEST_P(StoreContract, TrialsKeepTypedParams) {
  const StudyRecord study = NewStudyWithTrials(0);
  const Assignment params = {{"lr", Value(0.1 + 0.2)},
                             {"tiny", Value(1e-300)},
                             {"width", Value(std::int64_t{256})},
                             {"big", Value(std::int64_t{1} << 60)},
                             {"bn", Value(true)},
                             {"act", Value(std::string("relu \"quoted\""))}};
  store_->AddTrials(study.id, {{7, 1, "act=relu", params, 42}});
  const auto trial = store_->FindTrial(study.id, 7);
  ASSERT_TRUE(trial);
  EXPECT_EQ(trial->params, params);  // bit-exact reals, integers stay integers
  EXPECT_EQ(trial->substudy, 1u);
  EXPECT_EQ(trial->substudy_label, "act=relu");
  EXPECT_EQ(trial->seed, 42u);
  EXPECT_EQ(trial->state, TrialState::kPending);
  EXPECT_THROW(store_->AddTrials(study.id, {{7, 0, "", {}, 0}}), Error);
  EXPECT_FALSE(store_->FindTrial(study.id, 8));
}

TEST_P(StoreContract, ClaimsInOrderAndFinishedTrialsAreImmutable) {
  const StudyRecord study = NewStudyWithTrials(3);
  auto first = store_->ClaimNext(study.id, "w1");
  auto second = store_->ClaimNext(study.id, "w2");
  ASSERT_TRUE(first && second);
  EXPECT_EQ(first->first.number, 0u);
  EXPECT_EQ(second->first.number, 1u);
  EXPECT_EQ(first->first.state, TrialState::kRunning);
  EXPECT_EQ(first->first.worker, "w1");
  EXPECT_TRUE(first->first.started_at.has_value());
  EXPECT_TRUE(first->first.heartbeat_at.has_value());
  EXPECT_TRUE(store_->ClaimNext(study.id, "w3"));
  EXPECT_FALSE(store_->ClaimNext(study.id, "w3"));  // none left

  const TrialLease lease = first->second;
  store_->Heartbeat(lease);
  EXPECT_THROW(store_->Heartbeat({lease.trial_id, "w2"}), LeaseLostError);  // not its holder
  store_->Finish(lease, {.state = TrialState::kCompleted, .final_value = 0.25});
  const auto done = store_->FindTrial(study.id, 0);
  EXPECT_EQ(done->state, TrialState::kCompleted);
  EXPECT_EQ(done->final_value, 0.25);
  EXPECT_TRUE(done->ended_at.has_value());
  EXPECT_GE(*done->ended_at, *done->started_at);

  // Finished trials are immutable: every write about them is refused.
  MeasurementBatch batch;
  batch.train.push_back({.step = 5, .loss = 0.5});
  EXPECT_THROW(store_->Record(lease, batch), LeaseLostError);
  EXPECT_THROW(store_->Heartbeat(lease), LeaseLostError);
  EXPECT_THROW(store_->Finish(lease, {.state = TrialState::kFailed, .reason = "again"}), LeaseLostError);
  EXPECT_THROW(
      store_->AddCheckpoint(lease, {.step = 5, .path = "/ckpt", .checksum = "sum", .pool = CheckpointPool::kBest}),
      LeaseLostError);
  EXPECT_THROW(store_->TruncateAfter(lease, 0), LeaseLostError);
  EXPECT_EQ(store_->FindTrial(study.id, 0)->state, TrialState::kCompleted);
  EXPECT_TRUE(store_->TrainSeries(lease.trial_id).empty());
  EXPECT_THROW(store_->Finish(second->second, {.state = TrialState::kPending}), Error);

  store_->Finish(second->second, {.state = TrialState::kInfeasible, .reason = "loss is NaN at step 120"});
  EXPECT_EQ(store_->FindTrial(study.id, 1)->reason, "loss is NaN at step 120");
  // A crashed process's stderr may hold anything; the store keeps what text it can.
  const auto third = store_->FindTrial(study.id, 2);
  const char raw_stderr[] = "bad \xFF byte and a NUL \0 here";
  store_->Finish({third->id, "w3"}, {.state = TrialState::kFailed,
                                     .reason = "exit status 139",
                                     .exit_status = 139,
                                     .stderr_tail = std::string(raw_stderr, sizeof raw_stderr - 1)});
  EXPECT_EQ(store_->FindTrial(study.id, 2)->stderr_tail, "bad \xEF\xBF\xBD byte and a NUL  here");
  EXPECT_THROW(store_->ClaimNext(study.id, ""), Error);
}

TEST_P(StoreContract, MeasurementsRoundTripInOrder) {
  const StudyRecord study = NewStudyWithTrials(2);
  const auto claim = store_->ClaimNext(study.id, "w");
  const TrialLease& lease = claim->second;
  MeasurementBatch batch;
  for (int step = 3; step >= 1; --step) {
    TrainMeasurement m;
    m.step = step;
    m.loss = 1.0 / step;
    m.learning_rate = 0.1;
    m.grad_norm = 2.5;
    m.clipped = step == 2;
    m.step_time = 0.01;
    m.data_wait = 0.001;
    m.examples_per_second = 12800;
    batch.train.push_back(m);
  }
  batch.train.push_back({.step = 4});  // every value absent
  batch.evals = {
      {2, "valid", "error_rate", 0.3, 10000}, {2, "train", "loss", 0.7, 5000}, {4, "valid", "error_rate", 0.2, 10000}};
  batch.best_step = 4;
  batch.best_value = 0.2;
  store_->Record(lease, batch);

  const auto train = store_->TrainSeries(lease.trial_id);
  ASSERT_EQ(train.size(), 4u);
  EXPECT_EQ(train[0].step, 1);
  EXPECT_EQ(train[0].loss, 1.0);
  EXPECT_EQ(train[1].clipped, true);
  EXPECT_EQ(train[2].clipped, false);
  EXPECT_EQ(train[2].loss, 1.0 / 3);
  EXPECT_EQ(train[2].examples_per_second, 12800.0);
  EXPECT_FALSE(train[3].loss.has_value());
  EXPECT_FALSE(train[3].clipped.has_value());
  const auto evals = store_->EvalSeries(lease.trial_id);
  ASSERT_EQ(evals.size(), 3u);
  EXPECT_EQ(evals[0].split, "train");  // ordered by step, split, metric
  EXPECT_EQ(evals[1].examples, 10000);
  const auto trial = store_->FindTrial(study.id, 0);
  EXPECT_EQ(trial->best_step, 4);
  EXPECT_EQ(trial->best_value, 0.2);

  const auto rows = store_->StudyEvaluations(study.id);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[2].trial_number, 0u);
  EXPECT_EQ(rows[2].eval.value, 0.2);
  const auto steps = store_->StudyTraining(study.id);
  ASSERT_EQ(steps.size(), train.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(steps[i].trial_number, 0u);
    EXPECT_EQ(steps[i].train.step, train[i].step);
    EXPECT_EQ(steps[i].train.loss, train[i].loss);
    EXPECT_EQ(steps[i].train.clipped, train[i].clipped);
  }

  // A resumed trial drops what came after its checkpoint.
  store_->TruncateAfter(lease, 2);
  EXPECT_EQ(store_->TrainSeries(lease.trial_id).size(), 2u);
  EXPECT_EQ(store_->EvalSeries(lease.trial_id).size(), 2u);
  // Re-recording a step replaces it.
  MeasurementBatch again;
  again.train.push_back({.step = 2, .loss = 0.123});
  store_->Record(lease, again);
  EXPECT_EQ(store_->TrainSeries(lease.trial_id)[1].loss, 0.123);
  EXPECT_THROW(store_->Record(lease, MeasurementBatch{.best_step = 3}), Error);
}

TEST_P(StoreContract, StaleTrialsAreReclaimedThenFail) {
  const StudyRecord study = NewStudyWithTrials(1);
  auto claim = store_->ClaimNext(study.id, "lost-worker");
  store_->AddCheckpoint(claim->second, {.step = 10, .path = "/ckpt/10", .objective = 0.4, .checksum = "sum10"});
  MeasurementBatch batch;
  batch.train.push_back({.step = 10, .loss = 0.4});
  store_->Record(claim->second, batch);

  EXPECT_TRUE(store_->ReclaimStale(study.id, 3600, 2).empty());  // heartbeat is fresh
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto reclaimed = store_->ReclaimStale(study.id, 0.01, 2);
  ASSERT_EQ(reclaimed.size(), 1u);
  EXPECT_EQ(reclaimed[0].worker, "lost-worker");
  EXPECT_EQ(reclaimed[0].new_state, TrialState::kPending);
  auto trial = store_->FindTrial(study.id, 0);
  EXPECT_EQ(trial->state, TrialState::kPending);
  // It had got somewhere (step 10): losing its worker does not count against it.
  EXPECT_FALSE(reclaimed[0].counted);
  EXPECT_EQ(trial->retries, 0);
  EXPECT_THAT(trial->reason, HasSubstr("stopped heartbeating at step 10"));
  // The lost worker's lease is gone; its checkpoints and measurements stay for the resume.
  EXPECT_THROW(store_->Record(claim->second, batch), LeaseLostError);
  EXPECT_EQ(store_->ListCheckpoints(claim->second.trial_id).size(), 1u);
  EXPECT_EQ(store_->TrainSeries(claim->second.trial_id).size(), 1u);

  // Workers lost before the trial gets further than step 10 count, up to the limit (2), then it fails.
  for (const char* worker : {"second-worker", "third-worker", "fourth-worker"}) {
    claim = store_->ClaimNext(study.id, worker);
    ASSERT_TRUE(claim) << worker;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto again = store_->ReclaimStale(study.id, 0.01, 2);
    ASSERT_EQ(again.size(), 1u);
    EXPECT_TRUE(again[0].counted);
    EXPECT_EQ(again[0].new_state, std::string(worker) == "fourth-worker" ? TrialState::kFailed : TrialState::kPending);
  }
  trial = store_->FindTrial(study.id, 0);
  EXPECT_EQ(trial->state, TrialState::kFailed);
  EXPECT_EQ(trial->retries, 3);
  EXPECT_THAT(trial->reason, HasSubstr("the limit"));
  EXPECT_FALSE(store_->ClaimNext(study.id, "fifth-worker"));
}

// A failed trial goes back to pending only when asked; completed and infeasible ones never do.
TEST_P(StoreContract, FailedTrialsAreRetriedOnRequest) {
  const StudyRecord study = NewStudyWithTrials(3);
  for (const TrialState state : {TrialState::kFailed, TrialState::kCompleted, TrialState::kInfeasible}) {
    auto claim = store_->ClaimNext(study.id, "w");
    store_->Finish(claim->second, {.state = state, .reason = "it broke", .final_value = 0.5});
  }
  EXPECT_EQ(store_->RetryFailed(study.id), 1);
  const auto trial = store_->FindTrial(study.id, 0);
  EXPECT_EQ(trial->state, TrialState::kPending);
  EXPECT_THAT(trial->reason, HasSubstr("retried after it failed: it broke"));
  EXPECT_EQ(store_->FindTrial(study.id, 1)->state, TrialState::kCompleted);
  EXPECT_EQ(store_->FindTrial(study.id, 2)->state, TrialState::kInfeasible);
  EXPECT_EQ(store_->RetryFailed(study.id), 0);
  EXPECT_EQ(store_->ClaimNext(study.id, "w")->first.number, 0u);
}

// An extended study keeps its id, uid and trials; only its spec is new.
TEST_P(StoreContract, AnExtendedStudyKeepsItsTrials) {
  const StudyRecord study = NewStudyWithTrials(2);
  auto claim = store_->ClaimNext(study.id, "w");
  store_->Finish(claim->second, {.state = TrialState::kCompleted, .final_value = 0.5});
  store_->ExtendStudy(study.id, "trials: 4\n", "h4", "four trials");
  const StudyRecord extended = *store_->FindStudy(study.name);
  EXPECT_EQ(extended.description, "four trials");  // the description says what the study now is
  EXPECT_EQ(extended.id, study.id);
  EXPECT_EQ(extended.uid, study.uid);
  EXPECT_EQ(extended.spec_text, "trials: 4\n");
  EXPECT_EQ(extended.spec_hash, "h4");
  EXPECT_GE(extended.updated_at, study.updated_at);
  EXPECT_EQ(store_->CountTrials(study.id).made, 2);
  EXPECT_EQ(store_->FindTrial(study.id, 0)->state, TrialState::kCompleted);
  EXPECT_THROW(store_->ExtendStudy(study.id + 1000, "x", "h", "x"), Error);
}

// A trial's configuration and replica, a study's parent and dirty flag, are kept as written.
TEST_P(StoreContract, ReplicasAndLineageAreRecorded) {
  NewStudy parent_study{.name = UniqueName("parent"), .spec_text = "x", .spec_hash = "h"};
  const StudyRecord parent = store_->CreateStudy(parent_study);
  NewStudy child_study{
      .name = UniqueName("child"), .spec_text = "x", .spec_hash = "h", .git_dirty = true, .parent = parent.name};
  const StudyRecord child = store_->CreateStudy(child_study);
  EXPECT_EQ(child.parent, parent.name);
  EXPECT_EQ(child.git_dirty, std::optional<bool>(true));
  EXPECT_FALSE(parent.git_dirty.has_value());
  EXPECT_GE(store_->FindStudy(parent.name)->updated_at, child.created_at);  // the parent's page lists its children
  store_->AddTrials(child.id, {{.number = 0, .substudy_label = "all", .seed = 7, .configuration = 0, .replica = 0},
                               {.number = 1, .substudy_label = "all", .seed = 9, .configuration = 1, .replica = 0},
                               {.number = 2, .substudy_label = "all", .seed = 8, .configuration = 0, .replica = 1}});
  const auto trials = store_->ListTrials(child.id);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(trials[2].configuration, 0u);
  EXPECT_EQ(trials[2].replica, 1u);
  EXPECT_EQ(trials[1].configuration, 1u);
  EXPECT_EQ(store_->ClaimNext(child.id, "w")->first.replica, 0u);
}

// The decision log: notes and decisions in order, evaluations of checkpoints, launches with their evaluation.
TEST_P(StoreContract, NotesEvaluationsAndLaunches) {
  const StudyRecord study = NewStudyWithTrials(2);
  const double before = store_->FindStudy(study.name)->updated_at;
  const StudyNote note =
      store_->AddNote(study.id, {.kind = NoteKind::kNote, .text = "adam at the edge", .author = "a@h"});
  EXPECT_GT(note.id, 0);
  EXPECT_GT(note.created_at, 0);
  store_->AddNote(study.id, {.kind = NoteKind::kDecision, .adopt = "trial 1 (o=b)", .text = "better", .author = "a@h"});
  const auto notes = store_->ListNotes(study.id);
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0].text, "adam at the edge");
  EXPECT_EQ(notes[1].kind, NoteKind::kDecision);
  EXPECT_EQ(notes[1].adopt, "trial 1 (o=b)");
  EXPECT_GE(store_->FindStudy(study.name)->updated_at, before);

  const CheckpointEvaluation evaluation =
      store_->AddEvaluation(study.id, {.trial = 1,
                                       .step = 50,
                                       .checkpoint_path = "/c/step_50",
                                       .checksum = "sha256:ab",
                                       .split = "valid",
                                       .metrics = {{"error_rate", 0.125}, {"loss", 0.3}},
                                       .examples = 800});
  EXPECT_EQ(evaluation.trial, 1u);
  EXPECT_EQ(evaluation.metrics.at("error_rate"), 0.125);
  EXPECT_THROW(store_->AddEvaluation(study.id, {.trial = 99, .split = "test"}), Error);
  LaunchRecord launch{.evaluation = {.trial = 0,
                                     .step = 40,
                                     .checkpoint_path = "/c/step_40",
                                     .checksum = "sha256:cd",
                                     .split = "test",
                                     .metrics = {{"error_rate", 0.1}},
                                     .examples = 1000},
                      .reason = "the best",
                      .author = "a@h",
                      .git_commit = "0123",
                      .git_dirty = false,
                      .export_path = "/m/model.pt"};
  const LaunchRecord stored = store_->AddLaunch(study.id, launch);
  EXPECT_EQ(stored.study, study.name);
  EXPECT_EQ(stored.evaluation.step, 40);
  EXPECT_EQ(stored.evaluation.metrics.at("error_rate"), 0.1);
  EXPECT_EQ(stored.git_dirty, std::optional<bool>(false));
  const auto evaluations = store_->ListEvaluations(study.id);
  ASSERT_EQ(evaluations.size(), 2u);  // the launch's evaluation is one of the study's
  EXPECT_EQ(evaluations[1].split, "test");
  EXPECT_EQ(store_->ListLaunches(study.id).size(), 1u);
  EXPECT_GE(store_->ListLaunches(0).size(), 1u);  // every study's
  // The decision a launch carried out is recorded with it.
  launch.decision = notes[1].id;
  EXPECT_EQ(store_->AddLaunch(study.id, launch).decision, std::optional<std::int64_t>(notes[1].id));
}

// Deleting a study removes every record of it and of its trials, and nothing of another study; its name is free.
TEST_P(StoreContract, DeletingAStudyRemovesEveryRecordOfItAndNoOther) {
  const StudyRecord doomed = NewStudyWithTrials(3);
  const StudyRecord kept = NewStudyWithTrials(2);
  for (const StudyRecord& study : {doomed, kept}) {
    const auto claim = store_->ClaimNext(study.id, "w");
    store_->Record(claim->second, {.train = {{.step = 1, .loss = 0.5}},
                                   .evals = {{1, "valid", "error_rate", 0.4, 10}},
                                   .best_step = 1,
                                   .best_value = 0.4});
    store_->AddCheckpoint(claim->second, {.step = 1, .path = "/c/1", .objective = 0.4, .checksum = ""});
    store_->Finish(claim->second, {.state = TrialState::kCompleted, .final_value = 0.4});
    store_->AddNote(study.id, {.kind = NoteKind::kDecision, .adopt = "trial 0 (all)", .text = "t", .author = "a"});
    store_->AddLaunch(study.id, {.evaluation = {.trial = 0,
                                                .step = 1,
                                                .checkpoint_path = "/c/1",
                                                .split = "test",
                                                .metrics = {{"error_rate", 0.4}},
                                                .examples = 10},
                                 .reason = "r"});
  }
  const std::int64_t kept_trial = store_->FindTrial(kept.id, 0)->id;
  store_->DeleteStudy(doomed.id);
  EXPECT_FALSE(store_->FindStudy(doomed.name));
  EXPECT_EQ(store_->CountTrials(doomed.id).made, 0);
  EXPECT_TRUE(store_->ListNotes(doomed.id).empty());
  EXPECT_TRUE(store_->ListEvaluations(doomed.id).empty());
  EXPECT_TRUE(store_->ListLaunches(doomed.id).empty());
  EXPECT_TRUE(store_->StudyTraining(doomed.id).empty());
  EXPECT_EQ(store_->CountTrials(kept.id).made, 2);
  EXPECT_EQ(store_->TrainSeries(kept_trial).size(), 1u);
  EXPECT_EQ(store_->ListCheckpoints(kept_trial).size(), 1u);
  EXPECT_EQ(store_->ListLaunches(kept.id).size(), 1u);
  EXPECT_THROW(store_->DeleteStudy(doomed.id), Error);
  EXPECT_NO_THROW(store_->CreateStudy({.name = doomed.name, .spec_text = "y", .spec_hash = "h2"}));
}

// Counts and best trials come from indexed queries, the same as from the trial list.
TEST_P(StoreContract, CountsAndBestTrialsWithoutListingTrials) {
  const StudyRecord study = store_->CreateStudy({.name = "counted", .spec_text = "x", .spec_hash = "h"});
  std::vector<NewTrial> trials;
  for (std::uint64_t n = 0; n < 6; ++n) {
    trials.push_back({.number = n, .substudy = n % 2, .substudy_label = n % 2 ? "b" : "a", .params = {}, .seed = n});
  }
  store_->AddTrials(study.id, trials);
  EXPECT_EQ(store_->CountTrials(study.id).made, 6);
  EXPECT_EQ(store_->CountTrials(study.id).max_number, 5u);
  const double values[] = {0.5, 0.3, 0.4, 0.1, 0.9};  // trials 0-4 complete; trial 5 stays pending
  for (int n = 0; n < 5; ++n) {
    auto claim = store_->ClaimNext(study.id, "w");
    store_->Record(claim->second, {.best_step = 1, .best_value = values[n]});
    store_->Finish(claim->second, {.state = TrialState::kCompleted, .final_value = values[n]});
  }
  const TrialCounts counts = store_->CountTrials(study.id);
  EXPECT_EQ(counts.Count(TrialState::kCompleted), 5);
  EXPECT_EQ(counts.Count(TrialState::kPending), 1);
  const auto best = store_->BestTrials(study.id, Direction::kMinimize, 2, false);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].number, 3u);
  EXPECT_EQ(best[1].number, 1u);
  const auto per_substudy = store_->BestTrials(study.id, Direction::kMinimize, 10, true);
  ASSERT_EQ(per_substudy.size(), 2u);
  EXPECT_EQ(per_substudy[0].number, 2u);  // sub-study a: trials 0, 2, 4 -> 0.4 is its best
  EXPECT_EQ(per_substudy[1].number, 3u);
  EXPECT_EQ(store_->BestTrials(study.id, Direction::kMaximize, 1, false)[0].number, 4u);
  EXPECT_EQ(store_->ListTrialsInState(study.id, TrialState::kPending).size(), 1u);
  EXPECT_EQ(store_->ListTrialsInState(study.id, TrialState::kCompleted, 2).size(), 2u);
}

TEST_P(StoreContract, AGoneWorkersTrialsAreReclaimedAtOnce) {
  const StudyRecord study = NewStudyWithTrials(3);
  const auto gone = store_->ClaimNext(study.id, "host:1");
  const auto alive = store_->ClaimNext(study.id, "host:2");
  const auto reclaimed = store_->ReclaimWorker(study.id, "host:1");
  ASSERT_EQ(reclaimed.size(), 1u);
  EXPECT_EQ(reclaimed[0].number, gone->first.number);
  EXPECT_EQ(reclaimed[0].new_state, TrialState::kPending);
  EXPECT_FALSE(reclaimed[0].counted);
  EXPECT_EQ(store_->FindTrial(study.id, alive->first.number)->state, TrialState::kRunning);
  EXPECT_THROW(store_->Heartbeat(gone->second), LeaseLostError);
  // A worker killed from outside again and again, before its trial gets anywhere, never uses up the trial's retries.
  for (int kill = 0; kill < 5; ++kill) {
    const auto again = store_->ClaimNext(study.id, "host:1");
    ASSERT_EQ(again->first.number, gone->first.number);
    EXPECT_EQ(again->first.retries, 0);
    const auto back = store_->ReclaimWorker(study.id, "host:1");
    ASSERT_EQ(back.size(), 1u);
    EXPECT_EQ(back[0].new_state, TrialState::kPending);
  }
  EXPECT_NE(store_->FindTrial(study.id, gone->first.number)->reason.find("is gone"), std::string::npos);
}

TEST_P(StoreContract, StoppedTrialsResume) {
  const StudyRecord study = NewStudyWithTrials(2);
  const auto claim = store_->ClaimNext(study.id, "w");
  store_->Finish(claim->second, {.state = TrialState::kStopped, .reason = "interrupted"});
  EXPECT_EQ(store_->FindTrial(study.id, 0)->state, TrialState::kStopped);
  EXPECT_FALSE(store_->FindTrial(study.id, 0)->ended_at.has_value());
  EXPECT_EQ(store_->ClaimNext(study.id, "w")->first.number, 1u);  // stopped trials are not claimed
  EXPECT_EQ(store_->ResumeStopped(study.id), 1);
  EXPECT_EQ(store_->ClaimNext(study.id, "w")->first.number, 0u);
}

// Where a trial's time went: each attempt's split is added to the earlier ones' when it ends.
TEST_P(StoreContract, EachAttemptsTimeIsAddedToTheTrials) {
  const StudyRecord study = NewStudyWithTrials(1);
  EXPECT_TRUE(store_->FindTrial(study.id, 0)->time_split.empty());
  auto claim = store_->ClaimNext(study.id, "w");
  store_->Finish(
      claim->second,
      {.state = TrialState::kStopped, .reason = "interrupted", .time_split = {{"startup", 1.5}, {"train", 2.25}}});
  EXPECT_EQ(store_->ResumeStopped(study.id), 1);
  claim = store_->ClaimNext(study.id, "w");
  store_->Finish(
      claim->second,
      {.state = TrialState::kCompleted, .final_value = 0.5, .time_split = {{"startup", 0.5}, {"evaluation", 0.125}}});
  const TimeSplit expected = {{"startup", 2.0}, {"train", 2.25}, {"evaluation", 0.125}};
  EXPECT_EQ(store_->FindTrial(study.id, 0)->time_split, expected);
  EXPECT_EQ(store_->ListTrials(study.id).front().time_split, expected);
}

// The resources of a trial's latest attempt that recorded some: replaced, never merged; kept by one that did not.
TEST_P(StoreContract, TheLatestAttemptsResourcesAreKept) {
  const StudyRecord study = NewStudyWithTrials(1);
  EXPECT_EQ(store_->FindTrial(study.id, 0)->resources, "{}");
  auto claim = store_->ClaimNext(study.id, "w");
  store_->Finish(claim->second, {.state = TrialState::kStopped,
                                 .reason = "interrupted",
                                 .resources = R"({"gpus": [{"uuid": "GPU-1"}], "peak_memory_bytes": 1024})"});
  EXPECT_EQ(store_->FindTrial(study.id, 0)->resources, R"({"gpus":[{"uuid":"GPU-1"}],"peak_memory_bytes":1024})");
  EXPECT_EQ(store_->ResumeStopped(study.id), 1);
  claim = store_->ClaimNext(study.id, "w");
  store_->Finish(claim->second, {.state = TrialState::kStopped, .reason = "interrupted again"});
  EXPECT_EQ(store_->ListTrials(study.id).front().resources, R"({"gpus":[{"uuid":"GPU-1"}],"peak_memory_bytes":1024})");
  EXPECT_EQ(store_->ResumeStopped(study.id), 1);
  claim = store_->ClaimNext(study.id, "w");
  EXPECT_THROW(store_->Finish(claim->second, {.state = TrialState::kCompleted, .resources = "[1]"}), Error);
  store_->Finish(claim->second, {.state = TrialState::kCompleted, .resources = R"({"gpus": [{"uuid": "GPU-2"}]})"});
  EXPECT_EQ(store_->FindTrial(study.id, 0)->resources, R"({"gpus":[{"uuid":"GPU-2"}]})");
}

TEST_P(StoreContract, CheckpointsAreTracked) {
  const StudyRecord study = NewStudyWithTrials(1);
  const auto claim = store_->ClaimNext(study.id, "w");
  const std::int64_t a = store_->AddCheckpoint(
      claim->second,
      {.step = 200, .path = "/c/200", .objective = 0.3, .checksum = "s200", .pool = CheckpointPool::kBest});
  const std::int64_t b = store_->AddCheckpoint(claim->second, {.step = 100, .path = "/c/100", .checksum = "s100"});
  store_->MarkCheckpointDeleted(claim->second, b);
  const auto checkpoints = store_->ListCheckpoints(claim->second.trial_id);
  ASSERT_EQ(checkpoints.size(), 2u);
  EXPECT_EQ(checkpoints[0].id, b);
  EXPECT_TRUE(checkpoints[0].deleted);
  EXPECT_FALSE(checkpoints[0].objective.has_value());
  EXPECT_EQ(checkpoints[1].id, a);
  EXPECT_EQ(checkpoints[1].pool, CheckpointPool::kBest);
  EXPECT_EQ(checkpoints[1].checksum, "s200");
  EXPECT_FALSE(checkpoints[1].deleted);
}

// --- Many processes -------------------------------------------------------------------------------------------

struct Child {
  pid_t pid = 0;
  FILE* out = nullptr;
};

Child Spawn(const std::vector<std::string>& args) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) throw std::runtime_error("pipe");
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipe_fds[1], 1);
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::vector<char*> argv;
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(pipe_fds[1]);
  return {pid, fdopen(pipe_fds[0], "r")};
}

std::vector<std::string> ReadLines(FILE* out) {
  std::vector<std::string> lines;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, out) != nullptr) lines.emplace_back(buffer);
  return lines;
}

int Wait(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void DrainWithProcesses(Store& store, const std::string& url, int processes, int trials, int rows) {
  NewStudy study;
  study.name = UniqueName("drain");
  study.spec_text = "x";
  const StudyRecord record = store.CreateStudy(study);
  std::vector<NewTrial> new_trials;
  for (int i = 0; i < trials; ++i) new_trials.push_back({static_cast<std::uint64_t>(i), 0, "all", {}, 0});
  store.AddTrials(record.id, new_trials);

  std::vector<Child> children;
  for (int p = 0; p < processes; ++p) {
    children.push_back(
        Spawn({DLTUNE_STORE_WORKER, url, study.name, "worker" + std::to_string(p), "drain", std::to_string(rows)}));
  }
  std::multiset<std::string> claimed;
  for (auto& child : children) {
    for (const auto& line : ReadLines(child.out)) claimed.insert(line);
    std::fclose(child.out);
    EXPECT_EQ(Wait(child.pid), 0) << "a worker process failed (see its stderr above)";
  }
  // Each trial claimed exactly once, completed, with every measurement row.
  EXPECT_EQ(claimed.size(), static_cast<std::size_t>(trials));
  EXPECT_EQ(std::set<std::string>(claimed.begin(), claimed.end()).size(), static_cast<std::size_t>(trials));
  for (const auto& trial : store.ListTrials(record.id)) {
    EXPECT_EQ(trial.state, TrialState::kCompleted) << trial.number;
    EXPECT_EQ(store.TrainSeries(trial.id).size(), static_cast<std::size_t>(rows)) << trial.number;
    EXPECT_EQ(store.EvalSeries(trial.id).size(), static_cast<std::size_t>((rows + 49) / 50)) << trial.number;
  }
}

TEST_P(StoreContract, EightProcessesCompleteEachTrialExactlyOnce) { DrainWithProcesses(*store_, url_, 8, 64, 120); }

TEST_P(StoreContract, KilledWorkerLeavesAConsistentStoreAndItsTrialIsReclaimed) {
  const StudyRecord study = NewStudyWithTrials(3);
  Child child = Spawn({DLTUNE_STORE_WORKER, url_, study.name, "doomed", "hold"});
  char line[128] = {0};
  ASSERT_NE(std::fgets(line, sizeof line, child.out), nullptr);
  EXPECT_THAT(line, HasSubstr("holding 0"));
  kill(child.pid, SIGKILL);
  EXPECT_EQ(Wait(child.pid), 128 + SIGKILL);
  std::fclose(child.out);

  auto reopened = OpenStore(url_);  // the database opens and reads fine after the kill
  auto trial = reopened->FindTrial(study.id, 0);
  EXPECT_EQ(trial->state, TrialState::kRunning);
  EXPECT_EQ(trial->worker, "doomed");
  EXPECT_EQ(reopened->TrainSeries(trial->id).size(), 10u);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto reclaimed = reopened->ReclaimStale(study.id, 0.05, 3);
  ASSERT_EQ(reclaimed.size(), 1u);
  EXPECT_EQ(reclaimed[0].number, 0u);
  const auto again = reopened->ClaimNext(study.id, "rescuer");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->first.number, 0u);
  EXPECT_EQ(again->first.retries, 0);  // it had recorded steps: its lost worker does not count against it
  reopened->Finish(again->second, {.state = TrialState::kCompleted, .final_value = 0.1});
  EXPECT_EQ(reopened->FindTrial(study.id, 0)->state, TrialState::kCompleted);
}

// The newest step a trial taken over may resume from (DLTUNE_RESUME_MAX_STEP): its newest recorded evaluation or
// kept checkpoint.
std::int64_t ResumeLimit(Store& store, std::int64_t trial_id) {
  std::int64_t limit = 0;
  for (const auto& eval : store.EvalSeries(trial_id)) limit = std::max(limit, eval.step);
  for (const auto& checkpoint : store.ListCheckpoints(trial_id)) {
    if (!checkpoint.deleted) limit = std::max(limit, checkpoint.step);
  }
  return limit;
}

// Every training step up to the resume limit is recorded, once: resuming there leaves no gap.
void ExpectNothingAheadOfTheSteps(Store& store, std::int64_t trial_id, const std::string& when) {
  const std::int64_t limit = ResumeLimit(store, trial_id);
  const auto series = store.TrainSeries(trial_id);
  ASSERT_GE(static_cast<std::int64_t>(series.size()), limit)
      << when << ": a checkpoint or evaluation of step " << limit << " stands ahead of the " << series.size()
      << " steps recorded";
  for (std::int64_t step = 1; step <= limit; ++step) {
    ASSERT_EQ(series[static_cast<std::size_t>(step - 1)].step, step) << when << ": step " << step << " is missing";
  }
}

// A resumed attempt that begins before the newest recorded checkpoint (its files were gone: the trainer had deleted
// them before its worker recorded them) discards the checkpoints after its step with the measurements: killed before
// it trained that far again, the next attempt must not resume from one of them, past the steps recorded.
TEST_P(StoreContract, AResumedTrialForgetsTheCheckpointsItTrainsAgain) {
  const StudyRecord study = NewStudyWithTrials(1);
  auto first = store_->ClaimNext(study.id, "first");
  MeasurementBatch batch;
  for (int step = 1; step <= 500; ++step) batch.train.push_back({.step = step, .loss = 1.0});
  for (int step = 100; step <= 500; step += 100) batch.evals.push_back({step, "valid", "error_rate", 0.5, 10});
  store_->Record(first->second, batch);
  for (int step = 100; step <= 500; step += 100) {
    store_->AddCheckpoint(first->second, {.step = step, .path = "/c/" + std::to_string(step), .checksum = "x"});
  }
  ASSERT_EQ(store_->ReclaimWorker(study.id, "first").size(), 1u);  // its worker died

  auto second = store_->ClaimNext(study.id, "second");
  store_->TruncateAfter(second->second, 300);  // resumed from 300: 400 and 500 were gone
  for (const auto& checkpoint : store_->ListCheckpoints(second->first.id)) EXPECT_LE(checkpoint.step, 300);
  batch = {};
  for (int step = 301; step <= 350; ++step) batch.train.push_back({.step = step, .loss = 2.0});
  store_->Record(second->second, batch);
  ASSERT_EQ(store_->ReclaimWorker(study.id, "second").size(), 1u);  // killed at 350, before 400 and 500 again

  ExpectNothingAheadOfTheSteps(*store_, second->first.id, "after the second attempt");
  EXPECT_EQ(ResumeLimit(*store_, second->first.id), 300);
  EXPECT_EQ(store_->TrainSeries(second->first.id).size(), 350u);
}

// Workers killed with SIGKILL at any moment, some attempts resuming from an older checkpoint than the newest
// recorded one: after every kill, no checkpoint and no evaluation stands ahead of the training steps recorded, and
// the last attempt completes the series, each step once.
TEST_P(StoreContract, KilledWorkersNeverLeaveACheckpointAheadOfItsSteps) {
  const StudyRecord study = NewStudyWithTrials(1);
  const auto trial_id = store_->FindTrial(study.id, 0)->id;
  std::mt19937 random(static_cast<unsigned>(::getpid()));
  int attempt = 0;
  // Runs an attempt from `from` to step 1000 (a checkpoint every 100) and kills it once it recorded checkpoint
  // `after` (where it waits), or `delay_ms` after its claim, unless it ended first.
  const auto attempt_from = [&](std::int64_t from, std::int64_t after, int delay_ms) {
    const std::string worker = "w" + std::to_string(++attempt);
    Child child = Spawn({DLTUNE_STORE_WORKER, url_, study.name, worker, "train", std::to_string(from), "1000", "100",
                         std::to_string(after)});
    const std::string wanted = after > 0 ? "checkpoint " + std::to_string(after) + "\n" : "claimed 0\n";
    char line[64];
    bool seen = false;
    while (!seen && std::fgets(line, sizeof line, child.out) != nullptr) seen = wanted == line;
    EXPECT_TRUE(seen) << "attempt " << attempt << " ended before it printed " << wanted;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(child.pid, SIGKILL);
    const int status = Wait(child.pid);
    EXPECT_TRUE(status == 0 || status == 128 + SIGKILL) << "attempt " << attempt << " failed: " << status;
    std::fclose(child.out);
    // Its trial goes back once the server has ended the killed session's transaction (PostgreSQL may take a moment).
    for (int i = 0; i < 500; ++i) {
      store_->ReclaimWorker(study.id, worker);
      const TrialRecord trial = *store_->FindTrial(study.id, 0);
      if (trial.state != TrialState::kRunning || trial.worker != worker) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ExpectNothingAheadOfTheSteps(*store_, trial_id, "after attempt " + std::to_string(attempt));
  };
  attempt_from(0, 500, 0);
  // The newest recorded checkpoints' files were gone: the next attempt resumes from 300 and dies at 400, before it
  // records 500 again.
  attempt_from(300, 400, 0);
  // Kills at any moment, mid-transaction included, each attempt resuming from the newest checkpoint it may or from
  // the one before.
  for (int i = 0; i < 6 && store_->FindTrial(study.id, 0)->state != TrialState::kCompleted; ++i) {
    const std::int64_t newest = ResumeLimit(*store_, trial_id) / 100 * 100;
    attempt_from(i % 2 == 1 && newest >= 100 ? newest - 100 : newest, 0,
                 std::uniform_int_distribution<int>(0, 40)(random));
  }
  if (store_->FindTrial(study.id, 0)->state != TrialState::kCompleted) {
    Child last = Spawn({DLTUNE_STORE_WORKER, url_, study.name, "last", "train",
                        std::to_string(ResumeLimit(*store_, trial_id) / 100 * 100), "1000", "100"});
    ReadLines(last.out);
    std::fclose(last.out);
    ASSERT_EQ(Wait(last.pid), 0);
  }
  EXPECT_EQ(store_->FindTrial(study.id, 0)->state, TrialState::kCompleted);
  const auto series = store_->TrainSeries(trial_id);
  ASSERT_EQ(series.size(), 1000u);
  for (std::size_t i = 0; i < series.size(); ++i) ASSERT_EQ(series[i].step, static_cast<std::int64_t>(i + 1));
}

// A lease kept alive by the store stays fresh while its process sleeps (a worker busy starting a trial on a loaded
// machine), on a thread of the store's own; killed, the process stops heartbeating, and the trial goes back after
// the grace period, its retries untouched.
TEST_P(StoreContract, AKeptLeaseLivesAsLongAsItsProcess) {
  const StudyRecord study = NewStudyWithTrials(1);
  Child child = Spawn({DLTUNE_STORE_WORKER, url_, study.name, "busy", "kept"});
  char line[128] = {0};
  ASSERT_NE(std::fgets(line, sizeof line, child.out), nullptr);
  EXPECT_THAT(line, HasSubstr("holding 0"));
  for (int i = 0; i < 5; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_THAT(store_->ReclaimStale(study.id, 0.5, 3), ::testing::IsEmpty()) << "a live worker's trial went stale";
  }
  kill(child.pid, SIGKILL);
  EXPECT_EQ(Wait(child.pid), 128 + SIGKILL);
  std::fclose(child.out);
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  const auto reclaimed = store_->ReclaimStale(study.id, 0.5, 3);
  ASSERT_EQ(reclaimed.size(), 1u);
  EXPECT_FALSE(reclaimed[0].counted);
  EXPECT_EQ(store_->FindTrial(study.id, 0)->retries, 0);
}

// The store keeps a lease alive only while it is held and its worker holds the trial: let go, it goes stale;
// reclaimed, the trial's heartbeat is left as it is.
TEST_P(StoreContract, AKeptLeaseStopsWithItsHoldAndItsTrial) {
  const StudyRecord study = NewStudyWithTrials(2);
  auto first = store_->ClaimNext(study.id, "w");
  auto second = store_->ClaimNext(study.id, "w");
  auto kept_first = store_->KeepAlive(first->second, 0.05);
  auto kept_second = store_->KeepAlive(second->second, 0.05);
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_THAT(store_->ReclaimStale(study.id, 0.2, 3), ::testing::IsEmpty());
  kept_second.reset();
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  const auto stale = store_->ReclaimStale(study.id, 0.2, 3);
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].number, 1u);
  ASSERT_EQ(store_->ReclaimWorker(study.id, "w").size(), 1u);  // the worker was presumed gone
  const auto heartbeat = store_->FindTrial(study.id, 0)->heartbeat_at;
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(store_->FindTrial(study.id, 0)->heartbeat_at, heartbeat);  // no longer its lease: not stamped
  EXPECT_EQ(store_->FindTrial(study.id, 0)->state, TrialState::kPending);
}

// Two launches at once must not both evaluate the test split: whoever holds it (another process, here) makes every
// other holder fail at once, and its death releases it.
TEST_P(StoreContract, TheTestSplitIsHeldByOneProcessAtATime) {
  const StudyRecord study = NewStudyWithTrials(1);
  const StudyRecord other = NewStudyWithTrials(1);
  Child holder = Spawn({DLTUNE_STORE_WORKER, url_, study.name, "holder", "test-split"});
  char line[128] = {0};
  ASSERT_NE(std::fgets(line, sizeof line, holder.out), nullptr);
  EXPECT_THAT(line, HasSubstr("held"));
  try {
    (void)store_->LockTestSplit(study.id);
    ADD_FAILURE() << "a second holder got the test split";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConflict);
    EXPECT_THAT(e.what(), HasSubstr("another dltune is evaluating the test split"));
  }
  Child second = Spawn({DLTUNE_STORE_WORKER, url_, study.name, "second", "test-split"});
  EXPECT_EQ(Wait(second.pid), 4);  // "busy"
  std::fclose(second.out);
  EXPECT_NE(store_->LockTestSplit(other.id), nullptr);  // another study's is its own
  kill(holder.pid, SIGKILL);
  EXPECT_EQ(Wait(holder.pid), 128 + SIGKILL);
  std::fclose(holder.out);
  // A killed holder never keeps it (the server may take a moment to see a PostgreSQL session end).
  std::unique_ptr<StoreLock> lock;
  for (int i = 0; i < 100 && !lock; ++i) {
    try {
      lock = store_->LockTestSplit(study.id);
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  EXPECT_NE(lock, nullptr);
  // Held in this process, it is refused to this process too: one evaluation at a time.
  EXPECT_THROW((void)store_->LockTestSplit(study.id), Error);
  lock.reset();
  EXPECT_NE(store_->LockTestSplit(study.id), nullptr);
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreContract, ::testing::Values("sqlite"));
INSTANTIATE_TEST_SUITE_P(Postgres, StoreContract, ::testing::Values("postgres"));

// --- SQLite only ----------------------------------------------------------------------------------------------

class SqliteStore : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / UniqueName("dltune_sqlite_test");
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { dltune::RemoveTree(dir_); }
  std::filesystem::path dir_;
};

// Optuna's SQLite storage loses processes to "database is locked" (optuna#820: 7 of 32); this store must not.
TEST_F(SqliteStore, SixteenProcessesNeverSeeALockedDatabase) {
  const std::string url = "sqlite://" + (dir_ / "busy.db").string();
  auto store = OpenStore(url);
  DrainWithProcesses(*store, url, 16, 96, 200);
}

TEST_F(SqliteStore, RefusesASchemaFromANewerDltune) {
  const std::string path = (dir_ / "new.db").string();
  OpenStore("sqlite://" + path).reset();
  // Pretend a future dltune wrote the database.
  internal::OpenSqlite(path)->Execute("UPDATE dltune_meta SET value = '99' WHERE key = 'schema_version'");
  try {
    OpenStore("sqlite://" + path);
    FAIL() << "opened a schema-99 store";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("written by a newer dltune (schema version 99; this dltune knows up to"));
  }
}

// tests/fixtures/store_v1.sql is a database written by the first schema, with a study, trials, measurements and a
// checkpoint; opening it upgrades it in place and keeps every record.
TEST_F(SqliteStore, UpgradesTheFirstSchema) {
  const std::string path = (dir_ / "v1.db").string();
  std::ifstream fixture(DLTUNE_SOURCE_DIR "/tests/fixtures/store_v1.sql");
  std::stringstream sql;
  sql << fixture.rdbuf();
  ASSERT_FALSE(sql.str().empty());
  internal::OpenSqlite(path)->ExecuteScript(sql.str());

  auto store = OpenStore("sqlite://" + path);
  EXPECT_EQ(store->SchemaVersion(), kStoreSchemaVersion);
  const auto study = store->FindStudy("fixture_v1");
  ASSERT_TRUE(study);
  EXPECT_EQ(study->description, "written by schema version 1");
  const auto trials = store->ListTrials(study->id);
  ASSERT_EQ(trials.size(), 3u);
  EXPECT_EQ(study->reproduction, "");  // created before dltune kept a record (version 9)
  EXPECT_EQ(store->StudyPatch(study->id), "");
  EXPECT_EQ(trials[0].state, TrialState::kCompleted);
  EXPECT_EQ(trials[0].params.at("learning_rate"), Value(0.01));
  EXPECT_EQ(trials[0].best_step, 200);
  EXPECT_FALSE(trials[0].exit_status.has_value());  // the column version 2 added
  EXPECT_EQ(store->TrainSeries(trials[0].id).size(), 3u);
  EXPECT_EQ(store->EvalSeries(trials[0].id).size(), 2u);
  EXPECT_EQ(store->ListCheckpoints(trials[0].id).size(), 1u);
  // The upgraded database takes the new columns.
  const auto claim = store->ClaimNext(study->id, "w");
  ASSERT_TRUE(claim);
  store->Finish(
      claim->second,
      {.state = TrialState::kFailed, .reason = "crashed", .exit_status = 139, .stderr_tail = "Segmentation fault"});
  const auto failed = store->FindTrial(study->id, claim->first.number);
  EXPECT_EQ(failed->exit_status, 139);
  EXPECT_EQ(failed->stderr_tail, "Segmentation fault");
}

TEST_F(SqliteStore, BadUrlsSayWhatIsWrong) {
  EXPECT_THAT(
      [] {
        try {
          OpenStore("mysql://localhost/db");
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("unknown storage scheme 'mysql'"));
  EXPECT_THROW(OpenStore("sqlite:///nonexistent-dir/sub/x.db"), Error);
  EXPECT_THROW(OpenStore("sqlite://"), Error);
}

}  // namespace
}  // namespace dltune
