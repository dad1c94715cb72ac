#include "dltune/space/param.h"

#include <cmath>
#include <map>

#include <gtest/gtest.h>

namespace dltune {
namespace {

Param Range(double min, double max, Scale scale, ParamKind kind = ParamKind::kFloat) {
  Param param;
  param.id = param.name = "p";
  param.kind = kind;
  param.min = min;
  param.max = max;
  param.scale = scale;
  return param;
}

Param Choices(std::vector<Value> values) {
  Param param;
  param.id = param.name = "c";
  param.kind = ParamKind::kCategorical;
  param.values = std::move(values);
  return param;
}

TEST(ParamUnitTransform, LinearAndLogRanges) {
  const Param linear = Range(-1.0, 3.0, Scale::kLinear);
  EXPECT_DOUBLE_EQ(std::get<double>(linear.FromUnit(0.0)), -1.0);
  EXPECT_DOUBLE_EQ(std::get<double>(linear.FromUnit(0.5)), 1.0);
  const Param log = Range(1e-4, 1.0, Scale::kLog);
  EXPECT_DOUBLE_EQ(std::get<double>(log.FromUnit(0.0)), 1e-4);
  EXPECT_NEAR(std::get<double>(log.FromUnit(0.5)), 1e-2, 1e-15);
  EXPECT_NEAR(std::get<double>(log.FromUnit(0.75)), 1e-1, 1e-14);
  for (const double u : {0.0, 0.1, 0.37, 0.9, 0.999}) {
    EXPECT_NEAR(log.ToUnit(log.FromUnit(u)), u, 1e-12);
    EXPECT_NEAR(linear.ToUnit(linear.FromUnit(u)), u, 1e-12);
  }
}

// Every choice and every integer gets an equal share of the unit interval.
TEST(ParamUnitTransform, EqualShares) {
  const Param choice = Choices({Value("a"), Value("b"), Value("c")});
  const Param integer = Range(1, 4, Scale::kLinear, ParamKind::kInt);
  std::map<std::string, int> choice_counts;
  std::map<std::int64_t, int> integer_counts;
  const int n = 1200;
  for (int i = 0; i < n; ++i) {
    const double u = (i + 0.5) / n;
    ++choice_counts[std::get<std::string>(choice.FromUnit(u))];
    ++integer_counts[std::get<std::int64_t>(integer.FromUnit(u))];
  }
  EXPECT_EQ(choice_counts, (std::map<std::string, int>{{"a", 400}, {"b", 400}, {"c", 400}}));
  EXPECT_EQ(integer_counts, (std::map<std::int64_t, int>{{1, 300}, {2, 300}, {3, 300}, {4, 300}}));
  EXPECT_EQ(choice.FromUnit(0.9999999999999999), Value("c"));
  EXPECT_EQ(integer.FromUnit(0.9999999999999999), Value(std::int64_t{4}));
}

TEST(ParamUnitTransform, LogIntegersStayInRange) {
  const Param integer = Range(1, 1024, Scale::kLog, ParamKind::kInt);
  EXPECT_EQ(integer.FromUnit(0.0), Value(std::int64_t{1}));
  EXPECT_EQ(integer.FromUnit(0.9999999999999999), Value(std::int64_t{1024}));
  EXPECT_EQ(integer.FromUnit(0.5), Value(std::int64_t{32}));
}

TEST(ParamDomain, ContainsAndGrid) {
  const Param log = Range(1e-3, 1.0, Scale::kLog);
  EXPECT_TRUE(log.Contains(Value(0.01)));
  EXPECT_FALSE(log.Contains(Value(2.0)));
  EXPECT_FALSE(log.Contains(Value("x")));
  const auto grid = log.GridValues(4);
  ASSERT_EQ(grid.size(), 4u);
  EXPECT_DOUBLE_EQ(std::get<double>(grid[0]), 1e-3);
  EXPECT_NEAR(std::get<double>(grid[1]), 1e-2, 1e-15);
  EXPECT_DOUBLE_EQ(std::get<double>(grid[3]), 1.0);
  const Param small_int = Range(1, 3, Scale::kLinear, ParamKind::kInt);
  EXPECT_EQ(small_int.GridValues(10).size(), 3u);  // distinct integers only
  EXPECT_FALSE(small_int.Contains(Value(1.5)));
  EXPECT_EQ(log.DomainText(), "[0.001, 1] log");
  EXPECT_EQ(Choices({Value("a"), Value(true)}).DomainText(), "{a, true}");
}

}  // namespace
}  // namespace dltune
