#include "dltune/analyze/importance.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "analyze_test_util.h"
#include "dltune/analyze/diagnostics.h"

namespace dltune {
namespace {

using testing::AddTrial;
using testing::MakeData;

// How far dltune's PED-ANOVA may be from Optuna's on the same trials. Both compute the same formula in double; they
// differ in the order of sums and in how a kernel's mass is computed (dltune: a difference of erfc tails; Optuna: in
// log space, then exp of a log-sum-exp). Every grid cell's density is at least the prior kernel's share,
// prior_weight / (trials + 1) times its smallest cell mass (about 0.9 / cells), so at least 2e-4 for the fixture's 80
// trials and 50 cells, while the absolute error of a density is a few ulp of 1 (about 1e-15): densities agree to
// about 5e-12 relative. The Pearson divergence Σ (t - l)² / l carries a relative error δ of t and l into at most
// 2 δ (1 + max t / l) of itself, and t / l stays below 1 / 2e-4 = 5e3 here: 5e-12 * 2 * 5e3 = 5e-8. Agreement within
// 1e-7 relative is what the arithmetic promises (they agree to 1.5e-15 in fact); a formula difference moves the
// importances far more: a prior weight of 1.05 instead of 1 moves every one by 1.7% or more.
constexpr double kRelativeTolerance = 1e-7;

nlohmann::json Reference() {
  std::ifstream file(DLTUNE_SOURCE_DIR "/tests/fixtures/importance/reference.json");
  EXPECT_TRUE(file) << "tests/fixtures/importance/reference.json";
  return nlohmann::json::parse(file);
}

StudyData CaseData(const nlohmann::json& c) {
  StudyData data = MakeData(c.at("spec").get<std::string>());
  std::uint64_t number = 0;
  for (const auto& trial : c.at("trials")) {
    Assignment params;
    for (const auto& [id, value] : trial.at("params").items()) params[id] = *ValueFromJson(value);
    AddTrial(data, number++, TrialState::kCompleted, params, trial.at("value").get<double>());
  }
  return data;
}

TEST(Importance, AgreesWithOptunasPedAnovaAndItsIntervalCoversIt) {
  const nlohmann::json reference = Reference();
  ASSERT_EQ(reference.at("cases").size(), 3u);
  for (const auto& c : reference.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const StudyData data = CaseData(c);
    const HyperparameterImportance result = AnalyzeImportance(data);
    ASSERT_EQ(result.substudies.size(), 1u);
    const SubStudyImportance& sub = result.substudies.front();
    ASSERT_EQ(sub.params.size(), c.at("importance").size());
    for (const ParamImportance& p : sub.params) {
      SCOPED_TRACE(p.param_id);
      const double expected = c.at("importance").at(p.param_id).get<double>();
      EXPECT_NEAR(p.importance, expected, kRelativeTolerance * expected);
      EXPECT_LE(p.low, expected);
      EXPECT_GE(p.high, expected);
    }
  }
}

TEST(Importance, TheToleranceTellsAChangeOfFormulaApart) {
  // A prior weight of 1.05 instead of Optuna's 1 is 1.7% away or more: far outside kRelativeTolerance.
  const nlohmann::json reference = Reference();
  for (const auto& c : reference.at("cases")) {
    const HyperparameterImportance changed =
        AnalyzeImportance(CaseData(c), {.prior_weight = 1.05, .resamples = 1, .permutations = 1});
    for (const ParamImportance& p : changed.substudies.front().params) {
      const double expected = c.at("importance").at(p.param_id).get<double>();
      EXPECT_GT(std::abs(p.importance - expected), 1e-3 * expected) << c.at("name") << " " << p.param_id;
    }
  }
}

TEST(Importance, TheParamThatDecidesTheObjectiveStandsOutOfTheNoise) {
  const nlohmann::json reference = Reference();
  const StudyData data = CaseData(reference.at("cases").at(0));  // "mixed": lr decides, momentum has no effect
  const SubStudyImportance sub = AnalyzeImportance(data).substudies.front();
  EXPECT_EQ(sub.trials, 80);
  EXPECT_EQ(sub.top_trials, 8);
  for (const ParamImportance& p : sub.params) {
    SCOPED_TRACE(p.param_id);
    EXPECT_GT(p.noise_floor, 0);
    if (p.param_id == "lr") {
      EXPECT_FALSE(p.indistinguishable);
      EXPECT_GT(p.low, 5 * p.noise_floor);
    }
    if (p.param_id == "momentum" || p.param_id == "width" || p.param_id == "dropout") {
      EXPECT_TRUE(p.indistinguishable);
    }
  }
  ASSERT_TRUE(sub.best_trial.has_value());
  EXPECT_EQ(sub.params.front().best_value.has_value(), true);
  // The same seed gives the same interval.
  EXPECT_EQ(AnalyzeImportance(data).substudies.front().params.front().low, sub.params.front().low);
}

TEST(Importance, SubStudiesAreAnalyzedApartAndScientificParamsAreLeftOut) {
  StudyData data = MakeData(R"(name: s
workload: synthetic
max_train_steps: 100
space:
  optimizer: {values: [sgd, adam], role: scientific}
  lr: {min: 0.001, max: 1, scale: log}
  fixed: {value: 3}
)");
  for (std::uint64_t i = 0; i < 20; ++i) {
    const std::string optimizer = i % 2 == 0 ? "sgd" : "adam";
    const double lr = std::pow(10.0, -3.0 + 3.0 * static_cast<double>(i / 2) / 10);
    AddTrial(data, i, TrialState::kCompleted, {{"optimizer", Value(optimizer)}, {"lr", Value(lr)}}, lr, std::nullopt,
             i % 2, "optimizer=" + optimizer);
  }
  AddTrial(data, 20, TrialState::kFailed, {{"optimizer", Value(std::string("sgd"))}, {"lr", Value(0.5)}});
  const HyperparameterImportance result = AnalyzeImportance(data, {.resamples = 50, .permutations = 20});
  ASSERT_EQ(result.substudies.size(), 2u);
  EXPECT_EQ(result.substudies[0].substudy, "optimizer=sgd");
  EXPECT_EQ(result.substudies[0].trials, 10);
  ASSERT_EQ(result.substudies[0].params.size(), 1u);  // lr only: optimizer is scientific, fixed does not vary
  EXPECT_EQ(result.substudies[0].params[0].param_id, "lr");
  EXPECT_GT(result.substudies[0].params[0].importance, 0);
  EXPECT_EQ(result.substudies[0].best_trial, std::optional<std::uint64_t>(0));
}

TEST(Importance, TooFewTrialsOrAParamWithOneValueHaveNoImportance) {
  Param single{.id = "c", .name = "c", .kind = ParamKind::kCategorical, .values = {Value(std::string("x"))}};
  EXPECT_EQ(PedAnovaImportance(single, {Value(std::string("x")), Value(std::string("x"))}, {1.0, 2.0}), 0.0);
  Param range{.id = "r", .name = "r", .kind = ParamKind::kFloat, .min = 0, .max = 1};
  EXPECT_EQ(PedAnovaImportance(range, {Value(0.5)}, {1.0}), 0.0);
  // Present in a single trial: fewer than min_trials_in_regime.
  EXPECT_EQ(PedAnovaImportance(range, {Value(0.5), std::nullopt, std::nullopt}, {1.0, 2.0, 3.0}), 0.0);
  StudyData data = MakeData("name: e\nworkload: synthetic\nmax_train_steps: 10\nspace:\n  lr: {min: 0.1, max: 1}\n");
  AddTrial(data, 0, TrialState::kCompleted, {{"lr", Value(0.5)}}, 1.0);
  EXPECT_TRUE(AnalyzeImportance(data).substudies.empty());
}

TEST(Importance, TheChecklistNamesParamsIndistinguishableFromNoEffectWithThePlanThatFixesThem) {
  const nlohmann::json reference = Reference();
  const StudyData data = CaseData(reference.at("cases").at(0));
  const SubStudyImportance sub = AnalyzeImportance(data).substudies.front();
  std::vector<std::string> expected;
  for (const ParamImportance& p : sub.params) {
    if (p.indistinguishable) expected.push_back(p.param_id);
  }
  ASSERT_FALSE(expected.empty());
  std::vector<std::string> named;
  for (const Diagnostic& d : Diagnose(data)) {
    if (d.id != "unimportant") continue;
    named.push_back(d.param_id);
    EXPECT_EQ(d.severity, Severity::kInfo);
    EXPECT_THAT(d.title, ::testing::HasSubstr(d.param_id + " is indistinguishable from no effect"));
    EXPECT_THAT(d.detail, ::testing::HasSubstr("noise floor"));
    EXPECT_THAT(d.suggestion, ::testing::HasSubstr("dltune plan fix --from mixed"));
    EXPECT_THAT(d.suggestion, ::testing::HasSubstr(fmt::format("(trial {})", *sub.best_trial)));
    EXPECT_EQ(d.trials, std::vector<std::uint64_t>{*sub.best_trial});
  }
  // beta2 exists only with adam and nadam: named only when the best trial has it.
  const bool best_has_beta2 = data.trials[*sub.best_trial].params.contains("beta2");
  std::erase_if(expected, [&](const std::string& id) { return id == "beta2" && !best_has_beta2; });
  EXPECT_EQ(named, expected);
  EXPECT_EQ(std::count(named.begin(), named.end(), "lr"), 0);
}

// Given the importance, the checklist reads it rather than computing its own: a page computes it once for both.
TEST(Importance, TheChecklistReadsTheImportanceItIsGiven) {
  const nlohmann::json reference = Reference();
  const StudyData data = CaseData(reference.at("cases").at(0));
  const auto named = [](const std::vector<Diagnostic>& found) {
    std::vector<std::string> ids;
    for (const Diagnostic& d : found) {
      if (d.id == "unimportant") ids.push_back(d.param_id);
    }
    return ids;
  };
  HyperparameterImportance importance = AnalyzeImportance(data);
  EXPECT_EQ(named(Diagnose(data, importance)), named(Diagnose(data)));
  ASSERT_FALSE(named(Diagnose(data)).empty());
  for (ParamImportance& p : importance.substudies.front().params) p.indistinguishable = false;
  EXPECT_TRUE(named(Diagnose(data, importance)).empty());
}

TEST(Importance, TheChecklistWaitsForFiveTopTrialsAndSkipsChosenConfigurations) {
  const nlohmann::json reference = Reference();
  const auto unimportant = [](const StudyData& data) {
    const auto found = Diagnose(data);
    return std::count_if(found.begin(), found.end(), [](const Diagnostic& d) { return d.id == "unimportant"; });
  };
  // The first 40 trials of the mixed case: 4 in the top 10%.
  StudyData few = CaseData(reference.at("cases").at(0));
  few.trials.resize(40);
  EXPECT_EQ(unimportant(few), 0);
  StudyData all = CaseData(reference.at("cases").at(0));
  ASSERT_GT(unimportant(all), 0);
  // The same trials as a retrain's configurations: chosen, not searched.
  all.spec.procedure.kind = "retrain";
  all.spec.procedure.parent = "mixed";
  all.spec.procedure.from_trials = {{.trial = 0, .seed = 1}};
  EXPECT_EQ(unimportant(all), 0);
}

}  // namespace
}  // namespace dltune
