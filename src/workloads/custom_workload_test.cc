// Fusion as a workload's offer (Workload::Fusion): the user's workload of examples/custom_workload, registered by name,
// trains fused through the public API and each member is its lone trial bit for bit (on the CPU a member runs its lone
// trial's arithmetic: docs/training.md, "Fused trials"); a workload that offers no fusion, or describes a network its
// model is not, is refused naming it; the built-in workloads offer it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "../../examples/custom_workload/two_spirals.h"
#include "dltune/core/error.h"
#include "dltune/workloads/registry.h"
#include "dltune/workloads/train.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

// What a trial reported: every step and every evaluation.
struct Reported {
  std::vector<StepMetrics> steps;
  std::vector<std::pair<std::int64_t, std::vector<EvalMetric>>> evaluations;
  TrainResult result;
};

struct LoneRecorder : TrainerCallbacks {
  Reported* reported = nullptr;
  void OnTrainMetrics(const std::vector<StepMetrics>& s) override {
    reported->steps.insert(reported->steps.end(), s.begin(), s.end());
  }
  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& m, std::int64_t, double) override {
    reported->evaluations.emplace_back(step, m);
  }
};

struct GroupRecorder : MemberCallbacks {
  std::vector<Reported>* members = nullptr;
  void OnTrainMetrics(std::size_t member, const std::vector<StepMetrics>& s) override {
    auto& steps = members->at(member).steps;
    steps.insert(steps.end(), s.begin(), s.end());
  }
  void OnEvaluation(std::size_t member, std::int64_t step, const std::vector<EvalMetric>& m, std::int64_t,
                    double) override {
    members->at(member).evaluations.emplace_back(step, m);
  }
};

// The same bits: every step's loss, learning rate and gradient norm, every evaluation, the best and final values.
void ExpectSameBits(const Reported& fused, const Reported& alone) {
  ASSERT_EQ(fused.steps.size(), alone.steps.size());
  for (std::size_t i = 0; i < alone.steps.size(); ++i) {
    SCOPED_TRACE(fmt::format("step {}", alone.steps[i].step));
    ASSERT_EQ(fused.steps[i].step, alone.steps[i].step);
    ASSERT_EQ(fused.steps[i].loss, alone.steps[i].loss);
    ASSERT_EQ(fused.steps[i].learning_rate, alone.steps[i].learning_rate);
    ASSERT_EQ(fused.steps[i].grad_norm, alone.steps[i].grad_norm);
  }
  ASSERT_EQ(fused.evaluations.size(), alone.evaluations.size());
  for (std::size_t i = 0; i < alone.evaluations.size(); ++i) {
    ASSERT_EQ(fused.evaluations[i].first, alone.evaluations[i].first);
    const auto& a = fused.evaluations[i].second;
    const auto& b = alone.evaluations[i].second;
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
      SCOPED_TRACE(fmt::format("evaluation at {}: {}/{}", alone.evaluations[i].first, b[k].split, b[k].metric));
      EXPECT_EQ(a[k].split, b[k].split);
      EXPECT_EQ(a[k].metric, b[k].metric);
      EXPECT_EQ(a[k].value, b[k].value);
    }
  }
  EXPECT_EQ(fused.result.outcome, alone.result.outcome);
  EXPECT_EQ(fused.result.steps, alone.result.steps);
  EXPECT_EQ(fused.result.best_step, alone.result.best_step);
  EXPECT_EQ(fused.result.best_value, alone.result.best_value);
  EXPECT_EQ(fused.result.final_value, alone.result.final_value);
}

class CustomWorkload : public ::testing::Test {
 protected:
  void SetUp() override {
    two_spirals::Register();
    options_.max_train_steps = 150;
    options_.training.eval_every_steps = 50;
    options_.training.train_eval_examples = 500;
    options_.training.threads = 1;
  }

  static FusedMember Member(const std::string& optimizer, double learning_rate, std::uint64_t seed,
                            double dropout = 0) {
    return {.params = HyperParams(nlohmann::json::object(), {{"optimizer", Value(optimizer)},
                                                             {"learning_rate", Value(learning_rate)},
                                                             {"width", Value(std::int64_t{24})},
                                                             {"depth", Value(std::int64_t{3})},
                                                             {"dropout", Value(dropout)},
                                                             {"batch_size", Value(std::int64_t{32})}}),
            .init_seed = seed,
            .data_seed = seed + 50};
  }

  // Trains `members` fused, then each alone, and expects each member to be its lone trial.
  void ExpectMembersAsAlone(const std::string& workload, const std::vector<FusedMember>& members) {
    std::vector<Reported> fused(members.size());
    GroupRecorder group;
    group.members = &fused;
    const std::vector<TrainResult> results =
        TrainFusedTrials(workload, nlohmann::json::object(), members, options_, group);
    ASSERT_EQ(results.size(), members.size());
    for (std::size_t m = 0; m < members.size(); ++m) {
      SCOPED_TRACE(fmt::format("member {}", m));
      fused[m].result = results[m];
      EXPECT_EQ(results[m].outcome, TrainOutcome::kCompleted) << results[m].reason;
      TrainerOptions lone = options_;
      lone.init_seed = members[m].init_seed;
      lone.data_seed = members[m].data_seed;
      Reported alone;
      LoneRecorder recorder;
      recorder.reported = &alone;
      alone.result = Train(workload, nlohmann::json::object(), members[m].params, lone, recorder);
      ASSERT_EQ(alone.steps.size(), static_cast<std::size_t>(options_.max_train_steps)) << "every step reported";
      ASSERT_EQ(alone.evaluations.size(), 3U);
      ExpectSameBits(fused[m], alone);
    }
  }

  TrainerOptions options_;
};

TEST_F(CustomWorkload, ItsMembersAreTheirLoneTrials) {
  EXPECT_TRUE(FusibleWorkload("two_spirals"));
  ExpectMembersAsAlone("two_spirals", {Member("adam", 0.003, 1), Member("nesterov", 0.05, 2), Member("adam", 0.01, 3),
                                       Member("sgd", 0.1, 4)});
}

// Dropout: each member draws its masks as its lone trial does, from a generator seeded as the trainer seeds torch's.
TEST_F(CustomWorkload, ItsMembersWithDropoutAreTheirLoneTrials) {
  ExpectMembersAsAlone("two_spirals", {Member("adam", 0.003, 1, 0.1), Member("nesterov", 0.05, 2, 0.1)});
}

// The same model from a workload that does not offer fusion (the interface's default).
class ApartSpirals final : public two_spirals::TwoSpirals {
 public:
  std::string name() const override { return "apart_spirals"; }
  std::optional<ArrayNetwork> Fusion() const override { return Workload::Fusion(); }
};

// A workload whose description misstates its model's standardization.
class MisdescribedSpirals final : public two_spirals::TwoSpirals {
 public:
  std::string name() const override { return "misdescribed_spirals"; }
  std::optional<ArrayNetwork> Fusion() const override {
    return ArrayNetwork{.kind = ArrayNetwork::Kind::kMlp, .standardize = InputStandardization{0.5, 0.25}};
  }
};

TEST_F(CustomWorkload, AWorkloadThatCannotFuseIsRefusedNamingIt) {
  RegisterWorkload("apart_spirals", [](const nlohmann::json&) { return std::make_unique<ApartSpirals>(); });
  RegisterWorkload("misdescribed_spirals",
                   [](const nlohmann::json&) { return std::make_unique<MisdescribedSpirals>(); });
  EXPECT_FALSE(FusibleWorkload("apart_spirals"));
  EXPECT_FALSE(FusibleWorkload("no_such_workload"));
  MemberCallbacks none;
  const std::vector<FusedMember> members = {Member("adam", 0.003, 1), Member("adam", 0.01, 2)};
  try {
    TrainFusedTrials("apart_spirals", nlohmann::json::object(), members, options_, none);
    ADD_FAILURE() << "a workload without fusion trained fused";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("workload apart_spirals cannot train fused"));
  }
  // Fusible as described, refused by the check against the lone model before any step.
  EXPECT_TRUE(FusibleWorkload("misdescribed_spirals"));
  try {
    TrainFusedTrials("misdescribed_spirals", nlohmann::json::object(), members, options_, none);
    ADD_FAILURE() << "a misdescribed model trained fused";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("workload misdescribed_spirals: array MLP: member 0 computes other logits"));
    EXPECT_THAT(e.what(), HasSubstr("with this input standardization"));
  }
}

TEST(BuiltinWorkloads, OfferFusion) {
  EXPECT_TRUE(FusibleWorkload("fashion_mnist_mlp"));
  EXPECT_TRUE(FusibleWorkload("fashion_mnist_cnn"));
  EXPECT_TRUE(FusibleWorkload("synthetic"));
  EXPECT_EQ(MakeWorkload("fashion_mnist_cnn")->Fusion()->kind, ArrayNetwork::Kind::kCnn);
}

}  // namespace
}  // namespace dltune
