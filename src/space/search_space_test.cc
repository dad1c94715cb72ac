#include "dltune/space/search_space.h"
#include "space/parse_space.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using ::testing::HasSubstr;

SearchSpace Parse(const std::string& yaml) {
  const YamlNode root = YamlNode::Parse(yaml, "study.yaml");
  return ParseSearchSpace(*root.Find("space"));
}

std::string ParseError(const std::string& yaml) {
  try {
    Parse(yaml);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(SearchSpaceParse, KindsAndDefaultRoles) {
  const SearchSpace space = Parse(R"(
space:
  lr: {min: 1.0e-4, max: 0.1, scale: log}
  layers: {min: 1, max: 4, type: int}
  width: {values: [128, 256, 512]}
  act: {values: [relu, tanh]}
  use_bn: [true, false]
  batch_size: 128
  optimizer: {values: [sgd, adam], role: scientific}
)");
  ASSERT_EQ(space.params().size(), 7u);
  const Param& lr = *space.Find("lr");
  EXPECT_EQ(lr.kind, ParamKind::kFloat);
  EXPECT_EQ(lr.scale, Scale::kLog);
  EXPECT_EQ(lr.role, Role::kNuisance);
  EXPECT_EQ(space.Find("layers")->kind, ParamKind::kInt);
  EXPECT_EQ(space.Find("width")->kind, ParamKind::kDiscrete);
  EXPECT_EQ(space.Find("width")->role, Role::kNuisance);
  EXPECT_EQ(space.Find("act")->kind, ParamKind::kCategorical);
  EXPECT_EQ(space.Find("use_bn")->kind, ParamKind::kCategorical);
  EXPECT_EQ(space.Find("use_bn")->values.front(), Value(true));
  EXPECT_EQ(space.Find("batch_size")->kind, ParamKind::kFixed);
  EXPECT_EQ(space.Find("batch_size")->role, Role::kFixed);
  EXPECT_EQ(space.Find("batch_size")->values.front(), Value(std::int64_t{128}));
  EXPECT_EQ(space.Find("optimizer")->role, Role::kScientific);
}

TEST(SearchSpaceParse, ErrorsNameFileLineColumnAndKey) {
  // The example of the spec: a log range must start above zero.
  EXPECT_EQ(ParseError("space:\n  learning_rate:\n    min: 0\n    max: 1\n    scale: log\n"),
            "study.yaml:3:10: space.learning_rate.min must be > 0 for scale: log");
  EXPECT_THAT(ParseError("space:\n  lr: {min: 1, max: 0.5}\n"),
              HasSubstr("study.yaml:2:21: space.lr.max must be greater than min"));
  EXPECT_THAT(ParseError("space:\n  lr: {min: a, max: 1}\n"), HasSubstr("space.lr.min must be a number"));
}

TEST(SearchSpaceParse, UnknownKeysSuggestTheClosestKnownOne) {
  const std::string message = ParseError("space:\n  lr:\n    min: 0.1\n    max: 1\n    scal: log\n");
  EXPECT_THAT(message, HasSubstr("study.yaml:5:5: space.lr.scal is not a known key"));
  EXPECT_THAT(message, HasSubstr("did you mean 'scale'?"));
  EXPECT_THAT(ParseError("space:\n  lr: {min: 0.1, max: 1, scale: logg}\n"), HasSubstr("did you mean 'log'?"));
  EXPECT_THAT(ParseError("space:\n  o: {values: [a, b], role: sientific}\n"), HasSubstr("did you mean 'scientific'?"));
}

TEST(SearchSpaceParse, RefusesInconsistentDefinitions) {
  EXPECT_THAT(ParseError("space:\n  a: {min: 0, max: 1, values: [1, 2]}\n"), HasSubstr("needs exactly one of"));
  EXPECT_THAT(ParseError("space:\n  a: {min: 0}\n"), HasSubstr("needs max: together with min:"));
  EXPECT_THAT(ParseError("space:\n  a: {values: [1, x]}\n"), HasSubstr("mixes numbers with text"));
  EXPECT_THAT(ParseError("space:\n  a: {values: [1, 2, 1]}\n"), HasSubstr("repeats the value 1"));
  EXPECT_THAT(ParseError("space:\n  a: {values: []}\n"), HasSubstr("at least one value"));
  EXPECT_THAT(ParseError("space:\n  a: {min: 0, max: 1, role: fixed}\n"), HasSubstr("a fixed param has one value"));
  EXPECT_THAT(ParseError("space:\n  a: {value: 3, role: nuisance}\n"), HasSubstr("a single value cannot vary"));
  EXPECT_THAT(ParseError("space:\n  a: {values: [1, 2], scale: log}\n"), HasSubstr("applies only to a range"));
  EXPECT_THAT(ParseError("space:\n  a: {min: 0.5, max: 3.5, type: int}\n"), HasSubstr("must be a whole number"));
  EXPECT_THAT(ParseError("space:\n  a: {min: 0, max: 9, type: int, scale: log}\n"), HasSubstr("must be > 0"));
  EXPECT_THAT(ParseError("space:\n  a: {min: .nan, max: 1}\n"), HasSubstr("finite"));
  // A range wider than a double holds would sample only its end.
  EXPECT_THAT(ParseError("space:\n  a: {min: -1e308, max: 1e308}\n"), HasSubstr("wider than a double holds"));
  EXPECT_THAT(ParseError("space:\n  a b: 1\n"), HasSubstr("not a valid param id"));
  EXPECT_THAT(ParseError("space: {}\n"), HasSubstr("at least one param"));
  EXPECT_THAT(ParseError("space:\n  a: 1\n  a: 2\n"), HasSubstr("space.a is given twice"));
}

TEST(SearchSpaceParse, ConditionalParamsMayShareADisplayName) {
  const SearchSpace space = Parse(R"(
space:
  optimizer: {values: [sgd, adam], role: scientific}
  sgd_lr: {name: learning_rate, when: {optimizer: sgd}, min: 0.01, max: 1, scale: log}
  adam_lr: {name: learning_rate, when: {optimizer: adam}, min: 1.0e-5, max: 0.01, scale: log}
)");
  const Param& sgd = *space.Find("sgd_lr");
  const Param& adam = *space.Find("adam_lr");
  EXPECT_EQ(sgd.name, "learning_rate");
  EXPECT_EQ(adam.name, "learning_rate");
  EXPECT_NE(sgd.min, adam.min);  // distinct params with their own ranges
  EXPECT_TRUE(SearchSpace::ConditionsHold(sgd, {{"optimizer", Value(std::string("sgd"))}}));
  EXPECT_FALSE(SearchSpace::ConditionsHold(adam, {{"optimizer", Value(std::string("sgd"))}}));
  EXPECT_FALSE(SearchSpace::ConditionsHold(adam, {}));
}

TEST(SearchSpaceParse, SharedNamesMustNeverMeetInOneTrial) {
  EXPECT_THAT(ParseError(R"(
space:
  optimizer: {values: [sgd, adam, nadam]}
  lr_a: {name: learning_rate, when: {optimizer: [sgd, adam]}, min: 0.01, max: 1}
  lr_b: {name: learning_rate, when: {optimizer: adam}, min: 0.01, max: 1}
)"),
              HasSubstr("shares the name 'learning_rate' with lr_a"));
  EXPECT_THAT(
      ParseError("space:\n  learning_rate: {min: 0.1, max: 1}\n  lr2: {name: learning_rate, min: 0.1, max: 1}\n"),
      HasSubstr("shares the name"));
}

TEST(SearchSpaceParse, ConditionsMustNameChoicesTheyCanTake) {
  EXPECT_THAT(ParseError("space:\n  a: {min: 0, max: 1, when: {optimzer: adam}}\n  optimizer: [adam, sgd]\n"),
              HasSubstr("names no param of the space (did you mean 'optimizer'?)"));
  EXPECT_THAT(ParseError("space:\n  a: {min: 0, max: 1, when: {optimizer: adamw}}\n  optimizer: [adam, sgd]\n"),
              HasSubstr("'adamw' is not a value of optimizer"));
  EXPECT_THAT(ParseError("space:\n  a: {min: 0, max: 1, when: {b: 1}}\n  b: {min: 0, max: 2}\n"),
              HasSubstr("needs a param with a list of values"));
  EXPECT_THAT(ParseError("space:\n  a: {values: [1, 2], when: {b: 1}}\n  b: {values: [1, 2], when: {a: 1}}\n"),
              HasSubstr("cycle"));
  EXPECT_THAT(ParseError("space:\n  o: [x, y]\n  s: {values: [1, 2], role: scientific, when: {o: x}}\n"),
              HasSubstr("scientific and conditional"));
}

TEST(SearchSpaceParse, DependencyOrderPutsConditionsFirst) {
  const SearchSpace space = Parse(R"(
space:
  beta1: {min: 0.8, max: 0.99, when: {optimizer: adam}}
  optimizer: [sgd, adam]
)");
  const auto& order = space.DependencyOrder();
  ASSERT_EQ(order.size(), 2u);
  EXPECT_EQ(space.params()[order[0]].id, "optimizer");
  EXPECT_EQ(space.params()[order[1]].id, "beta1");
}

}  // namespace
}  // namespace dltune
