#include "analyze/search_budget.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using ::testing::HasSubstr;

TEST(SearchBudget, AdamsHyperparametersByBudget) {
  EXPECT_FALSE(AdamBudgetFor(9).beta1);
  EXPECT_TRUE(AdamBudgetFor(10).beta1);
  EXPECT_FALSE(AdamBudgetFor(25).epsilon);
  EXPECT_TRUE(AdamBudgetFor(26).epsilon);
  EXPECT_FALSE(AdamBudgetFor(kAdamBeta2Trials - 1).beta2);
  EXPECT_TRUE(AdamBudgetFor(kAdamBeta2Trials).beta2);
}

// The suggested space is a valid spec's space, searching exactly what the budget supports.
TEST(SearchBudget, SuggestedSpacesAreValidAndFollowTheBudget) {
  for (const std::uint64_t trials : {5u, 16u, 30u, 60u}) {
    for (const std::string& optimizer : SuggestableOptimizers()) {
      const std::string text = SuggestedSpace(optimizer, trials);
      const StudySpec spec = ParseStudySpec(
          "name: s\nworkload: synthetic\nmax_train_steps: 100\ntrials: " + std::to_string(trials) + "\n" + text,
          "s.yaml");
      const auto varies = [&](const std::string& id) {
        const Param* param = spec.space->Find(id);
        return param != nullptr && param->Varies();
      };
      EXPECT_TRUE(varies("learning_rate")) << optimizer << " " << trials;
      if (optimizer == "adam" || optimizer == "nadam") {
        EXPECT_EQ(varies("one_minus_beta1"), trials >= 10);
        EXPECT_EQ(varies("epsilon"), trials > 25);
        EXPECT_EQ(varies("one_minus_beta2"), trials >= kAdamBeta2Trials);
      }
      EXPECT_TRUE(CheckAdamBudget(spec).empty()) << text;
    }
  }
  EXPECT_THROW(SuggestedSpace("adamw", 10), Error);
}

TEST(SearchBudget, ASpecSearchingTooMuchOfAdamIsFlagged) {
  const std::string header = "name: s\nworkload: synthetic\nmax_train_steps: 100\n";
  const StudySpec small = ParseStudySpec(header + R"(trials: 8
space:
  optimizer: {values: [nesterov, adam], role: scientific}
  learning_rate: {min: 0.0001, max: 0.1, scale: log}
  one_minus_beta1: {min: 0.01, max: 0.5, scale: log, when: {optimizer: adam}}
)",
                                         "s.yaml");
  const auto found = CheckAdamBudget(small);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id, "adam_budget");
  EXPECT_EQ(found[0].substudy, "optimizer=adam");
  EXPECT_THAT(found[0].title, HasSubstr("its 8 trials support: one_minus_beta1"));
  EXPECT_THAT(found[0].suggestion, HasSubstr("dltune space suggest --optimizer adam --trials 8"));
  // The same space with 16 trials is within the budget; epsilon searched with them is not.
  EXPECT_TRUE(
      CheckAdamBudget(ParseStudySpec(header + "trials: 16\n" + small.text.substr(small.text.find("space:")), "s.yaml"))
          .empty());
  const StudySpec epsilon = ParseStudySpec(header + R"(trials: 16
space:
  optimizer: adam
  learning_rate: {min: 0.0001, max: 0.1, scale: log}
  epsilon: {min: 1.0e-10, max: 1.0e-3, scale: log}
)",
                                           "s.yaml");
  ASSERT_EQ(CheckAdamBudget(epsilon).size(), 1u);
  EXPECT_THAT(CheckAdamBudget(epsilon)[0].title, HasSubstr("epsilon"));
}

}  // namespace
}  // namespace dltune
