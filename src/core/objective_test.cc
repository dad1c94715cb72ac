#include "dltune/core/objective.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "dltune/core/error.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

TEST(Objective, DirectionsRoundTripThroughTheirNames) {
  for (const Direction direction : {Direction::kMinimize, Direction::kMaximize}) {
    EXPECT_EQ(ParseDirection(DirectionName(direction)), direction);
  }
  try {
    ParseDirection("maximise");
    FAIL() << "parsed a misspelt direction";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("must be minimize or maximize, not 'maximise'"));
    EXPECT_THAT(e.what(), HasSubstr("did you mean 'maximize'?"));
  }
}

TEST(Objective, DescribesItselfByDirectionAndName) {
  EXPECT_EQ(Objective{}.Describe(), "minimize valid/error_rate");
  EXPECT_EQ(Objective::Parse("train/accuracy", Direction::kMaximize).Describe(), "maximize train/accuracy");
}

TEST(Objective, JsonRoundTrips) {
  const Objective objective = Objective::Parse("valid/accuracy", Direction::kMaximize);
  const nlohmann::json json = ObjectiveToJson(objective);
  EXPECT_EQ(json, nlohmann::json::parse(R"({"metric": "valid/accuracy", "direction": "maximize"})"));
  EXPECT_EQ(ObjectiveFromJson(json), objective);
  EXPECT_EQ(ObjectiveFromJson(ObjectiveToJson(Objective{})), Objective{});
}

TEST(Objective, JsonWithABadFieldIsAnError) {
  EXPECT_THAT([] { ObjectiveFromJson(nlohmann::json::parse(R"({"metric": "valid/loss", "direction": "up"})")); },
              ::testing::ThrowsMessage<Error>(HasSubstr("objective: must be minimize or maximize, not 'up'")));
  EXPECT_THAT([] { ObjectiveFromJson(nlohmann::json::parse(R"({"metric": "valid/loss"})")); },
              ::testing::ThrowsMessage<Error>(HasSubstr("missing or mistyped field")));
  EXPECT_THAT([] { ObjectiveFromJson(nlohmann::json::parse(R"({"metric": "a/b/c", "direction": "minimize"})")); },
              ::testing::ThrowsMessage<Error>(HasSubstr("split/metric")));
}

}  // namespace
}  // namespace dltune
