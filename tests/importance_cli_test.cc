// `dltune show STUDY --importance`, the checklist's `unimportant` finding and `dltune plan fix`, on a store filled
// through the library: a study whose objective depends on the learning rate alone.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
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
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kSpec = R"(name: importance_cli
workload: synthetic
max_train_steps: 100
trials: 60
space:
  learning_rate: {min: 1.0e-4, max: 1, scale: log}
  momentum: {min: 0, max: 0.99}
)";

// 60 completed trials of kSpec: the objective is the learning rate's distance from 0.01 in decades, plus a little
// noise that does not depend on momentum.
void FillStore(const std::string& url) {
  auto store = OpenStore(url);
  const StudySpec spec = ParseStudySpec(kSpec, "importance_cli.yaml");
  const StudyRecord study = store->CreateStudy(
      {.name = spec.name, .spec_text = spec.text, .spec_hash = "0123456789abcdef", .dltune_version = "0.1.0"});
  const StudyPlan plan(spec);
  std::vector<NewTrial> trials;
  for (std::uint64_t n = 0; n < plan.TrialCount(); ++n) {
    const PlannedTrial t = plan.Trial(n);
    trials.push_back({n, t.substudy, plan.SubStudyAt(t.substudy).label, t.params, 1000 + n});
  }
  store->AddTrials(study.id, trials);
  for (std::uint64_t n = 0; n < plan.TrialCount(); ++n) {
    const auto claim = store->ClaimNext(study.id, "worker");
    const double lr = *NumericValue(claim->first.params.at("learning_rate"));
    const double value = std::pow(std::log10(lr) + 2, 2) / 4 + 0.01 * std::sin(static_cast<double>(n) * 7.3);
    MeasurementBatch batch;
    batch.evals.push_back({100, "valid", "error_rate", value, 1000});
    batch.best_step = 100;
    batch.best_value = value;
    store->Record(claim->second, batch);
    store->Finish(claim->second, {.state = TrialState::kCompleted, .final_value = value});
  }
}

class ImportanceCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                     ("dltune_importance_cli_" + std::to_string(::getpid())));
    std::filesystem::create_directories(*dir_);
    url_ = new std::string("sqlite://" + (*dir_ / "runs.db").string());
    FillStore(*url_);
  }
  static void TearDownTestSuite() {
    RemoveTree(*dir_);
    delete dir_;
    delete url_;
  }
  static std::string Storage() { return " --storage " + *url_; }

  static std::filesystem::path* dir_;
  static std::string* url_;
};
std::filesystem::path* ImportanceCli::dir_ = nullptr;
std::string* ImportanceCli::url_ = nullptr;

TEST_F(ImportanceCli, ShowImportanceTellsTheParamThatMattersFromNoise) {
  const auto text = RunDltune("show importance_cli --importance" + Storage());
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("PED-ANOVA"));
  EXPECT_THAT(text.out, HasSubstr("60 completed trials, 6 in the top 10%"));
  EXPECT_THAT(text.out, HasSubstr("noise floor"));
  std::istringstream lines(text.out);
  std::string lr_line, momentum_line;
  for (std::string line; std::getline(lines, line);) {
    if (line.find("  learning_rate ") == 0) lr_line = line;
    if (line.find("  momentum ") == 0) momentum_line = line;
  }
  EXPECT_THAT(lr_line, HasSubstr("stands out of the noise")) << text.out;
  EXPECT_THAT(momentum_line, HasSubstr("indistinguishable from no effect")) << text.out;

  const auto json = RunDltune("show importance_cli --importance --format json" + Storage());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto out = nlohmann::json::parse(json.out);
  EXPECT_EQ(out.at("method"), "PED-ANOVA");
  EXPECT_EQ(out.at("settings").at("target_quantile"), 0.1);
  EXPECT_EQ(out.at("settings").at("resamples"), 1000);
  ASSERT_EQ(out.at("substudies").size(), 1u);
  const auto& sub = out.at("substudies").at(0);
  EXPECT_EQ(sub.at("trials"), 60);
  ASSERT_EQ(sub.at("params").size(), 2u);
  for (const auto& p : sub.at("params")) {
    for (const char* field :
         {"id", "name", "importance", "low", "high", "noise_floor", "resampled_floor", "above_noise", "above_noise_low",
          "above_noise_high", "indistinguishable", "trials", "best_value"}) {
      EXPECT_TRUE(p.contains(field)) << field;
    }
    EXPECT_LE(p.at("low").get<double>(), p.at("high").get<double>());
    EXPECT_EQ(p.at("indistinguishable"), p.at("id") == "momentum");
  }

  const auto trial = RunDltune("show importance_cli 3 --importance" + Storage());
  EXPECT_EQ(trial.exit_code, 2);
  EXPECT_THAT(trial.err, HasSubstr("--importance is a study's"));
}

TEST_F(ImportanceCli, DoctorNamesTheParamToFixAndPlanFixFixesIt) {
  const auto doctor = RunDltune("doctor importance_cli" + Storage());
  ASSERT_EQ(doctor.exit_code, 0) << doctor.err;
  EXPECT_THAT(doctor.out, HasSubstr("momentum is indistinguishable from no effect"));
  EXPECT_THAT(doctor.out, Not(HasSubstr("learning_rate is indistinguishable")));
  const auto json = RunDltune("doctor importance_cli --format json" + Storage());
  ASSERT_EQ(json.exit_code, 0) << json.err;
  int unimportant = 0;
  const auto findings = nlohmann::json::parse(json.out);
  for (const auto& finding : findings.at("findings")) {
    if (finding.at("id") != "unimportant") continue;
    ++unimportant;
    EXPECT_EQ(finding.at("param"), "momentum");
    EXPECT_EQ(finding.at("severity"), "info");
    EXPECT_THAT(finding.at("suggestion").get<std::string>(), HasSubstr("dltune plan fix --from importance_cli"));
  }
  EXPECT_EQ(unimportant, 1) << json.out;

  const std::string path = (*dir_ / "fixed.yaml").string();
  const auto plan = RunDltune("plan fix --from importance_cli -o " + path + Storage());
  ASSERT_EQ(plan.exit_code, 0) << plan.err;
  const StudySpec fixed = LoadStudySpec(path);
  EXPECT_EQ(fixed.name, "importance_cli-fixed");
  EXPECT_EQ(fixed.procedure.kind, "fix");
  const Param* momentum = fixed.space->Find("momentum");
  ASSERT_NE(momentum, nullptr);
  EXPECT_EQ(momentum->kind, ParamKind::kFixed);
  EXPECT_EQ(fixed.space->Find("learning_rate")->kind, ParamKind::kFloat);
  const auto check = RunDltune("space check " + path);
  EXPECT_EQ(check.exit_code, 0) << check.err;
}

}  // namespace
}  // namespace dltune
