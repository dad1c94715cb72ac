#include "search/halton.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/discrepancy.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

constexpr HaltonOptions kUnshifted{.scramble = true, .shift = false};  // the default
constexpr HaltonOptions kShifted{.scramble = true, .shift = true};
constexpr HaltonOptions kPlain{.scramble = false, .shift = false};

std::vector<double> Points(const ScrambledHalton& halton, std::uint64_t first, std::size_t count) {
  std::vector<double> points(count * halton.dims());
  for (std::size_t i = 0; i < count; ++i) {
    halton.Point(first + i, std::span<double>(points).subspan(i * halton.dims(), halton.dims()));
  }
  return points;
}

std::uint64_t Bits(double x) {
  std::uint64_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

std::uint64_t Power(std::uint64_t base, int exponent) {
  std::uint64_t result = 1;
  for (int i = 0; i < exponent; ++i) result *= base;
  return result;
}

TEST(HaltonTest, PrimesHelper) {
  EXPECT_TRUE(Primes(0).empty());
  EXPECT_EQ(Primes(10), (std::vector<std::uint32_t>{2, 3, 5, 7, 11, 13, 17, 19, 23, 29}));
  const std::vector<std::uint32_t> many = Primes(ScrambledHalton::kMaxDims);
  EXPECT_EQ(many[63], 311u);
  EXPECT_EQ(many.back(), 719u);
}

TEST(HaltonTest, BasesAreTheFirstPrimes) {
  const ScrambledHalton halton(64, 1);
  const std::vector<std::uint32_t> primes = Primes(64);
  for (std::size_t d = 0; d < 64; ++d) EXPECT_EQ(halton.Base(d), primes[d]);
}

TEST(HaltonTest, RejectsBadDimensions) {
  EXPECT_THROW(ScrambledHalton(0, 1), Error);
  EXPECT_THROW(ScrambledHalton(ScrambledHalton::kMaxDims + 1, 1), Error);
  EXPECT_NO_THROW(ScrambledHalton(ScrambledHalton::kMaxDims, 1));
}

// Without scrambling and shift it is the plain Halton sequence. Expected values: the reference's "Plain Halton"
// table (a reference file of test vectors (halton_algoperf.txt, not part of this repository), i.e.
// scipy.stats.qmc.Halton(scramble=False)); scipy sums digit * base^-k in floating point while dltune rounds an exact
// 64-bit fixed-point value once, so the two may differ by an ulp (e.g. 0.6 for index 3 in base 5, where scipy prints
// 0.60000000000000009).
TEST(HaltonTest, UnscrambledUnshiftedIsThePlainHaltonSequence) {
  const double expected[10][3] = {
      {0, 0, 0},
      {0.5, 0.33333333333333331, 0.20000000000000001},
      {0.25, 0.66666666666666663, 0.40000000000000002},
      {0.75, 0.1111111111111111, 0.60000000000000009},
      {0.125, 0.44444444444444442, 0.80000000000000004},
      {0.625, 0.77777777777777768, 0.040000000000000001},
      {0.375, 0.22222222222222221, 0.24000000000000002},
      {0.875, 0.55555555555555558, 0.44},
      {0.0625, 0.88888888888888884, 0.64000000000000012},
      {0.5625, 0.037037037037037035, 0.84000000000000008},
  };
  const ScrambledHalton halton(3, 123, kPlain);
  for (std::uint64_t i = 0; i < 10; ++i) {
    for (std::size_t d = 0; d < 3; ++d) {
      EXPECT_NEAR(halton.Coordinate(i, d), expected[i][d], 0x1p-52) << "index " << i << " dim " << d;
    }
  }
  // Exact where the value is a dyadic rational.
  EXPECT_EQ(halton.Coordinate(13, 0), 0.6875);  // 1101b reversed = .1011b
  // Indices around and above 2^32 (where the digit loop switches from 64-bit division to multiplication).
  EXPECT_EQ(halton.Coordinate((std::uint64_t{1} << 32) - 1, 0), 1.0 - 0x1p-32);
  EXPECT_EQ(halton.Coordinate(std::uint64_t{1} << 32, 0), 0x1p-33);
  EXPECT_EQ(halton.Coordinate((std::uint64_t{1} << 40) + 5, 0), 0.625 + 0x1p-41);
  // 3^25 + 7: digits 1, 2 at positions 1, 2 (7 = 21 in base 3) and 1 at position 26 (the extra term is ~1e-12).
  EXPECT_NEAR(halton.Coordinate(Power(3, 25) + 7, 1), 5.0 / 9.0 + std::pow(3.0, -26), 3e-16);
  EXPECT_NEAR(halton.Coordinate(Power(5, 20) * 4 + 3, 2), 0.6 + 4.0 * std::pow(5.0, -21), 3e-16);
}

TEST(HaltonTest, DefaultIsScrambledWithoutShift) {
  const ScrambledHalton halton(2, 3);
  EXPECT_TRUE(halton.options().scramble);
  EXPECT_FALSE(halton.options().shift);
  const ScrambledHalton unshifted(2, 3, kUnshifted);
  for (std::uint64_t i = 0; i < 50; ++i) EXPECT_EQ(Bits(halton.Coordinate(i, 1)), Bits(unshifted.Coordinate(i, 1)));
}

TEST(HaltonTest, DeterministicAndOrderIndependent) {
  const ScrambledHalton a(8, 42, kShifted);
  const ScrambledHalton b(8, 42, kShifted);
  const std::vector<double> forward = Points(a, 0, 500);
  EXPECT_EQ(forward, Points(a, 0, 500));
  std::vector<double> reverse(forward.size());
  for (std::size_t i = 500; i-- > 0;) b.Point(i, std::span<double>(reverse).subspan(i * 8, 8));
  for (std::size_t i = 0; i < forward.size(); ++i) ASSERT_EQ(Bits(forward[i]), Bits(reverse[i])) << i;
  // Coordinate agrees with Point.
  for (std::uint64_t i = 0; i < 500; i += 37) {
    for (std::size_t d = 0; d < 8; ++d) EXPECT_EQ(Bits(a.Coordinate(i, d)), Bits(forward[i * 8 + d]));
  }
}

TEST(HaltonTest, AddingDimensionsKeepsExistingOnes) {
  const ScrambledHalton small(3, 7);
  const ScrambledHalton large(40, 7);
  for (std::uint64_t i = 0; i < 300; ++i) {
    for (std::size_t d = 0; d < 3; ++d) ASSERT_EQ(Bits(small.Coordinate(i, d)), Bits(large.Coordinate(i, d)));
  }
}

TEST(HaltonTest, DifferentSeedsDiffer) {
  const ScrambledHalton a(6, 0);
  const ScrambledHalton b(6, 1);
  const ScrambledHalton shifted_a(6, 0, kShifted);
  const ScrambledHalton shifted_b(6, 1, kShifted);
  std::size_t equal = 0;
  for (std::uint64_t i = 0; i < 200; ++i) {
    for (std::size_t d = 0; d < 6; ++d) {
      equal += a.Coordinate(i, d) == b.Coordinate(i, d);
      equal += shifted_a.Coordinate(i, d) == shifted_b.Coordinate(i, d);
    }
  }
  EXPECT_EQ(equal, 0u);
}

TEST(HaltonTest, PointsAreInTheHalfOpenUnitInterval) {
  for (const HaltonOptions& options : {kUnshifted, kShifted, kPlain}) {
    const ScrambledHalton halton(ScrambledHalton::kMaxDims, 5, options);
    std::vector<double> point(halton.dims());
    for (std::uint64_t index :
         {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1} << 40, std::numeric_limits<std::uint64_t>::max() - 1,
          std::numeric_limits<std::uint64_t>::max()}) {
      halton.Point(index, point);
      for (double x : point) ASSERT_TRUE(x >= 0.0 && x < 1.0) << x << " at index " << index;
    }
    for (std::uint64_t index = 0; index < 2000; ++index) {
      halton.Point(index, point);
      for (double x : point) ASSERT_TRUE(x >= 0.0 && x < 1.0) << x << " at index " << index;
    }
  }
  using halton_detail::FixedPointToUnit;
  EXPECT_EQ(FixedPointToUnit(0), 0.0);
  EXPECT_EQ(FixedPointToUnit(std::uint64_t{1} << 63), 0.5);
  EXPECT_EQ(FixedPointToUnit(std::numeric_limits<std::uint64_t>::max()), std::nextafter(1.0, 0.0));
}

// Scrambling permutes the digits of EVERY position, including the zeros above an index's length, so index 0 is not
// the origin; and the first b^k points all share the digits above position k, so each sits at the same relative
// offset inside its elementary interval of width b^-k.
TEST(HaltonTest, ScramblingAppliesToLeadingZeroDigits) {
  const ScrambledHalton halton(4, 11);
  for (std::size_t d = 0; d < 4; ++d) {
    EXPECT_GT(halton.Coordinate(0, d), 0.0) << "dim " << d;
    const std::uint64_t base = halton.Base(d);
    const int k = base == 2 ? 6 : 3;
    const double cells = static_cast<double>(Power(base, k));
    const double offset0 = halton.Coordinate(0, d) * cells - std::floor(halton.Coordinate(0, d) * cells);
    EXPECT_GT(offset0, 1e-6);
    for (std::uint64_t i = 1; i < Power(base, k); ++i) {
      const double scaled = halton.Coordinate(i, d) * cells;
      EXPECT_NEAR(scaled - std::floor(scaled), offset0, 1e-9) << "dim " << d << " index " << i;
    }
  }
}

// Unshifted, the first b^k points of a dimension with base b put exactly one point in each [j b^-k, (j+1) b^-k).
TEST(HaltonTest, UnshiftedProjectionsAreStratified) {
  for (std::uint64_t seed : {0u, 1u, 2u}) {
    const ScrambledHalton halton(5, seed);
    for (std::size_t d = 0; d < 5; ++d) {
      const std::uint64_t base = halton.Base(d);
      for (int k = 1; Power(base, k) <= 4096; ++k) {
        const std::uint64_t cells = Power(base, k);
        std::vector<int> hits(cells, 0);
        for (std::uint64_t i = 0; i < cells; ++i) {
          ++hits[static_cast<std::size_t>(halton.Coordinate(i, d) * static_cast<double>(cells))];
        }
        EXPECT_EQ(std::count(hits.begin(), hits.end(), 1), static_cast<std::ptrdiff_t>(cells))
            << "seed " << seed << " base " << base << " k " << k;
      }
    }
  }
}

// With the shift, the stratified set is rotated modulo 1: any two circularly consecutive points of the first b^k are
// less than 2 b^-k apart (a uniform random set of 256 points has gaps of ~ln(256)/256 = 5.5/256).
TEST(HaltonTest, ShiftedProjectionsHaveNoLargeGaps) {
  for (std::uint64_t seed : {0u, 1u, 2u}) {
    const ScrambledHalton halton(5, seed, kShifted);
    for (std::size_t d = 0; d < 5; ++d) {
      const std::uint64_t base = halton.Base(d);
      for (int k = 1; Power(base, k) <= 4096; ++k) {
        const std::uint64_t n = Power(base, k);
        std::vector<double> values;
        for (std::uint64_t i = 0; i < n; ++i) values.push_back(halton.Coordinate(i, d));
        std::sort(values.begin(), values.end());
        double largest_gap = values.front() + 1.0 - values.back();
        for (std::size_t i = 1; i < values.size(); ++i) largest_gap = std::max(largest_gap, values[i] - values[i - 1]);
        EXPECT_LT(largest_gap, 2.0 / static_cast<double>(n)) << "seed " << seed << " base " << base << " k " << k;
      }
    }
  }
}

TEST(HaltonTest, ShiftIsAddedModuloOne) {
  // The shifted and unshifted sequences of one seed differ by the same amount modulo 1 at every index.
  const ScrambledHalton shifted(3, 99, kShifted);
  const ScrambledHalton unshifted(3, 99);
  for (std::size_t d = 0; d < 3; ++d) {
    const double shift = std::fmod(shifted.Coordinate(0, d) - unshifted.Coordinate(0, d) + 1.0, 1.0);
    EXPECT_GT(shift, 0.0);
    for (std::uint64_t i = 1; i < 100; ++i) {
      const double delta = std::fmod(shifted.Coordinate(i, d) - unshifted.Coordinate(i, d) + 1.0, 1.0);
      EXPECT_NEAR(std::min(std::abs(delta - shift), 1.0 - std::abs(delta - shift)), 0.0, 1e-12);
    }
  }
}

// The quality bar: scipy's scrambled Halton has CD 0.000176 +- 0.000018 for 256 points in 4 dims over seeds, the
// default-primes algoperf code 0.00406, uniform random 0.0039 (reference discrepancy table). Measured: 0.000174
// (default), 0.000297 (with the shift) over 100 seeds.
double MeanCenteredDiscrepancy(const HaltonOptions& options) {
  double sum = 0.0;
  for (std::uint64_t seed = 0; seed < 10; ++seed) {
    const ScrambledHalton halton(4, seed, options);
    sum += CenteredL2Discrepancy(Points(halton, 0, 256), 4);
  }
  return sum / 10.0;
}

TEST(HaltonTest, CenteredDiscrepancyMatchesScrambledHaltonQuality) {
  const double mean = MeanCenteredDiscrepancy({});
  RecordProperty("mean_cd", std::to_string(mean));
  EXPECT_LE(mean, 0.00025);
}

TEST(HaltonTest, ShiftedVariantStillFarBelowRandom) {
  const double mean = MeanCenteredDiscrepancy(kShifted);
  RecordProperty("mean_cd_shifted", std::to_string(mean));
  EXPECT_LE(mean, 0.0004);
  EXPECT_GT(mean, MeanCenteredDiscrepancy({}));  // why the shift is off by default
}

}  // namespace
}  // namespace dltune
