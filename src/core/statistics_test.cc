#include "dltune/core/statistics.h"

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

// Reference quantiles from mpmath at 30 digits (the root of 1 - I_{v/(v+t^2)}(v/2, 1/2) / 2 = p). scipy.stats.t.ppf
// agrees to about 1e-9 relative (its cephes stdtrit is less exact), which is the tolerance the reference script
// (tools/trial_variance_reference.py) is held to.
TEST(Statistics, StudentTQuantilesMatchAnExactReference) {
  const struct {
    double dof, p975, p90;
  } cases[] = {{1, 12.706204736174705, 3.0776835371752534},  {2, 4.3026527297494639, 1.8856180831641267},
               {3, 3.1824463052837096, 1.6377443536962101},  {4, 2.7764451051977944, 1.5332062740589439},
               {9, 2.2621571627982055, 1.3830287383966323},  {29, 2.0452296421327043, 1.3114336473015511},
               {100, 1.9839715185235523, 1.290074761346516}, {1000, 1.9623390808264085, 1.2823987214609244}};
  for (const auto& c : cases) {
    EXPECT_NEAR(StudentTQuantile(0.975, c.dof), c.p975, 1e-12 * c.p975) << c.dof;
    EXPECT_NEAR(StudentTQuantile(0.9, c.dof), c.p90, 1e-12 * c.p90) << c.dof;
    EXPECT_NEAR(StudentTQuantile(0.025, c.dof), -c.p975, 1e-12 * c.p975) << c.dof;
    EXPECT_NEAR(StudentTCdf(c.p975, c.dof), 0.975, 1e-13);
  }
  EXPECT_EQ(StudentTQuantile(0.5, 3), 0.0);
  EXPECT_THROW(StudentTQuantile(1.0, 3), Error);
  EXPECT_THROW(StudentTQuantile(0.9, 0.5), Error);
}

TEST(Statistics, IncompleteBetaMatchesScipy) {
  EXPECT_NEAR(RegularizedIncompleteBeta(0.3, 2.5, 0.5), 0.01892712407194565, 1e-14);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.9, 0.5, 0.5), 0.7951672353008662, 1e-14);
  EXPECT_NEAR(RegularizedIncompleteBeta(0.7, 10, 3), 0.2528153478549999, 1e-14);
  EXPECT_EQ(RegularizedIncompleteBeta(0.0, 2, 3), 0.0);
  EXPECT_EQ(RegularizedIncompleteBeta(1.0, 2, 3), 1.0);
}

TEST(Statistics, MeanIntervalOfReplicas) {
  const std::vector<double> values = {0.1123, 0.1189, 0.1102, 0.1150, 0.1167};
  const MeanInterval summary = SummarizeMean(values);
  EXPECT_EQ(summary.n, 5);
  EXPECT_NEAR(summary.mean, 0.11462000000000001, 1e-15);
  ASSERT_TRUE(summary.sd && summary.low && summary.high);
  EXPECT_NEAR(*summary.sd, 0.0034535488993208134, 1e-15);
  EXPECT_NEAR(*summary.low, 0.11033185266567712, 1e-12);  // scipy.stats.t.interval
  EXPECT_NEAR(*summary.high, 0.11890814733432291, 1e-12);

  const MeanInterval single = SummarizeMean(std::vector<double>{0.2});
  EXPECT_EQ(single.n, 1);
  EXPECT_EQ(single.mean, 0.2);
  EXPECT_FALSE(single.sd);
  EXPECT_FALSE(single.HalfWidth());
  EXPECT_EQ(SummarizeMean(std::vector<double>{}).n, 0);
  EXPECT_THROW(SummarizeMean(values, 1.0), Error);
}

TEST(Statistics, SpearmanWithTiesMatchesScipy) {
  EXPECT_NEAR(*SpearmanCorrelation(std::vector<double>{1, 2, 3, 4, 5}, std::vector<double>{5, 6, 7, 8, 7}),
              0.8207826816681233, 1e-14);
  EXPECT_NEAR(*SpearmanCorrelation(std::vector<double>{0.3, 0.1, 0.2, 0.1}, std::vector<double>{1, 3, 2, 4}),
              -0.9486832980505139, 1e-14);
  EXPECT_FALSE(SpearmanCorrelation(std::vector<double>{1}, std::vector<double>{2}));
  EXPECT_FALSE(SpearmanCorrelation(std::vector<double>{1, 1, 1}, std::vector<double>{1, 2, 3}));
}

}  // namespace
}  // namespace dltune
