// A throughput sweep's result is the batch size it recommends: `dltune studies` (compact and wide), the study tree,
// `dltune show` and the dashboard's studies page give it instead of a best validation error, which a sweep that
// measures speed must not be ranked by.
#include <unistd.h>

#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/store/store.h"
#include "report/study_text.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// A study judged by its objective, and a sweep of batch sizes 32, 64 and 128 at 10 ms a step (perfect scaling: 128
// recommended, 12800 examples/s) whose best validation error (0.123 at 32) ranks the batch sizes the wrong way.
void MakeStudies(Store& store) {
  const StudyRecord judged = store.CreateStudy(
      {.name = "judged", .spec_text = "name: judged\nmax_train_steps: 10\nspace: {lr: {min: 0.1, max: 1}}\n"});
  store.AddTrials(judged.id, {{.number = 0, .substudy_label = "all", .params = {{"lr", Value(0.5)}}}});
  auto claimed = store.ClaimNext(judged.id, "w");
  store.Record(claimed->second, {.best_step = 10, .best_value = 0.25});
  store.Finish(claimed->second, {.state = TrialState::kCompleted, .final_value = 0.25});

  const StudyRecord sweep = store.CreateStudy(
      {.name = "judged-throughput",
       .spec_text = "name: judged-throughput\nworkload: synthetic\nmax_train_steps: 10\nsampler: grid\n"
                    "space:\n  batch_size: {values: [32, 64, 128]}\nprocedure: {kind: throughput, parent: judged}\n",
       .parent = "judged"});
  std::vector<NewTrial> trials;
  for (std::uint64_t i = 0; i < 3; ++i) {
    trials.push_back({.number = i, .substudy_label = "all", .params = {{"batch_size", Value(std::int64_t{32} << i)}}});
  }
  store.AddTrials(sweep.id, trials);
  for (std::uint64_t i = 0; i < 3; ++i) {
    auto trial = store.ClaimNext(sweep.id, "w");
    MeasurementBatch batch{.best_step = 10, .best_value = 0.123 + 0.1 * static_cast<double>(i)};
    for (std::int64_t step = 1; step <= 10; ++step) batch.train.push_back({.step = step, .step_time = 0.01});
    store.Record(trial->second, batch);
    store.Finish(trial->second, {.state = TrialState::kCompleted, .final_value = batch.best_value});
  }
}

TEST(StudyResult, AThroughputSweepIsListedByTheBatchSizeItRecommends) {
  const fs::path dir = fs::temp_directory_path() / ("dltune_study_result_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    auto store = OpenStore("sqlite://" + (dir / "s.db").string());
    MakeStudies(*store);
    const StudyRecord sweep = *store->FindStudy("judged-throughput");
    const auto result = ThroughputResultOf(*store, sweep);
    ASSERT_TRUE(result);
    EXPECT_EQ(result->text, "batch size 128 (12800 examples/s; perfect scaling up to 128)");
    EXPECT_EQ(result->brief, "batch size 128");
    EXPECT_FALSE(ThroughputResultOf(*store, *store->FindStudy("judged")));

    const std::string compact = StudiesText(*store, false);
    EXPECT_THAT(compact, HasSubstr("batch size 128"));
    EXPECT_THAT(compact, HasSubstr("0.25 t0"));     // the other study keeps its best trial
    EXPECT_THAT(compact, Not(HasSubstr("0.123")));  // the sweep is not ranked by its validation error
    const std::string wide = StudiesText(*store, true);
    EXPECT_THAT(wide, HasSubstr("batch size 128 (12800 examples/s"));
    EXPECT_THAT(wide, Not(HasSubstr("0.123")));
    EXPECT_THAT(StudyTreeText(*store), HasSubstr("judged-throughput (throughput)  3 completed; batch size 128 ("));
    const std::string show = StudyText(*store, sweep, 20, false);
    EXPECT_THAT(show, HasSubstr("batch size 128 (12800 examples/s"));
    EXPECT_THAT(show, Not(HasSubstr("0.123 — trial 0")));

    const nlohmann::json studies = StudiesJson(*store).at("studies");
    ASSERT_EQ(studies.size(), 2u);
    EXPECT_EQ(studies[0].at("result"), nullptr);
    EXPECT_EQ(studies[0].at("best").at("value"), 0.25);
    EXPECT_EQ(studies[1].at("result"), "batch size 128 (12800 examples/s; perfect scaling up to 128)");
    EXPECT_EQ(studies[1].at("best"), nullptr);
    const nlohmann::json page = StudyJson(*store, "judged-throughput", StudyPart::kRecords);
    EXPECT_EQ(page.at("result"), studies[1].at("result"));
    EXPECT_EQ(page.at("best"), nullptr);
    EXPECT_TRUE(page.at("best_per_substudy").empty());
  }
  RemoveTree(dir);
}

}  // namespace
}  // namespace dltune
