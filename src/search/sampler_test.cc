#include "dltune/search/sampler.h"
#include "search/parse_sampler.h"
#include "space/parse_space.h"

#include <algorithm>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using ::testing::HasSubstr;

SearchSpace Parse(const std::string& yaml) {
  return ParseSearchSpace(*YamlNode::Parse(yaml, "study.yaml").Find("space"));
}

SamplerOptions Options(const std::string& yaml) {
  return ParseSamplerOptions(*YamlNode::Parse(yaml, "study.yaml").Find("sampler"));
}

const char* kSpace = R"(
space:
  optimizer: {values: [sgd, adam], role: scientific}
  lr: {min: 1.0e-4, max: 1, scale: log}
  dropout: {min: 0, max: 0.5}
  width: {values: [64, 128, 256]}
  beta1: {min: 0.8, max: 0.99, when: {optimizer: adam}}
  batch_size: 128
)";

TEST(Sampler, TrialsHoldEveryExistingParamAndNoOther) {
  const SearchSpace space = Parse(kSpace);
  const auto sgd = MakeSampler({}, {&space, {{"optimizer", Value("sgd")}}, false, 0, 8});
  const auto adam = MakeSampler({}, {&space, {{"optimizer", Value("adam")}}, false, 0, 8});
  const Assignment a = sgd->Suggest(3);
  EXPECT_EQ(a.count("beta1"), 0u);
  EXPECT_EQ(a.at("optimizer"), Value("sgd"));
  EXPECT_EQ(a.at("batch_size"), Value(std::int64_t{128}));
  EXPECT_EQ(a.size(), 5u);
  const Assignment b = adam->Suggest(3);
  EXPECT_EQ(b.size(), 6u);
  EXPECT_TRUE(space.Find("beta1")->Contains(b.at("beta1")));
  EXPECT_TRUE(space.Find("lr")->Contains(b.at("lr")));
  // Sub-studies share the seed: their common params get the same points.
  EXPECT_EQ(a.at("lr"), b.at("lr"));
  EXPECT_EQ(a.at("dropout"), b.at("dropout"));
}

TEST(Sampler, AddingAConditionalBranchDoesNotMoveOtherParams) {
  const SearchSpace before = Parse(R"(
space:
  optimizer: {values: [sgd, adam], role: scientific}
  lr: {min: 1.0e-4, max: 1, scale: log}
  momentum: {min: 0.5, max: 0.99, when: {optimizer: sgd}}
  dropout: {min: 0, max: 0.5}
)");
  const SearchSpace after = Parse(R"(
space:
  optimizer: {values: [sgd, adam], role: scientific}
  lr: {min: 1.0e-4, max: 1, scale: log}
  beta1: {min: 0.8, max: 0.99, when: {optimizer: adam}}
  momentum: {min: 0.5, max: 0.99, when: {optimizer: sgd}}
  beta2: {min: 0.9, max: 0.999, when: {optimizer: adam}}
  dropout: {min: 0, max: 0.5}
)");
  for (const std::string name : {"halton", "random"}) {
    SamplerOptions options;
    options.name = name;
    const Assignment sgd{{"optimizer", Value("sgd")}};
    const auto old_sampler = MakeSampler(options, {&before, sgd, false, 3, 32});
    const auto new_sampler = MakeSampler(options, {&after, sgd, false, 3, 32});
    for (std::uint64_t i = 0; i < 32; ++i) {
      const Assignment x = old_sampler->Suggest(i);
      const Assignment y = new_sampler->Suggest(i);
      EXPECT_EQ(x.at("lr"), y.at("lr")) << name;
      EXPECT_EQ(x.at("dropout"), y.at("dropout")) << name;
      EXPECT_EQ(y.count("beta1"), 0u);
    }
  }
}

TEST(Sampler, JointModeCoversScientificValuesEvenly) {
  const SearchSpace space = Parse(R"(
space:
  activation: {values: [relu, tanh, gelu], role: scientific}
  lr: {min: 1.0e-4, max: 1, scale: log}
)");
  for (const std::string name : {"halton", "random"}) {
    SamplerOptions options;
    options.name = name;
    const auto sampler = MakeSampler(options, {&space, {}, true, 11, 30});
    std::map<std::string, int> counts;
    for (std::uint64_t i = 0; i < 30; ++i) ++counts[std::get<std::string>(sampler->Suggest(i).at("activation"))];
    EXPECT_EQ(counts, (std::map<std::string, int>{{"gelu", 10}, {"relu", 10}, {"tanh", 10}})) << name;
  }
}

TEST(Sampler, ChoicesGetEqualSharesOfTheSearch) {
  const SearchSpace space = Parse("space:\n  width: {values: [64, 128, 256, 512]}\n");
  const auto sampler = MakeSampler({}, {&space, {}, false, 5, 256});
  std::map<std::int64_t, int> counts;
  for (std::uint64_t i = 0; i < 256; ++i) ++counts[std::get<std::int64_t>(sampler->Suggest(i).at("width"))];
  for (const auto& [width, count] : counts) EXPECT_NEAR(count, 64, 2) << width;
}

TEST(GridSampler, EnumeratesOneOrTwoDimensions) {
  const SearchSpace space = Parse(R"(
space:
  lr: {min: 0.001, max: 0.1, scale: log}
  width: [64, 128]
  batch_size: 32
)");
  const auto grid = MakeSampler(Options("sampler: {name: grid, points: 3}"), {&space, {}, false, 0, 0});
  ASSERT_EQ(grid->TrialCount(), 6u);
  EXPECT_NEAR(std::get<double>(grid->Suggest(0).at("lr")), 0.001, 1e-15);
  EXPECT_EQ(grid->Suggest(0).at("width"), Value(std::int64_t{64}));
  EXPECT_EQ(grid->Suggest(1).at("width"), Value(std::int64_t{128}));
  EXPECT_NEAR(std::get<double>(grid->Suggest(2).at("lr")), 0.01, 1e-15);
  EXPECT_NEAR(std::get<double>(grid->Suggest(5).at("lr")), 0.1, 1e-15);
  EXPECT_EQ(grid->Suggest(5).at("batch_size"), Value(std::int64_t{32}));
}

TEST(GridSampler, RefusesManyDimensionsAndHugeGrids) {
  const SearchSpace three = Parse("space:\n  a: {min: 0, max: 1}\n  b: {min: 0, max: 1}\n  c: {min: 0, max: 1}\n");
  try {
    MakeSampler(Options("sampler: grid"), {&three, {}, false, 0, 0});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("grid search only in 1-2 dimensions"));
  }
  const SearchSpace two = Parse("space:\n  a: {min: 0, max: 1}\n  b: {min: 0, max: 1}\n");
  EXPECT_THROW(MakeSampler(Options("sampler: {name: grid, points: 1000}"), {&two, {}, false, 0, 0}), SpecError);
}

TEST(ListSampler, RunsTheWrittenConfigsAndValidatesThem) {
  const SearchSpace space = Parse(kSpace);
  const auto options = Options(R"(
sampler:
  name: list
  configs:
    - {optimizer: sgd, lr: 0.1, dropout: 0.1, width: 64}
    - {optimizer: adam, lr: 0.001, dropout: 0.2, width: 128, beta1: 0.9}
    - {optimizer: adam, lr: 0.003, dropout: 0.0, width: 256, beta1: 0.95}
)");
  const auto adam = MakeSampler(options, {&space, {{"optimizer", Value("adam")}}, false, 0, 0});
  ASSERT_EQ(adam->TrialCount(), 2u);
  EXPECT_EQ(adam->Suggest(1).at("beta1"), Value(0.95));
  EXPECT_EQ(adam->Suggest(1).at("batch_size"), Value(std::int64_t{128}));
  const auto sgd = MakeSampler(options, {&space, {{"optimizer", Value("sgd")}}, false, 0, 0});
  EXPECT_EQ(sgd->TrialCount(), 1u);

  auto error = [&](const std::string& config) {
    try {
      MakeSampler(Options("sampler:\n  name: list\n  configs:\n    - " + config + "\n"), {&space, {}, true, 0, 0});
    } catch (const SpecError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_THAT(error("{optimizer: sgd, lr: 0.1, dropout: 0.1, width: 64, wdith: 3}"),
              HasSubstr("did you mean 'width'?"));
  EXPECT_THAT(error("{optimizer: sgd, lr: 5, dropout: 0.1, width: 64}"), HasSubstr("configs[0].lr = 5 is outside"));
  EXPECT_THAT(error("{optimizer: sgd, lr: 0.1, width: 64}"), HasSubstr("dropout is missing"));
  EXPECT_THAT(error("{optimizer: sgd, lr: 0.1, dropout: 0.1, width: 64, beta1: 0.9}"),
              HasSubstr("exists only when optimizer=adam"));
  EXPECT_THAT(error("{optimizer: sgd, lr: 0.1, dropout: 0.1, width: 64, batch_size: 3}"), HasSubstr("is fixed at 128"));
}

TEST(GridSampler, ConditionsOnFixedParamsAreKnownUpFront) {
  const SearchSpace space = Parse(R"(
space:
  optimizer: adam
  beta1: {min: 0.8, max: 0.99, when: {optimizer: adam}}
  momentum: {min: 0.5, max: 0.99, when: {schedule: cosine}}
  schedule: [cosine, linear]
)");
  try {
    MakeSampler(Options("sampler: grid"), {&space, {}, false, 0, 0});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("space.momentum depends on 'schedule', which the grid varies"));
  }
  const SearchSpace fixed_only = Parse(R"(
space:
  optimizer: adam
  beta1: {min: 0.8, max: 0.99, when: {optimizer: adam}}
)");
  const auto grid = MakeSampler(Options("sampler: {name: grid, points: 4}"), {&fixed_only, {}, false, 0, 0});
  EXPECT_EQ(grid->TrialCount(), 4u);
  EXPECT_EQ(grid->Suggest(3).at("beta1"), Value(0.99));
}

TEST(Sampler, HaltonShiftIsAnOption) {
  const SearchSpace space = Parse("space:\n  a: {min: 0, max: 1}\n  b: {min: 0, max: 1}\n");
  const auto plain = MakeSampler(Options("sampler: halton"), {&space, {}, false, 1, 8});
  const auto shifted = MakeSampler(Options("sampler: {name: halton, shift: true}"), {&space, {}, false, 1, 8});
  EXPECT_FALSE(Options("sampler: halton").halton_shift);
  EXPECT_NE(plain->Suggest(0), shifted->Suggest(0));
  EXPECT_THROW(Options("sampler: {name: random, shift: true}"), SpecError);
}

TEST(SamplerOptions, ParsesAndSuggests) {
  EXPECT_EQ(Options("sampler: random").name, "random");
  EXPECT_EQ(Options("sampler: {name: grid, points: 7}").grid_points, 7);
  EXPECT_THAT(
      [] {
        try {
          Options("sampler: haltonn");
        } catch (const SpecError& e) {
          return std::string(e.what());
        }
        return std::string();
      }(),
      HasSubstr("did you mean 'halton'?"));
  EXPECT_THROW(Options("sampler: {name: halton, points: 3}"), SpecError);
  EXPECT_THROW(Options("sampler: list"), SpecError);
}

}  // namespace
}  // namespace dltune
