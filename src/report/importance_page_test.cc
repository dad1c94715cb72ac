#include "report/importance_page.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dltune/report/html_report.h"
#include "report/study_page.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

// Two sub-studies of 20 trials each: the objective follows lr, wd and act do nothing.
StudyData TwoSubStudies() {
  StudyData data;
  data.spec = ParseStudySpec(R"(name: imp
workload: synthetic
max_train_steps: 100
space:
  optimizer: {values: [sgd, adam], role: scientific}
  lr: {min: 0.0001, max: 1, scale: log}
  wd: {min: 0, max: 0.1}
  act: {values: [relu, tanh]}
)",
                             "imp.yaml");
  data.study.name = "imp";
  for (std::uint64_t n = 0; n < 40; ++n) {
    TrialRecord trial;
    trial.id = static_cast<std::int64_t>(n) + 1;
    trial.number = n;
    trial.substudy = n % 2;
    trial.substudy_label = n % 2 == 0 ? "optimizer=sgd" : "optimizer=adam";
    const double u = static_cast<double>((n * 7) % 20) / 20;
    const double lr = std::pow(10.0, -4.0 + 4 * u);
    trial.params = {{"optimizer", Value(std::string(n % 2 == 0 ? "sgd" : "adam"))},
                    {"lr", Value(lr)},
                    {"wd", Value(static_cast<double>((n * 3) % 10) / 100)},
                    {"act", Value(std::string(n % 3 == 0 ? "relu" : "tanh"))}};
    trial.state = TrialState::kCompleted;
    trial.best_value = std::abs(std::log10(lr) + 2);
    data.trials.push_back(trial);
  }
  return data;
}

const PageSection* Find(const std::vector<PageSection>& sections, const std::string& id) {
  for (const PageSection& s : sections) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

TEST(ImportanceSection, ABarChartAndParallelCoordinatesPerSubStudyAfterTheInteractions) {
  const StudyData data = TwoSubStudies();
  const std::vector<PageSection> sections = StudyPageSections(data, {});
  const PageSection* section = Find(sections, "importance");
  ASSERT_NE(section, nullptr);
  const PageSection* interactions = Find(sections, "interactions");
  ASSERT_NE(interactions, nullptr);
  EXPECT_EQ(section->position, interactions->position + 1);
  EXPECT_THAT(section->title, HasSubstr("Hyperparameter importance"));
  EXPECT_THAT(section->explanation, HasSubstr("PED-ANOVA"));
  ASSERT_EQ(section->charts.size(), 4u);
  EXPECT_EQ(section->charts[0].id, "importance_0");
  EXPECT_EQ(section->charts[1].id, "parallel_0");
  EXPECT_EQ(section->charts[3].id, "parallel_1");
  EXPECT_THAT(section->charts[0].caption, HasSubstr("of optimizer=sgd: 20 completed trials, 2 in the top 10%"));
  EXPECT_TRUE(section->charts[1].wide);

  // The bars: one row per nuisance param with its interval and floor, most important (lr) first.
  const nlohmann::json& bars = section->charts[0].spec;
  EXPECT_EQ(bars.at("$schema"), "https://vega.github.io/schema/vega-lite/v6.json");
  const auto& rows = bars.at("data").at("values");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].at("param"), "lr");
  for (const auto& row : rows) {
    EXPECT_LE(row.at("low").get<double>(), row.at("high").get<double>());
    EXPECT_GT(row.at("floor").get<double>(), 0);
    EXPECT_EQ(row.at("verdict") == "indistinguishable from no effect", row.at("low").get<double>() <= 0);
  }
  std::vector<std::string> marks;
  for (const auto& layer : bars.at("layer")) marks.push_back(layer.at("mark").at("type"));
  EXPECT_EQ(marks, (std::vector<std::string>{"bar", "rule", "rule"}));

  // The parallel coordinates: one line per trial through its params' unit positions, coloured by objective.
  const nlohmann::json& parallel = section->charts[1].spec;
  const auto& lines = parallel.at("layer").at(0);
  EXPECT_EQ(lines.at("mark").at("type"), "line");
  EXPECT_EQ(lines.at("encoding").at("detail").at("field"), "trial");
  EXPECT_EQ(lines.at("encoding").at("color").at("field"), "objective");
  const auto& points = lines.at("data").at("values");
  EXPECT_EQ(points.size(), 20u * 3);
  for (const auto& p : points) {
    EXPECT_GE(p.at("position").get<double>(), 0);
    EXPECT_LE(p.at("position").get<double>(), 1);
    EXPECT_EQ(p.at("trial").get<std::uint64_t>() % 2, 0u);  // sgd's trials only
  }
  EXPECT_EQ(parallel.at("layer").at(0).at("encoding").at("x").at("sort").at(0), "lr");

  // The dashboard's JSON and the report carry the same section.
  const nlohmann::json json = PageSectionJson(*section);
  EXPECT_EQ(json.at("id"), "importance");
  EXPECT_EQ(json.at("charts").size(), 4u);
  const std::string html = RenderReport(data);
  EXPECT_THAT(html, HasSubstr("Hyperparameter importance: which nuisance hyperparameters matter"));
  EXPECT_THAT(html, HasSubstr("parallel_1"));
}

TEST(ImportanceSection, NothingToDrawWithoutTrialsNorOnThePageOfChosenConfigurationsOrMeasurements) {
  StudyData data = TwoSubStudies();
  data.trials.resize(2);  // one trial in each sub-study
  const std::vector<PageSection> sections = StudyPageSections(data, {});
  const PageSection* section = Find(sections, "importance");
  ASSERT_NE(section, nullptr);
  EXPECT_TRUE(section->charts.empty());
  EXPECT_THAT(section->empty_text, HasSubstr("No sub-study has two completed trials"));
  // Nothing to weigh on a trial's own page (the dashboard's: one trial's measurements).
  data.trials.resize(1);
  EXPECT_EQ(Find(StudyPageSections(data, {}, PageParts::kMeasurements), "importance"), nullptr);
  // Not on the page of chosen configurations (a retrain) nor of a measurement (an instability probe).
  StudyData retrain = TwoSubStudies();
  retrain.spec.procedure.kind = "retrain";
  retrain.spec.procedure.parent = "imp";
  retrain.spec.procedure.from_trials = {{.trial = 0, .seed = 1}};
  EXPECT_EQ(Find(StudyPageSections(retrain, {}), "importance"), nullptr);
  StudyData probe = TwoSubStudies();
  probe.spec.procedure.kind = "instability";
  probe.spec.procedure.parent = "imp";
  EXPECT_FALSE(ShowsImportance(probe));
  // Not among the records' sections: the dashboard draws it with the checklist, from its second request.
  EXPECT_EQ(Find(StudyPageSections(TwoSubStudies(), {}, PageParts::kRecords), "importance"), nullptr);
  EXPECT_NE(Find(StudyPageSections(TwoSubStudies(), {}, PageParts::kMeasurements), "importance"), nullptr);
}

// The importance section and the checklist's `unimportant` finding read one computation of the importance, made with
// the page's settings: the finding's interval is the one the section states and its bars draw.
TEST(StudyPage, TheImportanceSectionAndItsFindingComeFromOneComputation) {
  StudyData data = TwoSubStudies();
  data.spec = ParseStudySpec(
      "name: imp\nworkload: synthetic\nmax_train_steps: 100\nspace:\n  lr: {min: 0.0001, max: 1, scale: log}\n"
      "  wd: {min: 0, max: 0.1}\n  act: {values: [relu, tanh]}\n",
      "imp.yaml");
  data.trials.clear();
  for (std::uint64_t n = 0; n < 60; ++n) {  // one sub-study: 6 trials in the top 10%
    TrialRecord trial;
    trial.id = static_cast<std::int64_t>(n) + 1;
    trial.number = n;
    const double lr = std::pow(10.0, -4.0 + 4 * static_cast<double>((n * 7) % 60) / 60);
    trial.params = {{"lr", Value(lr)},
                    {"wd", Value(static_cast<double>((n * 11) % 10) / 100)},
                    {"act", Value(std::string(n % 3 == 0 ? "relu" : "tanh"))}};
    trial.state = TrialState::kCompleted;
    trial.best_value = std::abs(std::log10(lr) + 2);
    data.trials.push_back(trial);
  }
  StudyPageOptions options;
  options.importance = {.resamples = 200, .permutations = 50, .interval_low = 0.2, .interval_high = 0.8, .seed = 3};
  for (const PageParts parts : {PageParts::kAll, PageParts::kMeasurements}) {
    const StudyPage page = BuildStudyPage(data, options, parts);
    const PageSection* section = Find(page.sections, "importance");
    ASSERT_NE(section, nullptr);
    EXPECT_THAT(section->explanation, HasSubstr("20-80% bootstrap interval (200 resamples"));
    ASSERT_FALSE(section->charts.empty());
    std::map<std::string, nlohmann::json> bars;
    for (const auto& row : section->charts[0].spec.at("data").at("values")) bars[row.at("param")] = row;
    std::vector<std::string> drawn_in_noise, named;
    for (const auto& [param, row] : bars) {
      if (row.at("verdict") == "indistinguishable from no effect") drawn_in_noise.push_back(param);
    }
    for (const Diagnostic& d : page.diagnostics) {
      if (d.id != "unimportant") continue;
      named.push_back(d.param_id);
      const nlohmann::json& row = bars.at(d.param_id);
      EXPECT_THAT(d.detail, HasSubstr(fmt::format("importance {:.3g} against a noise floor of {:.3g}",
                                                  row.at("importance").get<double>(), row.at("floor").get<double>())));
      EXPECT_THAT(d.detail, HasSubstr(fmt::format("(interval {:.3g} to {:.3g})", row.at("low").get<double>(),
                                                  row.at("high").get<double>())));
      EXPECT_THAT(d.detail, HasSubstr("The 20-80% bootstrap interval"));
    }
    ASSERT_FALSE(named.empty());
    std::sort(named.begin(), named.end());
    EXPECT_EQ(named, drawn_in_noise);
  }
  // The records' part has neither: the dashboard asks for them together, second.
  const StudyPage records = BuildStudyPage(data, options, PageParts::kRecords);
  EXPECT_EQ(Find(records.sections, "importance"), nullptr);
  EXPECT_TRUE(records.diagnostics.empty());
}

}  // namespace
}  // namespace dltune
