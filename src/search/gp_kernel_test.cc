#include "gp_kernel.h"

#include <cmath>

#include <gtest/gtest.h>

namespace dltune::internal {
namespace {

// Reference values from a reference file of test vectors (halton_algoperf.txt, not part of this repository): Matern-5/2
// k(r2) and dk/d(r2) computed with mpmath at 50 digits.
struct MaternCase {
  double r2;
  double k;
  double slope;
};
constexpr MaternCase kMaternCases[] = {
    {0.0, 1.0, -0.83333333333333337},
    {0.01, 0.99175923617117767, -0.81536006502213365},
    {0.25, 0.82864914241812526, -0.57702640501796632},
    {1.0, 0.52399410883182029, -0.28822019394264781},
    {4.0, 0.13866021913850426, -0.052089677096159435},
};

TEST(GpKernel, MaternMatchesReferenceValues) {
  for (const auto& c : kMaternCases) {
    EXPECT_NEAR(Matern52(c.r2), c.k, 1e-15 * std::abs(c.k) + 1e-300) << "r2=" << c.r2;
    EXPECT_NEAR(Matern52Derivative(c.r2), c.slope, 2e-15 * std::abs(c.slope)) << "r2=" << c.r2;
  }
}

TEST(GpKernel, MaternDerivativeMatchesFiniteDifferences) {
  for (const double r2 : {0.05, 0.3, 1.7, 6.0}) {
    const double h = 1e-6 * r2;
    EXPECT_NEAR(Matern52Derivative(r2), (Matern52(r2 + h) - Matern52(r2 - h)) / (2 * h), 1e-8) << r2;
  }
}

TEST(GpKernel, ArdKernelScalesEachGroupAndHasTheRightGradient) {
  // Three features: one range (group 0) and a two-value one-hot param (group 1).
  Eigen::VectorXd lengths(2);
  lengths << 0.5, 2.0;
  const ArdMatern kernel({0, 1, 1}, 1.7, lengths);
  Eigen::VectorXd a(3);
  Eigen::VectorXd b(3);
  a << 0.2, 0.7, 0.0;
  b << 0.6, 0.0, 0.7;
  const double r2 = 0.4 * 0.4 / 0.25 + (0.49 + 0.49) / 4.0;
  EXPECT_NEAR(kernel.ScaledDistance(a, b), r2, 1e-15);

  Eigen::MatrixXd points(3, 2);
  points << a, b;
  const Eigen::MatrixXd cross = kernel.Cross(points, points);
  EXPECT_NEAR(cross(0, 0), 1.7, 1e-15);
  EXPECT_NEAR(cross(0, 1), 1.7 * Matern52(r2), 1e-15);
  EXPECT_NEAR(cross(1, 0), cross(0, 1), 1e-15);

  Eigen::VectorXd x(3);
  x << 0.35, 0.1, 0.5;
  Eigen::VectorXd values;
  Eigen::MatrixXd gradient;
  kernel.Column(points, x, values, &gradient);
  for (int f = 0; f < 3; ++f) {
    Eigen::VectorXd up = x;
    Eigen::VectorXd down = x;
    up(f) += 1e-6;
    down(f) -= 1e-6;
    Eigen::VectorXd v_up;
    Eigen::VectorXd v_down;
    kernel.Column(points, up, v_up, nullptr);
    kernel.Column(points, down, v_down, nullptr);
    for (int i = 0; i < 2; ++i) EXPECT_NEAR(gradient(f, i), (v_up(i) - v_down(i)) / 2e-6, 1e-8) << f << " " << i;
  }
}

}  // namespace
}  // namespace dltune::internal
