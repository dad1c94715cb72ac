#include "gp_encoding.h"
#include "space/parse_space.h"

#include <cmath>

#include <gtest/gtest.h>

namespace dltune::internal {
namespace {

SearchSpace Parse(const std::string& yaml) {
  return ParseSearchSpace(*YamlNode::Parse(yaml, "study.yaml").Find("space"));
}

const char* kSpace = R"(
space:
  lr: {min: 1.0e-4, max: 1, scale: log}
  layers: {min: 1, max: 4, type: int}
  width: {values: [64, 128, 256]}
  optimizer: {values: [sgd, adam, lamb]}
  beta1: {min: 0.8, max: 0.99, when: {optimizer: [adam, lamb]}}
)";

TEST(GpEncoding, PlacesEachKindOfParam) {
  const SearchSpace space = Parse(kSpace);
  const GpEncoding encoding(space, {0, 1, 2, 3, 4});
  EXPECT_EQ(encoding.groups(), 5);
  // lr, layers, width, three one-hot features for optimizer, beta1.
  ASSERT_EQ(encoding.features(), 7);
  EXPECT_EQ(encoding.feature_groups(), (std::vector<int>{0, 1, 2, 3, 3, 3, 4}));
  EXPECT_EQ(encoding.FirstFeature(4), 6);

  const auto x = encoding.Encode({{"lr", Value(0.01)},
                                  {"layers", Value(std::int64_t{3})},
                                  {"width", Value(std::int64_t{256})},
                                  {"optimizer", Value("adam")},
                                  {"beta1", Value(0.9)}});
  ASSERT_TRUE(x);
  EXPECT_NEAR((*x)(0), 0.5, 1e-12);      // log scale: 1e-2 is halfway between 1e-4 and 1
  EXPECT_NEAR((*x)(1), 2.5 / 4, 1e-12);  // the middle of the third of four integer shares
  EXPECT_NEAR((*x)(2), 2.5 / 3, 1e-12);  // the last of three list values
  EXPECT_EQ((*x)(3), 0.0);               // one-hot, scaled so two values are at distance 1
  EXPECT_NEAR((*x)(4), std::sqrt(0.5), 1e-15);
  EXPECT_EQ((*x)(5), 0.0);
  EXPECT_NEAR((*x)(6), 0.1 / 0.19, 1e-12);

  // A conditional param that does not exist sits at a fixed place.
  const auto sgd = encoding.Encode({{"lr", Value(0.01)},
                                    {"layers", Value(std::int64_t{3})},
                                    {"width", Value(std::int64_t{256})},
                                    {"optimizer", Value("sgd")}});
  ASSERT_TRUE(sgd);
  EXPECT_EQ((*sgd)(6), 0.5);
}

TEST(GpEncoding, ReadsTrialsOfOtherSpacesCarefully) {
  const SearchSpace space = Parse(kSpace);
  const GpEncoding encoding(space, {0, 1, 2, 3, 4});
  const Assignment base = {{"lr", Value(0.01)},
                           {"layers", Value(std::int64_t{3})},
                           {"width", Value(std::int64_t{128})},
                           {"optimizer", Value("sgd")},
                           {"warmup", Value(0.1)}};
  // Unknown params are ignored.
  EXPECT_TRUE(encoding.Encode(base));
  const auto with = [&](const std::string& id, Value value) {
    Assignment params = base;
    params[id] = std::move(value);
    return encoding.Encode(params);
  };
  // A range value a little outside keeps its place outside [0, 1]; far outside, or not a number: no place.
  ASSERT_TRUE(with("lr", Value(1e-5)));
  EXPECT_NEAR((*with("lr", Value(1e-5)))(0), -0.25, 1e-12);
  EXPECT_FALSE(with("lr", Value(1e-9)));
  EXPECT_FALSE(with("lr", Value(-1.0)));
  EXPECT_FALSE(with("lr", Value("fast")));
  // Integers are rounded to their grid.
  EXPECT_EQ(*with("layers", Value(2.6)), *with("layers", Value(std::int64_t{3})));
  // A list value the space does not have: no place.
  EXPECT_FALSE(with("width", Value(std::int64_t{96})));
  EXPECT_FALSE(with("optimizer", Value("rmsprop")));
  // A param that exists in the trial but is missing: no place.
  Assignment missing = base;
  missing.erase("layers");
  EXPECT_FALSE(encoding.Encode(missing));
}

}  // namespace
}  // namespace dltune::internal
