#include "core/discrepancy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "dltune/core/error.h"

namespace dltune {
namespace {

// Point sets and expected values printed by tools/discrepancy_reference.py (scipy 1.10.1, numpy 1.24.2).
// clang-format off
constexpr double kOnePoint1d[] = {0.3};
constexpr double kFive1d[] = {0.0, 0.25, 0.5, 0.75, 1.0};
constexpr double kDocExample2d[] = {0.08333333333333333, 0.4166666666666667, 0.25, 0.9166666666666666,
                                    0.4166666666666667,  0.25,               0.5833333333333334, 0.75,
                                    0.75,                0.08333333333333333, 0.9166666666666666, 0.5833333333333334};
constexpr double kRandom3d[] = {0.9766997666981422,  0.3801957350196178, 0.9232462337639554, 0.2616924238635442,
                                0.31909705841419755, 0.11809123296664281, 0.2417662932527851, 0.3185339287822264,
                                0.9640792451783763,  0.26364980427509377, 0.4410061220535114, 0.6098708094225075,
                                0.8636212965699608,  0.8637576707745845, 0.674881313349695,  0.6598743479594311,
                                0.7357576983159544,  0.22275365813138726, 0.17206618466113854, 0.8704149724889354,
                                0.06013865780151506};
constexpr double kRandom5d[] = {0.5060306745483945, 0.5650916317844883, 0.5119159596920518, 0.972186372136213,
                                0.6149031419691238, 0.568283497894576,  0.286786722869132,  0.5545114532488966,
                                0.4675235255509025, 0.6100580080194371, 0.9304424976796661, 0.2458853836404331,
                                0.309438338643525,  0.3910796510388972, 0.2702717323993099, 0.3500149494286139,
                                0.9362296910896857, 0.37788421583673415, 0.7746492087999101, 0.04056724038965409};
constexpr double kCorners2d[] = {0.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.5, 0.5};
// clang-format on

// The sums cancel (terms ~1, results ~1e-3), so compare to an absolute tolerance a few ulps of 1 wide.
constexpr double kTolerance = 1e-14;

// The "formula" sets of tools/discrepancy_reference.py: x[i][k] = ((i * a_k + c_k) % m) / m.
std::vector<double> FormulaPoints(std::size_t n, std::size_t d, std::uint64_t m) {
  std::vector<double> points;
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t k = 0; k < d; ++k) {
      const std::uint64_t a = 1 + 2 * k + (k * k) % 7;
      const std::uint64_t c = (3 * k + 1) % m;
      points.push_back(static_cast<double>((i * a + c) % m) / static_cast<double>(m));
    }
  }
  return points;
}

struct Case {
  const char* name;
  std::vector<double> points;
  std::size_t dims;
  double cd;
  double l2_star;
};

std::vector<Case> Cases() {
  auto vec = [](const auto& array) { return std::vector<double>(std::begin(array), std::end(array)); };
  return {
      {"kOnePoint1d", vec(kOnePoint1d), 1, 0.1233333333333333, 0.35118845842842455},
      {"kFive1d", vec(kFive1d), 1, 0.008333333333333082, 0.09128709291752753},
      {"kDocExample2d", vec(kDocExample2d), 2, 0.008142039609053464, 0.06833606212558091},
      {"kRandom3d", vec(kRandom3d), 3, 0.060403853867541546, 0.07938959244196254},
      {"kRandom5d", vec(kRandom5d), 5, 0.24152794751645046, 0.05254113977033697},
      {"kCorners2d", vec(kCorners2d), 2, 0.10861111111111077, 0.15767406607020418},
      {"formula n=50 d=6 m=53", FormulaPoints(50, 6, 53), 6, 0.021214103690530894, 0.018034265462418896},
      {"formula n=200 d=1 m=211", FormulaPoints(200, 1, 211), 1, 0.0007900953108210818, 0.02810863409749592},
      {"formula n=128 d=4 m=131", FormulaPoints(128, 4, 131), 4, 0.012748703774329906, 0.04721344119833232},
  };
}

TEST(DiscrepancyTest, CenteredL2MatchesScipy) {
  for (const Case& c : Cases()) {
    EXPECT_NEAR(CenteredL2Discrepancy(c.points, c.dims), c.cd, kTolerance) << c.name;
  }
}

TEST(DiscrepancyTest, L2StarMatchesScipy) {
  for (const Case& c : Cases()) {
    EXPECT_NEAR(L2StarDiscrepancy(c.points, c.dims), c.l2_star, kTolerance) << c.name;
  }
}

TEST(DiscrepancyTest, PointOrderDoesNotMatter) {
  std::vector<double> points = FormulaPoints(50, 6, 53);
  const double cd = CenteredL2Discrepancy(points, 6);
  const double l2 = L2StarDiscrepancy(points, 6);
  // Reverse the order of the points (not of the coordinates).
  std::vector<double> reversed;
  for (std::size_t i = 50; i-- > 0;)
    reversed.insert(reversed.end(), points.begin() + 6 * i, points.begin() + 6 * i + 6);
  EXPECT_NEAR(CenteredL2Discrepancy(reversed, 6), cd, kTolerance);
  EXPECT_NEAR(L2StarDiscrepancy(reversed, 6), l2, kTolerance);
}

TEST(DiscrepancyTest, RejectsBadInput) {
  const std::vector<double> points = {0.1, 0.2, 0.3, 0.4};
  EXPECT_THROW(CenteredL2Discrepancy(points, 0), Error);
  EXPECT_THROW(L2StarDiscrepancy(points, 0), Error);
  EXPECT_THROW(CenteredL2Discrepancy(points, 3), Error);
  EXPECT_THROW(L2StarDiscrepancy(points, 3), Error);
  EXPECT_THROW(CenteredL2Discrepancy(std::vector<double>{}, 2), Error);
  for (double bad : {-1e-300, 1.0000000000000002, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    const std::vector<double> with_bad = {0.1, 0.2, bad, 0.4};
    EXPECT_THROW(CenteredL2Discrepancy(with_bad, 2), Error) << bad;
    EXPECT_THROW(L2StarDiscrepancy(with_bad, 2), Error) << bad;
  }
  try {
    CenteredL2Discrepancy(std::vector<double>{0.1, 0.2, 1.5, 0.4}, 2);
    FAIL() << "expected dltune::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("coordinate 0 of point 1"), std::string::npos) << e.what();
  }
  // The closed interval is accepted.
  EXPECT_NO_THROW(CenteredL2Discrepancy(std::vector<double>{0.0, 1.0}, 2));
}

}  // namespace
}  // namespace dltune
