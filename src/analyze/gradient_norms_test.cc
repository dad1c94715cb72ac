#include <gtest/gtest.h>

#include <limits>

#include "analyze_test_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

using testing::AddTrial;
using testing::MakeData;

constexpr const char* kSpec =
    "name: norms\nworkload: w\nmax_train_steps: 1000\nspace:\n  learning_rate: {min: 1.0e-4, max: 1.0, scale: "
    "log}\n";

void AddNorms(StudyData& data, std::uint64_t trial, const std::vector<double>& norms, double clip = 0) {
  for (std::size_t i = 0; i < norms.size(); ++i) {
    TrainMeasurement m{.step = static_cast<std::int64_t>(i) + 1, .grad_norm = norms[i]};
    if (clip > 0) m.clipped = norms[i] > clip;
    data.train[trial].push_back(m);
  }
}

TEST(GradientNormsTest, P90ByLinearInterpolationAndClippedShare) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {}, 0.1, 5);
  AddNorms(data, 0, {3, 1, 4, 10, 5, 9, 2, 6, 8, 7}, 7);  // 8, 9 and 10 are clipped
  AddTrial(data, 1, TrialState::kInfeasible, {});
  AddNorms(data, 1, {1e6, 1e7, std::numeric_limits<double>::infinity()}, 7);  // diverged: not pooled
  const GradientNorms norms = GradientNormAnalysis(data);
  EXPECT_EQ(norms.steps, 10);
  // Sorted 1..10: h = 9 * 0.9 = 8.1, so 9 + 0.1 * (10 - 9).
  ASSERT_TRUE(norms.p90);
  EXPECT_DOUBLE_EQ(*norms.p90, 9.1);
  ASSERT_TRUE(norms.clipped_fraction);
  EXPECT_DOUBLE_EQ(*norms.clipped_fraction, 0.3);
  // Curves for both trials (the infeasible one shows its divergence; its infinite norm left out).
  ASSERT_EQ(norms.curves.size(), 2u);
  EXPECT_EQ(norms.curves[0].series, "grad_norm");
  EXPECT_EQ(norms.curves[0].source, CurveSource::kTrainingSteps);
  EXPECT_EQ(norms.curves[0].points.size(), 10u);
  EXPECT_TRUE(norms.curves[0].highlighted);
  EXPECT_EQ(norms.curves[1].points.size(), 2u);
  EXPECT_EQ(norms.curves[1].state, TrialState::kInfeasible);
}

TEST(GradientNormsTest, LogHistogramCountsAndZeros) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {}, 0.1, 5);
  AddNorms(data, 0, {0, 1, 2, 20, 200, 1000});
  const GradientNorms norms = GradientNormAnalysis(data, 3);
  // Positive norms span [1, 1000]: bins [1, 10), [10, 100), [100, 1000].
  ASSERT_EQ(norms.histogram.size(), 3u);
  EXPECT_EQ(norms.histogram[0].lower, 1);
  EXPECT_NEAR(norms.histogram[0].upper, 10, 1e-9);
  EXPECT_NEAR(norms.histogram[1].upper, 100, 1e-9);
  EXPECT_EQ(norms.histogram[2].upper, 1000);
  EXPECT_EQ(norms.histogram[0].count, 2);
  EXPECT_EQ(norms.histogram[1].count, 1);
  EXPECT_EQ(norms.histogram[2].count, 2);  // 200 and the upper edge 1000
  // The zero is a recorded norm (in steps and p90) but has no place on a log axis.
  EXPECT_EQ(norms.steps, 6);
  // Sorted 0, 1, 2, 20, 200, 1000: h = 5 * 0.9 = 4.5, so 200 + 0.5 * 800.
  EXPECT_DOUBLE_EQ(*norms.p90, 600);
  EXPECT_FALSE(norms.clipped_fraction.has_value());  // no step says whether it was clipped
}

TEST(GradientNormsTest, OneDistinctNormGetsOneBinAroundIt) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {}, 0.1, 5);
  AddNorms(data, 0, {2, 2, 2});
  const GradientNorms norms = GradientNormAnalysis(data);
  ASSERT_EQ(norms.histogram.size(), 1u);
  EXPECT_EQ(norms.histogram[0].count, 3);
  EXPECT_LT(norms.histogram[0].lower, 2);
  EXPECT_GT(norms.histogram[0].upper, 2);
  EXPECT_EQ(*norms.p90, 2);
}

TEST(GradientNormsTest, NoNormsNoStatistics) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {}, 0.1, 5);
  testing::AddLosses(data, 0, {1, 0.5});
  const GradientNorms norms = GradientNormAnalysis(data);
  EXPECT_TRUE(norms.curves.empty());
  EXPECT_TRUE(norms.histogram.empty());
  EXPECT_FALSE(norms.p90.has_value());
  EXPECT_EQ(norms.steps, 0);
}

TEST(GradientNormsTest, ThinnedCurvesKeepTheLargestNorm) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {}, 0.1, 10);
  std::vector<double> values(100, 1.0);
  values[48] = 1000;  // a spike at step 49, off the even grid
  AddNorms(data, 0, values);
  const GradientNorms norms = GradientNormAnalysis(data, 30, 5);
  const auto& points = norms.curves.at(0).points;
  ASSERT_EQ(points.size(), 5u);
  std::vector<std::int64_t> steps(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) steps[i] = points[i].step;
  // Grid indices 0, 25, 50, 74, 99 (round(k * 99 / 4)); the best step 10 (index 9) replaces 25, the spike
  // (index 48) replaces 50.
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 10, 49, 75, 100}));
}

}  // namespace
}  // namespace dltune
