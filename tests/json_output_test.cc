// `--format json` and `csv` on `dltune studies`, `show`, `launches`, `doctor` and `next`: the fields that
// docs/json-output.md promises, with their values, on a store filled through the library.
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/files.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {
namespace {

using test::RunDltune;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

class JsonOutput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("dltune_json_output_" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    url_ = new std::string("sqlite://" + (*dir_ / "runs.db").string());
    auto store = OpenStore(*url_);
    const StudySpec spec = LoadStudySpec(DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
    const StudyRecord study = store->CreateStudy({.name = "quickstart",
                                                  .description = spec.description,
                                                  .spec_text = spec.text,
                                                  .spec_hash = "0123456789abcdef",
                                                  .spec_path = "examples/quickstart.yaml",
                                                  .command_line = "dltune run examples/quickstart.yaml",
                                                  .dltune_version = "0.1.0",
                                                  .git_commit = "abc123",
                                                  .git_dirty = false});
    const StudyPlan plan(spec);
    std::vector<NewTrial> trials;
    for (std::uint64_t n = 0; n < 3; ++n) {
      const PlannedTrial t = plan.Trial(n);
      trials.push_back({n, t.substudy, plan.SubStudyAt(t.substudy).label, t.params, 1000 + n, n, 0});
    }
    store->AddTrials(study.id, trials);
    // Trial 0 completes at 0.2 with a clipped step and a checkpoint; trial 1 diverges; trial 2 keeps running.
    auto claim = store->ClaimNext(study.id, "worker-a");
    MeasurementBatch batch;
    batch.train.push_back({.step = 100, .loss = 0.9, .learning_rate = 0.01, .clipped = true});
    batch.evals.push_back({2000, "valid", "error_rate", 0.2, 10000});
    batch.best_step = 2000;
    batch.best_value = 0.2;
    store->Record(claim->second, batch);
    store->AddCheckpoint(
        claim->second,
        {.step = 2000, .path = "/ckpt/2000", .objective = 0.2, .checksum = "c", .pool = CheckpointPool::kBest});
    store->Finish(claim->second, {.state = TrialState::kCompleted, .final_value = 0.2});
    claim = store->ClaimNext(study.id, "worker-a");
    store->Finish(claim->second, {.state = TrialState::kInfeasible, .reason = "loss is NaN at step 37"});
    store->ClaimNext(study.id, "worker-b");
    const StudyNote decision = store->AddNote(
        study.id, {.kind = NoteKind::kDecision, .adopt = "trial 0", .text = "the best", .author = "a@b"});
    store->AddLaunch(study.id, {.evaluation = {.trial = 0,
                                               .step = 2000,
                                               .checkpoint_path = "/ckpt/2000",
                                               .checksum = "sha256:c",
                                               .split = "test",
                                               .metrics = {{"error_rate", 0.21}},
                                               .examples = 10000},
                                .reason = "ship it",
                                .author = "a@b",
                                .git_commit = "abc123",
                                .git_dirty = false,
                                .export_path = "/models/model.pt",
                                .decision = decision.id});
    store->AddEvaluation(study.id, {.trial = 0,
                                    .step = 2000,
                                    .checkpoint_path = "/ckpt/2000",
                                    .split = "test",
                                    .metrics = {{"loss", 0.5}},
                                    .examples = 100});
  }
  static void TearDownTestSuite() {
    RemoveTree(*dir_);
    delete dir_;
    delete url_;
  }
  static nlohmann::json Json(const std::string& command) {
    const auto result = RunDltune(command + " --format json --storage " + *url_);
    EXPECT_EQ(result.exit_code, 0) << command << ": " << result.err;
    return nlohmann::json::parse(result.out);
  }
  static std::vector<std::string> Keys(const nlohmann::json& object) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : object.items()) keys.push_back(key);
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  static std::vector<std::string> Sorted(std::vector<std::string> keys) {
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  static std::string CsvHeader(const std::string& command) {
    const auto result = RunDltune(command + " --format csv --storage " + *url_);
    EXPECT_EQ(result.exit_code, 0) << command << ": " << result.err;
    return result.out.substr(0, result.out.find('\n'));
  }

  static std::filesystem::path* dir_;
  static std::string* url_;
};
std::filesystem::path* JsonOutput::dir_ = nullptr;
std::string* JsonOutput::url_ = nullptr;

const std::vector<std::string> kStudyFields = {
    "study",         "uid",           "parent",     "description",    "goal",        "spec_path",
    "spec_hash",     "created_at",    "updated_at", "dltune_version", "git_commit",  "git_dirty",
    "trials",        "pending",       "running",    "completed",      "infeasible",  "failed",
    "stopped",       "objective",     "direction",  "best_value",     "best_trial",  "best_step",
    "best_substudy", "best_replicas", "best_low",   "best_high",      "latest_note", "latest_note_kind",
    "reproduce"};

TEST_F(JsonOutput, StudiesHasOneRowPerStudyWithTheDocumentedFields) {
  const nlohmann::json studies = Json("studies");
  ASSERT_EQ(studies.size(), 1U);
  const nlohmann::json& row = studies[0];
  EXPECT_THAT(Keys(row), ElementsAreArray(Sorted(kStudyFields)));
  EXPECT_EQ(row["study"], "quickstart");
  EXPECT_TRUE(row["parent"].is_null());
  EXPECT_EQ(row["git_dirty"], false);
  EXPECT_EQ(row["completed"], 1);
  EXPECT_EQ(row["infeasible"], 1);
  EXPECT_EQ(row["running"], 1);
  EXPECT_EQ(row["pending"], row["trials"].get<int>() - 3);
  EXPECT_EQ(row["objective"], "valid/error_rate");
  EXPECT_EQ(row["direction"], "minimize");
  EXPECT_EQ(row["best_value"], 0.2);
  EXPECT_EQ(row["best_trial"], 0);
  EXPECT_EQ(row["best_step"], 2000);
  EXPECT_TRUE(row["best_replicas"].is_null());
  EXPECT_EQ(row["latest_note"], "the best");
  EXPECT_EQ(row["latest_note_kind"], "decision");
  EXPECT_EQ(row["reproduce"], "dltune run examples/quickstart.yaml");
  EXPECT_THAT(row["created_at"].get<std::string>(),
              ::testing::MatchesRegex(R"([0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z)"));
  // CSV: the same fields, in the documented order.
  std::string header;
  for (const std::string& field : kStudyFields) header += (header.empty() ? "" : ",") + field;
  EXPECT_EQ(CsvHeader("studies"), header);
}

TEST_F(JsonOutput, ShowGivesTheStudyItsBestsAndItsTrials) {
  const nlohmann::json show = Json("show quickstart");
  EXPECT_THAT(Keys(show), ElementsAreArray(Sorted({"study", "best_per_substudy", "trials", "reproduction"})));
  EXPECT_TRUE(show["reproduction"].is_object());
  EXPECT_THAT(Keys(show["study"]), ElementsAreArray(Sorted(kStudyFields)));
  ASSERT_EQ(show["best_per_substudy"].size(), 1U);
  EXPECT_THAT(Keys(show["best_per_substudy"][0]),
              ElementsAreArray(Sorted({"substudy", "trial", "value", "step", "replicas", "low", "high"})));
  EXPECT_EQ(show["best_per_substudy"][0]["value"], 0.2);
  ASSERT_EQ(show["trials"].size(), 3U);
  EXPECT_EQ(show["trials"][1]["state"], "infeasible");
  EXPECT_EQ(show["trials"][1]["reason"], "loss is NaN at step 37");
  for (const char* field : {"trial", "configuration", "replica", "substudy", "state", "reason", "seed", "retries",
                            "best_step", "best_value", "final_value", "started_at", "ended_at", "worker"}) {
    EXPECT_TRUE(show["trials"][0].contains(field)) << field;
  }
  EXPECT_THAT(CsvHeader("show quickstart"), ::testing::StartsWith("trial,configuration,replica,substudy,state,"));

  const nlohmann::json trial = Json("show quickstart 0");
  EXPECT_THAT(Keys(trial), ElementsAreArray(Sorted({"trial", "train", "evals", "checkpoints"})));
  EXPECT_TRUE(trial["trial"]["params"].is_object());
  EXPECT_TRUE(trial["trial"]["time_split"].is_object());
  EXPECT_EQ(trial["trial"]["resources"], nlohmann::json::object());
  EXPECT_EQ(trial["trial"]["runtime_differences"], nlohmann::json::array());
  ASSERT_EQ(trial["train"].size(), 1U);
  EXPECT_THAT(Keys(trial["train"][0]), ElementsAreArray(Sorted({"step", "loss", "learning_rate", "grad_norm", "clipped",
                                                                "step_time", "data_wait", "examples_per_second"})));
  EXPECT_EQ(trial["train"][0]["clipped"], true);
  EXPECT_TRUE(trial["train"][0]["grad_norm"].is_null());
  EXPECT_EQ(trial["evals"][0],
            (nlohmann::json{
                {"step", 2000}, {"split", "valid"}, {"metric", "error_rate"}, {"value", 0.2}, {"examples", 10000}}));
  ASSERT_EQ(trial["checkpoints"].size(), 1U);
  EXPECT_THAT(Keys(trial["checkpoints"][0]),
              ElementsAreArray(Sorted({"step", "path", "objective", "checksum", "pool", "deleted", "created_at"})));
  EXPECT_EQ(trial["checkpoints"][0]["pool"], "best");

  const auto csv_trial = RunDltune("show quickstart 0 --format csv --storage " + *url_);
  EXPECT_EQ(csv_trial.exit_code, kExitInvalidInput);
  EXPECT_THAT(csv_trial.err, HasSubstr("not one table"));
}

TEST_F(JsonOutput, LaunchesListsEveryLookAtTheTestSet) {
  const nlohmann::json looks = Json("launches");
  ASSERT_EQ(looks.size(), 2U);
  EXPECT_THAT(Keys(looks[0]),
              ElementsAreArray(Sorted({"look", "id", "created_at", "author", "study", "trial", "step", "checkpoint",
                                       "checksum", "split", "examples", "git_commit", "git_dirty", "model", "reason",
                                       "decision_id", "metric_error_rate"})));
  EXPECT_EQ(looks[0]["look"], "launch");
  EXPECT_EQ(looks[0]["metric_error_rate"], 0.21);
  EXPECT_EQ(looks[0]["model"], "/models/model.pt");
  EXPECT_TRUE(looks[0]["decision_id"].is_number());
  EXPECT_EQ(looks[1]["look"], "evaluation");
  EXPECT_EQ(looks[1]["metric_loss"], 0.5);
  EXPECT_TRUE(looks[1]["author"].is_null());
  EXPECT_EQ(CsvHeader("launches"),
            "look,id,created_at,author,study,trial,step,checkpoint,checksum,split,examples,git_commit,git_dirty,model,"
            "reason,decision_id,metric_error_rate,metric_loss");
}

TEST_F(JsonOutput, DoctorAndNextGiveFindingsAndTheStep) {
  const nlohmann::json doctor = Json("doctor quickstart");
  EXPECT_THAT(Keys(doctor), ElementsAreArray(Sorted({"study", "findings", "next"})));
  EXPECT_EQ(doctor["study"], "quickstart");
  ASSERT_TRUE(doctor["findings"].is_array());
  for (const auto& finding : doctor["findings"]) {
    EXPECT_THAT(Keys(finding),
                ElementsAreArray(Sorted({"study", "id", "severity", "title", "detail", "suggestion", "section",
                                         "substudy", "param", "trials", "expand_to", "handled"})));
    EXPECT_THAT(finding["severity"].get<std::string>(), ::testing::AnyOf("problem", "warning", "info"));
  }
  const std::vector<std::string> step_fields =
      Sorted({"id", "study", "title", "why", "command", "section", "alternatives"});
  EXPECT_THAT(Keys(doctor["next"]), ElementsAreArray(step_fields));
  EXPECT_EQ(CsvHeader("doctor quickstart"),
            "study,id,severity,title,detail,suggestion,section,substudy,param,trials,expand_to,handled");

  const nlohmann::json next = Json("next quickstart");
  EXPECT_THAT(Keys(next), ElementsAreArray(step_fields));
  // Trials are left to run: the step is to finish the study, with the command that does it.
  EXPECT_EQ(next["id"], "finish");
  EXPECT_EQ(next["study"], "quickstart");
  EXPECT_THAT(next["command"].get<std::string>(), HasSubstr("dltune run"));
  const auto csv = RunDltune("next quickstart --format csv --storage " + *url_);
  EXPECT_EQ(csv.exit_code, kExitInvalidInput);
}

}  // namespace
}  // namespace dltune
