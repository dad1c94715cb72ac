#include "log_ei.h"

#include <cmath>

#include <gtest/gtest.h>

namespace dltune::internal {
namespace {

// Reference values from a reference file of test vectors (halton_algoperf.txt, not part of this repository): h(z) =
// log(z Phi(z) + phi(z)) computed with mpmath at 50 digits.
struct LogEiCase {
  double z;
  double h;
};
constexpr LogEiCase kLogEiCases[] = {
    {-40.0, -808.29856835661997}, {-30.0, -457.72465376059802}, {-25.5, -332.525884462205},
    {-25.0, -319.86146358149597}, {-10.0, -55.553122036122353}, {-5.0, -16.744301162660989},
    {-1.0, -2.4851210257126413},  {0.0, -0.91893853320467278},  {0.5, -0.3598276837450638},
    {1.0, 0.08002621884930694},   {3.0, 1.0987396653277077},    {8.0, 2.0794415416798357},
};

TEST(LogEi, MatchesReferenceValues) {
  for (const auto& c : kLogEiCases) {
    EXPECT_NEAR(LogEi(c.z), c.h, 4e-15 * std::max(1.0, std::abs(c.h))) << "z=" << c.z;
  }
}

TEST(LogEi, IsFiniteAndFollowsTheAsymptoteFarOut) {
  // h(z) = -z^2/2 - log(sqrt(2 pi)) - 2 log|z| + log(1 - 3/z^2 + 15/z^4 - ...) for z -> -infinity, and
  // h'(z) = -z - 2/z + O(1/z^3).
  for (const double z : {-1e3, -1e6}) {
    const double asymptote =
        -0.5 * z * z - 0.5 * std::log(2 * M_PI) - 2 * std::log(-z) + std::log1p(-3 / (z * z) + 15 / (z * z * z * z));
    EXPECT_NEAR(LogEi(z), asymptote, 1e-15 * std::abs(asymptote)) << z;
    EXPECT_NEAR(LogEiDerivative(z), -z - 2 / z, 1e-11 * -z) << z;
  }
}

TEST(LogEi, DerivativeMatchesFiniteDifferencesOnBothSidesOfTheSwitch) {
  for (const double z : {-30.0, -8.0, -3.0001, -2.9999, -1.0, 0.0, 2.0, 6.0}) {
    const double h = 1e-5;
    const double numeric = (LogEi(z + h) - LogEi(z - h)) / (2 * h);
    EXPECT_NEAR(LogEiDerivative(z), numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << z;
  }
  // Both formulas agree where they meet.
  EXPECT_NEAR(LogEi(-3.0 - 1e-13), LogEi(-3.0), 1e-12);
}

TEST(LogEi, LogNormalCdfIsAccurateEverywhere) {
  for (const double z : {-2.0, -1.0, 0.0, 1.0, 4.0})
    EXPECT_NEAR(LogNormalCdf(z), std::log(0.5 * std::erfc(-z / M_SQRT2)), 1e-14);
  // Below z = -3 against the erfc formula while it still has full precision.
  for (const double z : {-3.5, -10.0, -30.0}) {
    EXPECT_NEAR(LogNormalCdf(z), std::log(0.5 * std::erfc(-z / M_SQRT2)), 1e-13 * std::abs(LogNormalCdf(z))) << z;
  }
  EXPECT_TRUE(std::isfinite(LogNormalCdf(-1e4)));
  EXPECT_NEAR(LogNormalCdf(40.0), 0.0, 1e-300);
  for (const double z : {-20.0, -3.0001, -2.9999, 0.0, 3.0}) {
    const double numeric = (LogNormalCdf(z + 1e-5) - LogNormalCdf(z - 1e-5)) / 2e-5;
    EXPECT_NEAR(LogNormalCdfDerivative(z), numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << z;
  }
}

TEST(LogEi, NormalQuantileInvertsTheCdf) {
  for (const double p : {1e-10, 0.01, 0.3, 0.5, 0.9, 0.999}) {
    EXPECT_NEAR(std::exp(LogNormalCdf(NormalQuantile(p))), p, 1e-12 * p) << p;
  }
  EXPECT_NEAR(NormalQuantile(0.975), 1.959963984540054, 1e-12);
}

}  // namespace
}  // namespace dltune::internal
