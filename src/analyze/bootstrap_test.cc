#include <gtest/gtest.h>

#include "analyze_test_util.h"
#include "core/rng.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

using testing::AddTrial;
using testing::MakeData;

StudyData Study(const std::string& direction, const std::vector<std::vector<double>>& substudies) {
  StudyData data = MakeData(
      "name: boot\nworkload: w\nmax_train_steps: 100\nobjective: {metric: valid/error_rate, "
      "direction: " +
      direction + "}\nspace:\n  lr: {min: 1.0e-4, max: 1.0, scale: log}\n");
  std::uint64_t number = 0;
  for (std::size_t s = 0; s < substudies.size(); ++s) {
    for (const double value : substudies[s]) {
      AddTrial(data, number++, TrialState::kCompleted, {{"lr", 0.01}}, value, 10, s, "s" + std::to_string(s));
    }
  }
  return data;
}

void ExpectBoxes(const BootstrapPlot& plot, const double (*expected)[6], std::size_t count) {
  ASSERT_EQ(plot.boxes.size(), count);
  for (std::size_t i = 0; i < count; ++i) {
    const BootstrapBox& box = plot.boxes[i];
    EXPECT_EQ(box.budget, static_cast<int>(expected[i][0]));
    EXPECT_DOUBLE_EQ(box.min, expected[i][1]) << "budget " << box.budget;
    EXPECT_DOUBLE_EQ(box.q1, expected[i][2]) << "budget " << box.budget;
    EXPECT_DOUBLE_EQ(box.median, expected[i][3]) << "budget " << box.budget;
    EXPECT_DOUBLE_EQ(box.q3, expected[i][4]) << "budget " << box.budget;
    EXPECT_DOUBLE_EQ(box.max, expected[i][5]) << "budget " << box.budget;
  }
}

// Output of tools/bootstrap_reference.py (numpy 1.24.2), which reimplements the draws independently.
// Rng(MixSeed(7, 0)) first NextU64: 5071342556736648032
// kMinimizeBoxes: values [0.31, 0.27, 0.35, 0.22, 0.29], resamples 200, seed 42, sub-study 0, minimize
constexpr double kMinimizeBoxes[][6] = {
    {1.0, 0.22, 0.27, 0.29, 0.31, 0.35}, {2.0, 0.22, 0.22, 0.27, 0.29, 0.35}, {3.0, 0.22, 0.22, 0.27, 0.27, 0.35},
    {4.0, 0.22, 0.22, 0.22, 0.27, 0.35}, {5.0, 0.22, 0.22, 0.22, 0.27, 0.31},
};
// kMaximizeBoxes: values [0.61, 0.74, 0.58, 0.7], resamples 101, seed 7, sub-study 1, maximize
constexpr double kMaximizeBoxes[][6] = {
    {1.0, 0.58, 0.61, 0.61, 0.7, 0.74},
    {2.0, 0.58, 0.7, 0.7, 0.74, 0.74},
    {3.0, 0.61, 0.7, 0.74, 0.74, 0.74},
    {4.0, 0.61, 0.7, 0.74, 0.74, 0.74},
};
// kInterpolatedBoxes: values [0.5, 0.125, 0.875, 0.25, 0.625, 0.375, 0.75], resamples 6, seed 3, sub-study 0,
// minimize
constexpr double kInterpolatedBoxes[][6] = {
    {1.0, 0.125, 0.125, 0.25, 0.46875, 0.75},  {2.0, 0.125, 0.125, 0.1875, 0.34375, 0.75},
    {3.0, 0.125, 0.125, 0.1875, 0.34375, 0.5}, {4.0, 0.125, 0.125, 0.1875, 0.34375, 0.5},
    {5.0, 0.125, 0.125, 0.1875, 0.34375, 0.5}, {6.0, 0.125, 0.125, 0.1875, 0.25, 0.5},
    {7.0, 0.125, 0.125, 0.125, 0.21875, 0.25},
};

TEST(BootstrapTest, ReferenceRngAgrees) {
  // The reference script's port of Rng prints this number; if it differs, its boxes mean nothing.
  Rng rng(MixSeed(7, 0));
  EXPECT_EQ(rng.NextU64(), 5071342556736648032u);
}

TEST(BootstrapTest, MatchesTheIndependentReference) {
  ExpectBoxes(BootstrapBestObjective(Study("minimize", {{0.31, 0.27, 0.35, 0.22, 0.29}}), 200, 42).at(0),
              kMinimizeBoxes, 5);
  // Sub-study 1 of a maximized objective (sub-study 0 holds other trials, drawn from its own stream).
  const auto plots = BootstrapBestObjective(Study("maximize", {{0.1, 0.2}, {0.61, 0.74, 0.58, 0.7}}), 101, 7);
  ASSERT_EQ(plots.size(), 2u);
  EXPECT_EQ(plots[1].substudy, "s1");
  ExpectBoxes(plots[1], kMaximizeBoxes, 4);
  ExpectBoxes(BootstrapBestObjective(Study("minimize", {{0.5, 0.125, 0.875, 0.25, 0.625, 0.375, 0.75}}), 6, 3).at(0),
              kInterpolatedBoxes, 7);
}

TEST(BootstrapTest, BudgetOneIsTheValuesAndLargerBudgetsMoveTowardTheBest) {
  const std::vector<double> values = {0.31, 0.27, 0.35, 0.22, 0.29};
  const auto plots = BootstrapBestObjective(Study("minimize", {values}), 2001, 5);
  ASSERT_EQ(plots.size(), 1u);
  const auto& boxes = plots[0].boxes;
  ASSERT_EQ(boxes.size(), 5u);
  EXPECT_EQ(boxes[0].median, 0.29);  // the median of the values
  EXPECT_EQ(boxes[0].min, 0.22);
  EXPECT_EQ(boxes[0].max, 0.35);
  // Each resample's draw grows by one trial per budget, so nothing moves away from the best.
  for (std::size_t i = 1; i < boxes.size(); ++i) {
    EXPECT_LE(boxes[i].max, boxes[i - 1].max);
    EXPECT_LE(boxes[i].q1, boxes[i - 1].q1);
    EXPECT_LE(boxes[i].median, boxes[i - 1].median);
    EXPECT_LE(boxes[i].q3, boxes[i - 1].q3);
  }
  EXPECT_EQ(boxes[4].median, 0.22);  // 5 draws miss the best with probability (4/5)^5 = 0.33 only
  EXPECT_LT(boxes[4].q3, boxes[0].q3);
}

TEST(BootstrapTest, ExactDistributionForThreeTrials) {
  // Best of k draws from {1, 2, 3}: P(best = 1) = 1 - (2/3)^k, P(best <= 2) = 1 - (1/3)^k.
  // k = 1: 1/3, 2/3 -> quartiles 1, 2, 3.  k = 2: 5/9, 8/9 -> 1, 1, 2.  k = 3: 19/27, 26/27 -> 1, 1, 2.
  const auto plots = BootstrapBestObjective(Study("minimize", {{3, 1, 2}}), 20000, 11);
  const auto& boxes = plots.at(0).boxes;
  ASSERT_EQ(boxes.size(), 3u);
  const double expected[3][3] = {{1, 2, 3}, {1, 1, 2}, {1, 1, 2}};
  for (std::size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(boxes[k].q1, expected[k][0]) << "budget " << k + 1;
    EXPECT_EQ(boxes[k].median, expected[k][1]) << "budget " << k + 1;
    EXPECT_EQ(boxes[k].q3, expected[k][2]) << "budget " << k + 1;
    EXPECT_EQ(boxes[k].min, 1);
    EXPECT_EQ(boxes[k].max, 3);  // 20000 draws all missing 1 and 2 is impossible in practice, 3 is drawn
  }
}

TEST(BootstrapTest, DeterministicForASeed) {
  const StudyData data = Study("minimize", {{0.5, 0.125, 0.875, 0.25, 0.625, 0.375, 0.75}});
  const auto a = BootstrapBestObjective(data, 6, 3);
  const auto b = BootstrapBestObjective(data, 6, 3);
  const auto c = BootstrapBestObjective(data, 6, 4);
  bool differs = false;
  for (std::size_t i = 0; i < a[0].boxes.size(); ++i) {
    EXPECT_EQ(a[0].boxes[i].q1, b[0].boxes[i].q1);
    EXPECT_EQ(a[0].boxes[i].median, b[0].boxes[i].median);
    EXPECT_EQ(a[0].boxes[i].q3, b[0].boxes[i].q3);
    differs = differs || a[0].boxes[i].q1 != c[0].boxes[i].q1 || a[0].boxes[i].median != c[0].boxes[i].median ||
              a[0].boxes[i].q3 != c[0].boxes[i].q3;
  }
  EXPECT_TRUE(differs);
}

TEST(BootstrapTest, OnlyCompletedTrialsWithAnObjective) {
  StudyData data = Study("minimize", {{0.3, 0.2}});
  AddTrial(data, 10, TrialState::kInfeasible, {}, 0.01, 5);
  AddTrial(data, 11, TrialState::kRunning, {}, 0.01, 5);
  AddTrial(data, 12, TrialState::kCompleted, {}, std::nullopt, std::nullopt);
  AddTrial(data, 13, TrialState::kFailed, {}, std::nullopt, std::nullopt, 1, "s1");  // a sub-study with none
  const auto plots = BootstrapBestObjective(data, 50, 0);
  ASSERT_EQ(plots.size(), 1u);
  ASSERT_EQ(plots[0].boxes.size(), 2u);
  EXPECT_EQ(plots[0].boxes[1].min, 0.2);
  EXPECT_EQ(plots[0].boxes[1].max, 0.3);
}

TEST(BootstrapTest, LargeStudiesGetEveryBudgetUpToFiftyThenFivePercentSteps) {
  std::vector<std::uint64_t> first_fifty;
  for (std::uint64_t budget = 1; budget <= 50; ++budget) first_fifty.push_back(budget);
  EXPECT_EQ(BootstrapBudgets(50), first_fifty);
  EXPECT_EQ(BootstrapBudgets(3), (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_TRUE(BootstrapBudgets(0).empty());
  const auto budgets = BootstrapBudgets(10000);
  EXPECT_EQ(budgets.back(), 10000u);
  EXPECT_LT(budgets.size(), 160u);
  for (std::size_t i = 51; i + 1 < budgets.size(); ++i) {
    EXPECT_GT(budgets[i], budgets[i - 1]);
    EXPECT_LE(static_cast<double>(budgets[i]), 1.06 * static_cast<double>(budgets[i - 1]) + 1);
  }

  std::vector<double> values;
  for (int i = 0; i < 300; ++i) values.push_back(static_cast<double>((i * 37) % 300) / 300.0);
  const auto plots = BootstrapBestObjective(Study("minimize", {values}), 20, 1);
  ASSERT_EQ(plots.size(), 1u);
  const auto expected = BootstrapBudgets(300);
  ASSERT_EQ(plots[0].boxes.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) EXPECT_EQ(plots[0].boxes[i].budget, static_cast<int>(expected[i]));
}

}  // namespace
}  // namespace dltune
