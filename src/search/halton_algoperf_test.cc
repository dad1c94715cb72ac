#include "halton_algoperf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "core/discrepancy.h"
#include "dltune/core/error.h"

// Expected values are a reference file of test vectors (halton_algoperf.txt, not part of this repository): outputs of
// mlcommons/algorithmic-efficiency algoperf/halton.py under numpy 1.24.2, Python 3.11.2, written with 17 significant
// digits (so EXPECT_EQ on the doubles is a bit-exact comparison).

namespace dltune {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;

using Rows = std::vector<std::vector<double>>;

void ExpectRowsEq(const Rows& actual, const Rows& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(actual[i].size(), expected[i].size()) << "row " << i;
    for (std::size_t k = 0; k < expected[i].size(); ++k) {
      EXPECT_EQ(actual[i][k], expected[i][k]) << "row " << i << " column " << k;
    }
  }
}

std::vector<double> Flatten(const Rows& rows) {
  std::vector<double> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return flat;
}

TEST(AlgoperfTest, NumpyRandomStateRawOutputs) {
  NumpyRandomState rng983(983);
  std::vector<std::uint32_t> raw;
  for (int i = 0; i < 5; ++i) raw.push_back(rng983.NextUint32());
  EXPECT_THAT(raw, ElementsAre(485351361u, 1666790674u, 2559461114u, 656927005u, 3713129790u));
  NumpyRandomState rng0(0);
  raw.clear();
  for (int i = 0; i < 5; ++i) raw.push_back(rng0.NextUint32());
  EXPECT_THAT(raw, ElementsAre(2357136044u, 2546248239u, 3071714933u, 3626093760u, 2588848963u));
}

TEST(AlgoperfTest, NumpyRandomStateShuffle) {
  // np.random.seed(0); np.random.shuffle(list(range(8))) -> [6, 2, 1, 7, 3, 0, 5, 4]
  std::vector<int> items = {0, 1, 2, 3, 4, 5, 6, 7};
  NumpyRandomState rng(0);
  rng.Shuffle(std::span<int>(items));
  EXPECT_THAT(items, ElementsAre(6, 2, 1, 7, 3, 0, 5, 4));
}

TEST(AlgoperfTest, NumpyRandomStateRandomIntervalStaysInRange) {
  NumpyRandomState rng(7);
  EXPECT_EQ(rng.RandomInterval(0), 0u);
  for (std::uint64_t max : {1ull, 2ull, 5ull, 1000ull, 0xffffffffull, 0x1ffffffffull}) {
    for (int i = 0; i < 200; ++i) EXPECT_LE(rng.RandomInterval(max), max);
  }
}

TEST(AlgoperfTest, DefaultPrimes) {
  EXPECT_THAT(AlgoperfDefaultPrimes(1), ElementsAre(991));
  EXPECT_THAT(AlgoperfDefaultPrimes(2), ElementsAre(983, 991));
  EXPECT_THAT(AlgoperfDefaultPrimes(3), ElementsAre(977, 983, 991));
  EXPECT_THAT(AlgoperfDefaultPrimes(4), ElementsAre(971, 977, 983, 991));
  EXPECT_THAT(AlgoperfDefaultPrimes(7), ElementsAre(947, 953, 967, 971, 977, 983, 991));
  EXPECT_THROW(AlgoperfDefaultPrimes(0), Error);
}

TEST(AlgoperfTest, DefaultPrimesBeyondTheFirstThousand) {
  // 167 odd primes lie below 1000, so 167 dims need generate_primes(2000), whose primes[-168:-1] start at the
  // 167th odd prime below 2000 counted from the end; check the slice against a direct computation.
  const std::vector<int> below2000 = AlgoperfGeneratePrimes(2000);
  const std::vector<int> expected(below2000.end() - 168, below2000.end() - 1);
  EXPECT_EQ(AlgoperfDefaultPrimes(167), expected);
  EXPECT_EQ(AlgoperfDefaultPrimes(166).back(), 991);  // still fits below 1000
}

TEST(AlgoperfTest, GeneratePrimes) {
  const std::vector<int> primes = AlgoperfGeneratePrimes(1000);
  ASSERT_EQ(primes.size(), 167u);
  EXPECT_THAT(std::vector<int>(primes.begin(), primes.begin() + 5), ElementsAre(3, 5, 7, 11, 13));
  EXPECT_THAT(std::vector<int>(primes.end() - 5, primes.end()), ElementsAre(971, 977, 983, 991, 997));
  EXPECT_THAT(AlgoperfGeneratePrimes(7), ElementsAre(3, 5));  // below n, 2 excluded
  EXPECT_THAT(AlgoperfGeneratePrimes(8), ElementsAre(3, 5, 7));
  EXPECT_TRUE(AlgoperfGeneratePrimes(3).empty());
  EXPECT_TRUE(AlgoperfGeneratePrimes(-5).empty());
}

TEST(AlgoperfTest, IsPrimeQuirks) {
  EXPECT_FALSE(AlgoperfIsPrime(2));
  EXPECT_TRUE(AlgoperfIsPrime(1));
  EXPECT_TRUE(AlgoperfIsPrime(0));
  EXPECT_FALSE(AlgoperfIsPrime(9));
  EXPECT_TRUE(AlgoperfIsPrime(3));
  EXPECT_TRUE(AlgoperfIsPrime(991));
  EXPECT_FALSE(AlgoperfIsPrime(989));  // 23 * 43
  EXPECT_FALSE(AlgoperfIsPrime(25));
  EXPECT_FALSE(AlgoperfIsPrime(-3));
}

TEST(AlgoperfTest, PerDimensionPermutationAndShift) {
  struct Expected {
    int base;
    std::vector<int> first12;
    double shift;
  };
  const std::vector<Expected> cases = {
      {3, {0, 2, 1}, 0.070724880010990865},
      {5, {0, 1, 2, 3, 4}, 0.83132783477544148},
      {7, {0, 4, 6, 1, 3, 2, 5}, 0.53849587041043367},
      {977, {0, 175, 492, 617, 216, 189, 292, 882, 414, 605, 670, 742}, 0.33571311160988371},
      {983, {0, 487, 96, 821, 711, 86, 425, 388, 549, 307, 925, 756}, 0.490658058831969},
      {991, {0, 219, 782, 672, 547, 29, 857, 746, 305, 545, 637, 930}, 0.68672972632519114},
  };
  for (const Expected& c : cases) {
    const AlgoperfScramble scramble = AlgoperfMakeScramble(c.base);
    ASSERT_EQ(scramble.digits.size(), static_cast<std::size_t>(c.base));
    const std::size_t n = std::min<std::size_t>(12, scramble.digits.size());
    EXPECT_EQ(std::vector<int>(scramble.digits.begin(), scramble.digits.begin() + static_cast<std::ptrdiff_t>(n)),
              c.first12)
        << "base " << c.base;
    EXPECT_EQ(scramble.shift, c.shift) << "base " << c.base;
  }
  const std::vector<int> digits983 = AlgoperfMakeScramble(983).digits;
  EXPECT_THAT(std::vector<int>(digits983.begin() + 101, digits983.begin() + 109),
              ElementsAre(770, 492, 727, 870, 968, 799, 619, 7));
}

TEST(AlgoperfTest, GenerateDimWithIdentityDigits) {
  auto identity = [](int base) {
    std::vector<int> digits(static_cast<std::size_t>(base));
    for (int i = 0; i < base; ++i) digits[static_cast<std::size_t>(i)] = i;
    return digits;
  };
  EXPECT_THAT(AlgoperfGenerateDim(9, 3, false, identity(3)),
              ElementsAre(0.33333333333333331, 0.66666666666666663, 0.1111111111111111, 0.44444444444444442,
                          0.77777777777777768, 0.22222222222222221, 0.55555555555555558, 0.88888888888888884,
                          0.037037037037037035));
  EXPECT_THAT(AlgoperfGenerateDim(9, 5, false, identity(5)),
              ElementsAre(0.20000000000000001, 0.40000000000000002, 0.59999999999999998, 0.80000000000000004,
                          0.040000000000000001, 0.24000000000000002, 0.44, 0.64000000000000001, 0.84000000000000008));
  EXPECT_THROW(AlgoperfGenerateDim(9, 5, false, identity(3)), Error);
  EXPECT_THROW(AlgoperfGenerateDim(9, 3, false, std::vector<int>{0, 1, 3}), Error);
}

TEST(AlgoperfTest, GenerateSequenceUnshuffledDefaultPrimes) {
  AlgoperfOptions options;
  options.shuffle_sequence = false;
  // generate_sequence(8, 3, shuffle_sequence=False): skip=100, primes 977, 983, 991, indices 101..108.
  ExpectRowsEq(AlgoperfGenerateSequence(8, 3, options),
               {{0.13714606964468423, 0.27397443726533632, 0.28612427728381884},
                {0.80654218018716106, 0.99116670583095168, 0.8300193327833143},
                {0.25690041969586108, 0.23023079535282354, 0.36079632571974196},
                {0.17501710342155219, 0.37570383706187749, 0.47482256184486826},
                {0.16989939615440774, 0.47539864886248795, 0.87441892915062003},
                {0.82598946780230942, 0.30347596320633308, 0.77250167385294088},
                {0.61923409420967901, 0.12036304357255911, 0.9228548524604081},
                {0.3725606039333228, 0.49777911681772691, 0.21851580099723966}});
}

TEST(AlgoperfTest, GenerateSequenceSmallPrimesNoSkip) {
  AlgoperfOptions options;
  options.skip = 0;
  options.shuffle_sequence = false;
  options.primes = std::vector<int>{3, 5, 7};
  ExpectRowsEq(AlgoperfGenerateSequence(8, 3, options),
               {{0.73739154667765749, 0.031327834775441543, 0.10992444183900507},
                {0.40405821334432418, 0.2313278347754415, 0.39563872755329088},
                {0.29294710223321307, 0.43132783477544145, 0.68135301326757647},
                {0.9596137688998797, 0.63132783477544141, 0.96706729898186228},
                {0.62628043556654645, 0.87132783477544151, 0.82421015612471937},
                {0.18183599112210197, 0.071327834775441579, 0.25278158469614809},
                {0.84850265778876854, 0.27132783477544153, 0.62012852347165814},
                {0.51516932445543528, 0.47132783477544149, 0.19155709490022943}});
}

const Rows kShuffledSeed0 = {{0.61923409420967901, 0.12036304357255911, 0.9228548524604081},
                             {0.25690041969586108, 0.23023079535282354, 0.36079632571974196},
                             {0.80654218018716106, 0.99116670583095168, 0.8300193327833143},
                             {0.3725606039333228, 0.49777911681772691, 0.21851580099723966},
                             {0.17501710342155219, 0.37570383706187749, 0.47482256184486826},
                             {0.13714606964468423, 0.27397443726533632, 0.28612427728381884},
                             {0.82598946780230942, 0.30347596320633308, 0.77250167385294088},
                             {0.16989939615440774, 0.47539864886248795, 0.87441892915062003}};

TEST(AlgoperfTest, GenerateSequenceShuffledWithGlobalSeed) {
  // np.random.seed(0); generate_sequence(8, 3)
  ExpectRowsEq(AlgoperfGenerateSequence(8, 3), kShuffledSeed0);
  // np.random.seed(1) gives the same set of points in another order.
  AlgoperfOptions seed1;
  seed1.shuffle_seed = 1;
  Rows other = AlgoperfGenerateSequence(8, 3, seed1);
  EXPECT_NE(other, kShuffledSeed0);
  Rows sorted_expected = kShuffledSeed0;
  std::sort(other.begin(), other.end());
  std::sort(sorted_expected.begin(), sorted_expected.end());
  EXPECT_EQ(other, sorted_expected);
}

TEST(AlgoperfTest, GenerateSearchReproducesReference) {
  // search_space = {learning_rate: log [1e-4, 0.1], dropout: linear [0, 0.5], optimizer: [adam, sgd, nadamw]};
  // np.random.seed(0); generate_search(search_space, 8)
  const std::vector<std::string> optimizers = {"adam", "sgd", "nadamw"};
  struct Trial {
    double learning_rate;
    double dropout;
    std::string optimizer;
  };
  const std::vector<Trial> expected = {
      {0.0072061331528528172, 0.060181521786279557, "nadamw"}, {0.00058979523439616518, 0.11511539767641177, "sgd"},
      {0.026280071384439094, 0.49558335291547584, "nadamw"},   {0.0013112388607671496, 0.24888955840886345, "adam"},
      {0.00033500501640642226, 0.18785191853093874, "sgd"},    {0.00025789220113952454, 0.13698721863266816, "adam"},
      {0.030058576069768379, 0.15173798160316654, "nadamw"},   {0.00032336885469272722, 0.23769932443124397, "nadamw"},
  };
  const Rows points = AlgoperfGenerateSequence(8, 3);
  ASSERT_EQ(points.size(), expected.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    EXPECT_EQ(AlgoperfScaleLog(points[i][0], 0.0001, 0.1), expected[i].learning_rate) << "trial " << i;
    EXPECT_EQ(AlgoperfScaleLinear(points[i][1], 0.0, 0.5), expected[i].dropout) << "trial " << i;
    EXPECT_EQ(optimizers[AlgoperfScaleDiscrete(points[i][2], optimizers.size())], expected[i].optimizer)
        << "trial " << i;
  }
}

TEST(AlgoperfTest, ScaleHelpers) {
  EXPECT_EQ(AlgoperfScaleLinear(0.0, 2.0, 6.0), 2.0);
  EXPECT_EQ(AlgoperfScaleLinear(0.5, 2.0, 6.0), 4.0);
  EXPECT_EQ(AlgoperfScaleLog(0.0, 1e-4, 0.1), 1e-4);
  EXPECT_NEAR(AlgoperfScaleLog(0.5, 1e-4, 1e-2), 1e-3, 1e-18);
  EXPECT_EQ(AlgoperfScaleDiscrete(0.0, 3), 0u);
  EXPECT_EQ(AlgoperfScaleDiscrete(0.34, 3), 1u);
  EXPECT_EQ(AlgoperfScaleDiscrete(0.99, 3), 2u);
  EXPECT_THROW(AlgoperfScaleDiscrete(0.5, 0), Error);
  // x * count never rounds up to count for x < 1.
  EXPECT_EQ(AlgoperfScaleDiscrete(0x1.fffffffffffffp-1, 3), 2u);
  EXPECT_EQ(AlgoperfScaleDiscrete(0x1.fffffffffffffp-1, 1000), 999u);
  EXPECT_THROW(AlgoperfScaleDiscrete(-0.1, 3), Error);
}

TEST(AlgoperfTest, TrueDivideMatchesPython) {
  using algoperf_detail::TrueDivide;
  using algoperf_detail::Uint128;
  auto pow = [](std::uint64_t base, int exponent) {
    Uint128 result = 1;
    for (int i = 0; i < exponent; ++i) result *= base;
    return result;
  };
  // Values printed by Python 3.11: float(5 / 3**40), float(2 / (2**60 + 1)), float(7 / 3**35).
  EXPECT_EQ(TrueDivide(5, pow(3, 40)), 4.1126316699849793e-19);
  EXPECT_EQ(TrueDivide(2, pow(2, 60) + 1), 1.734723475976807e-18);
  EXPECT_EQ(TrueDivide(7, pow(3, 35)), 1.3991172941288901e-16);
  // Ties round to even: (2**53 + 1) / 2**54 == 0.5 and (2**53 + 3) / 2**54 == 0.5000000000000002.
  EXPECT_EQ(TrueDivide((1ull << 53) + 1, pow(2, 54)), 0.5);
  EXPECT_EQ(TrueDivide((1ull << 53) + 3, pow(2, 54)), 0.5000000000000002);
  EXPECT_EQ(TrueDivide((1ull << 53) + 1, 1), 9007199254740992.0);  // numerator above 2^53, quotient > 1
  EXPECT_EQ(TrueDivide(0, pow(7, 30)), 0.0);
  EXPECT_EQ(TrueDivide(1, 3), 1.0 / 3.0);
}

TEST(AlgoperfTest, RejectsBadInput) {
  EXPECT_THROW(AlgoperfGenerateSequence(8, 0), Error);
  AlgoperfOptions wrong_length;
  wrong_length.primes = std::vector<int>{3, 5};
  EXPECT_THROW(AlgoperfGenerateSequence(8, 3, wrong_length), Error);
  for (int base : {2, 4, 9, -3, 0, 1}) {
    AlgoperfOptions bad;
    bad.primes = std::vector<int>{3, base};
    EXPECT_THROW(AlgoperfGenerateSequence(8, 2, bad), Error) << "base " << base;
    EXPECT_THROW(AlgoperfGenerateDim(8, base, true), Error) << "base " << base;
  }
}

// The discrepancy table of the reference (scipy 1.10.1, values rounded to 6 decimals), for the algoperf rows.
TEST(AlgoperfTest, DiscrepancyMatchesReferenceTable) {
  struct Row {
    std::size_t n;
    std::vector<int> primes;  // empty: the default primes
    bool shift;
    double cd;
    double l2_star;
  };
  const std::vector<Row> rows = {
      {256, {}, true, 0.004058, 0.010866},
      {256, {3, 5, 7, 11}, true, 0.000316, 0.006777},
      {256, {3, 5, 7, 11}, false, 0.000222, 0.005162},
      {32, {}, true, 0.035871, 0.030435},
      {32, {3, 5, 7, 11}, true, 0.009995, 0.032138},
      {32, {3, 5, 7, 11}, false, 0.006543, 0.024926},
  };
  for (const Row& row : rows) {
    AlgoperfOptions options;
    options.per_dim_shift = row.shift;
    if (!row.primes.empty()) options.primes = row.primes;
    const std::vector<double> points = Flatten(AlgoperfGenerateSequence(row.n, 4, options));
    EXPECT_NEAR(CenteredL2Discrepancy(points, 4), row.cd, 5e-7) << "n=" << row.n;
    EXPECT_NEAR(L2StarDiscrepancy(points, 4), row.l2_star, 5e-7) << "n=" << row.n;
  }
}

}  // namespace
}  // namespace dltune
