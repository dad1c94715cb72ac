// Fused trials against the same trials trained alone, on the CPU: the built-in MLP workloads (synthetic, and
// Fashion-MNIST when its package is installed) and the CNN with each normalization, bit for bit; every optimizer,
// dropout, a diverging member, a member's checkpoint resumed alone, a stopped group resumed together.
#include "fused_training.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/train/trainer.h"
#include "dltune/workloads/registry.h"
#include "kernel_count_test_util.h"
#include "optimizer_kinds_test_util.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Keeps what a lone trial reports.
struct Recorder : TrainerCallbacks {
  std::vector<StepMetrics> steps;
  std::vector<std::pair<std::int64_t, std::vector<EvalMetric>>> evaluations;
  void OnTrainMetrics(const std::vector<StepMetrics>& s) override { steps.insert(steps.end(), s.begin(), s.end()); }
  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& m, std::int64_t, double) override {
    evaluations.emplace_back(step, m);
  }
};

struct Alone {
  TrainResult result;
  Recorder recorded;
};

HyperParams Params(std::map<std::string, Value> params) { return HyperParams(nlohmann::json::object(), params); }

class FusedTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("dltune_fused_{}_{}", ::getpid(),
                                                   ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RemoveTree(dir_);
    options_.max_train_steps = 200;
    options_.training.eval_every_steps = 50;
    options_.training.train_eval_examples = 200;
    options_.training.threads = 1;
    options_.objective = {"valid", "error_rate", Direction::kMinimize};
  }
  void TearDown() override { RemoveTree(dir_); }

  // The synthetic workload's MLP with two hidden layers of 24 (a square layer among them), batches of 32.
  static FusedMember Member(std::map<std::string, Value> params, std::uint64_t seed) {
    params.emplace("batch_size", Value(std::int64_t{32}));
    params.emplace("num_layers", Value(std::int64_t{2}));
    params.emplace("width", Value(std::int64_t{24}));
    return FusedMember{Params(params), seed, seed + 100, "", nullptr};
  }

  Alone TrainAlone(const FusedMember& member, const std::string& checkpoint_dir = "") {
    TrainerOptions options;
    options.max_train_steps = options_.max_train_steps;
    options.training = options_.training;
    options.objective = options_.objective;
    options.init_seed = member.init_seed;
    options.data_seed = member.data_seed;
    options.checkpoint_dir = checkpoint_dir;
    Alone alone;
    alone.result = TrainWorkload(*workload_, member.params, options, alone.recorded);
    return alone;
  }

  // Gives member m the checkpoint directory dir_/m<m>.
  void WithCheckpointDirs(std::vector<FusedMember>& members) const {
    for (std::size_t m = 0; m < members.size(); ++m)
      members[m].checkpoint_dir = (dir_ / fmt::format("m{}", m)).string();
  }

  std::unique_ptr<Workload> workload_ = MakeWorkload("synthetic", {{"examples", 1000}});
  FusedOptions options_;
  fs::path dir_;
};

// A member's steps and evaluations against its lone trial's, from `first_step` on: the same bits (see
// docs/training.md, "Fused trials": on the CPU a member runs its lone trial's arithmetic).
void ExpectSameAsAlone(const FusedMemberResult& fused, const Alone& alone, std::int64_t first_step = 1) {
  std::vector<StepMetrics> lone_steps;
  for (const StepMetrics& s : alone.recorded.steps) {
    if (s.step >= first_step) lone_steps.push_back(s);
  }
  std::vector<StepMetrics> fused_steps;
  for (const StepMetrics& s : fused.steps) {
    if (s.step >= first_step) fused_steps.push_back(s);
  }
  ASSERT_EQ(fused_steps.size(), lone_steps.size());
  for (std::size_t i = 0; i < lone_steps.size(); ++i) {
    SCOPED_TRACE(fmt::format("step {}", lone_steps[i].step));
    ASSERT_EQ(fused_steps[i].step, lone_steps[i].step);
    ASSERT_EQ(fused_steps[i].loss, lone_steps[i].loss);
    ASSERT_EQ(fused_steps[i].learning_rate, lone_steps[i].learning_rate);
    ASSERT_EQ(fused_steps[i].grad_norm, lone_steps[i].grad_norm);
  }
  std::vector<std::pair<std::int64_t, std::vector<EvalMetric>>> lone_evaluations;
  for (const auto& e : alone.recorded.evaluations) {
    if (e.first >= first_step) lone_evaluations.push_back(e);
  }
  ASSERT_EQ(fused.evaluations.size(), lone_evaluations.size());
  for (std::size_t i = 0; i < lone_evaluations.size(); ++i) {
    ASSERT_EQ(fused.evaluations[i].first, lone_evaluations[i].first);
    const auto& a = fused.evaluations[i].second;
    const auto& b = lone_evaluations[i].second;
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t k = 0; k < a.size(); ++k) {
      SCOPED_TRACE(fmt::format("evaluation at {}: {}/{}", lone_evaluations[i].first, b[k].split, b[k].metric));
      EXPECT_EQ(a[k].split, b[k].split);
      EXPECT_EQ(a[k].metric, b[k].metric);
      EXPECT_EQ(a[k].value, b[k].value);
      EXPECT_EQ(a[k].examples, b[k].examples);
    }
  }
  EXPECT_EQ(fused.result.outcome, alone.result.outcome);
  EXPECT_EQ(fused.result.best_step, alone.result.best_step);
  EXPECT_EQ(fused.result.best_value, alone.result.best_value);
  EXPECT_EQ(fused.result.final_value, alone.result.final_value);
}

class FusedOptimizerTest : public FusedTrainingTest, public ::testing::WithParamInterface<std::string> {};

// Four members of each optimizer kind, or of kinds mixed, with their own learning rates, momenta, weight decay and
// schedules.
TEST_P(FusedOptimizerTest, EachMemberTrainsAsItsLoneTrial) {
  const std::vector<FusedMember> members = {
      Member({{"optimizer", Value(MemberKind(GetParam(), 0))}, {"learning_rate", Value(0.05)}}, 1),
      Member({{"optimizer", Value(MemberKind(GetParam(), 1))},
              {"learning_rate", Value(0.01)},
              {"momentum", Value(0.5)},
              {"beta1", Value(0.8)},
              {"weight_decay", Value(1e-3)}},
             2),
      Member({{"optimizer", Value(MemberKind(GetParam(), 2))},
              {"learning_rate", Value(0.02)},
              {"one_minus_beta2", Value(0.01)},
              {"epsilon", Value(1e-6)},
              {"weight_decay", Value(1e-2)},
              {"decoupled_weight_decay", Value(true)},
              {"schedule", Value("cosine")},
              {"warmup_steps", Value(std::int64_t{20})}},
             3),
      Member({{"optimizer", Value(MemberKind(GetParam(), 3))},
              {"learning_rate", Value(0.03)},
              {"schedule", Value("linear")}},
             4),
  };
  const std::vector<FusedMemberResult> fused = TrainFused(*workload_, members, options_);
  ASSERT_EQ(fused.size(), members.size());
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    EXPECT_EQ(fused[m].result.outcome, TrainOutcome::kCompleted);
    EXPECT_EQ(fused[m].result.steps, options_.max_train_steps);
    ExpectSameAsAlone(fused[m], TrainAlone(members[m]));
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, FusedOptimizerTest,
                         ::testing::Values("sgd", "momentum", "nesterov", "rmsprop", "adam", "nadam",
                                           // kinds mixed: the quickstart's two, and a kind split by others
                                           "nesterov,nesterov,adam,adam", "adam,sgd,adam,rmsprop"),
                         KindsTestName);

// A member that diverges is masked at that step, infeasible with the lone trial's reason; the others finish exactly
// as a group without it does.
TEST_F(FusedTrainingTest, DivergingMemberIsMaskedWhileTheOthersTrainOn) {
  const FusedMember first = Member({{"optimizer", Value("nesterov")}, {"learning_rate", Value(0.05)}}, 1);
  const FusedMember diverging = Member({{"optimizer", Value("nesterov")}, {"learning_rate", Value(400.0)}}, 2);
  const FusedMember last = Member({{"optimizer", Value("nesterov")}, {"learning_rate", Value(0.1)}}, 3);
  const auto with = TrainFused(*workload_, {first, diverging, last}, options_);
  const auto without = TrainFused(*workload_, {first, last}, options_);

  const FusedMemberResult& masked = with[1];
  EXPECT_EQ(masked.result.outcome, TrainOutcome::kInfeasible);
  EXPECT_THAT(masked.result.reason, HasSubstr("diverged"));
  ASSERT_LT(masked.result.steps, options_.max_train_steps);
  EXPECT_EQ(static_cast<std::int64_t>(masked.steps.size()), masked.result.steps);
  const Alone alone = TrainAlone(diverging);
  EXPECT_EQ(alone.result.outcome, TrainOutcome::kInfeasible);
  EXPECT_EQ(masked.result.reason, alone.result.reason);
  for (std::size_t i = 0; i < masked.steps.size(); ++i) EXPECT_EQ(masked.steps[i].loss, alone.recorded.steps[i].loss);

  for (const auto& [a, b] : {std::pair{&with[0], &without[0]}, std::pair{&with[2], &without[1]}}) {
    EXPECT_EQ(a->result.outcome, TrainOutcome::kCompleted);
    ASSERT_EQ(a->steps.size(), b->steps.size());
    for (std::size_t i = 0; i < a->steps.size(); ++i) {
      EXPECT_EQ(a->steps[i].loss, b->steps[i].loss);
      EXPECT_EQ(a->steps[i].grad_norm, b->steps[i].grad_norm);
    }
    ASSERT_EQ(a->evaluations.size(), b->evaluations.size());
    for (std::size_t i = 0; i < a->evaluations.size(); ++i) {
      for (std::size_t k = 0; k < a->evaluations[i].second.size(); ++k) {
        EXPECT_EQ(a->evaluations[i].second[k].value, b->evaluations[i].second[k].value);
      }
    }
    EXPECT_EQ(a->result.best_value, b->result.best_value);
  }
}

// A group stopped between evaluations writes each member a lone trial's checkpoint; a lone trial resumes from it
// and continues as the lone trial that never stopped.
TEST_F(FusedTrainingTest, MemberCheckpointResumesAsALoneTrial) {
  std::vector<FusedMember> members = {
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.01)}}, 1),
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.003)}, {"weight_decay", Value(1e-3)}}, 2),
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.02)}, {"schedule", Value("cosine")}}, 3),
  };
  WithCheckpointDirs(members);
  options_.stop_after_step = 120;
  const auto fused = TrainFused(*workload_, members, options_);
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    EXPECT_EQ(fused[m].result.outcome, TrainOutcome::kStopped);
    EXPECT_EQ(fused[m].result.steps, 120);
    ASSERT_FALSE(fused[m].checkpoints.empty());
    EXPECT_THAT(fused[m].checkpoints.back(), HasSubstr("step_00000120"));

    const Alone resumed = TrainAlone(members[m], members[m].checkpoint_dir);
    EXPECT_EQ(resumed.result.resumed_from_step, 120);
    FusedMember fresh = members[m];
    fresh.checkpoint_dir.clear();
    const Alone whole = TrainAlone(fresh);
    // The resumed run's own steps and evaluations, from 121 on, against the run that never stopped.
    FusedMemberResult continued;
    continued.result = resumed.result;
    continued.steps = resumed.recorded.steps;
    continued.evaluations = resumed.recorded.evaluations;
    ExpectSameAsAlone(continued, whole, 121);
    // And the fused member's steps up to the stop.
    for (std::size_t i = 0; i < fused[m].steps.size(); ++i) {
      ASSERT_EQ(fused[m].steps[i].loss, whole.recorded.steps[i].loss);
    }
  }
}

// The built-in Fashion-MNIST MLP (inputs standardized inside the model) on a slice of its training images.
TEST_F(FusedTrainingTest, FashionMnistMembersTrainAsTheirLoneTrials) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  workload_ = MakeWorkload("fashion_mnist_mlp", {{"train_examples", 2000}});
  options_.max_train_steps = 60;
  options_.training.eval_every_steps = 30;
  options_.training.valid_sample_examples = 500;
  const auto member = [](double learning_rate, std::uint64_t seed) {
    return FusedMember{Params({{"optimizer", Value("nesterov")},
                               {"learning_rate", Value(learning_rate)},
                               {"batch_size", Value(std::int64_t{64})},
                               {"width", Value(std::int64_t{64})}}),
                       seed, seed + 7, "", nullptr};
  };
  const std::vector<FusedMember> members = {member(0.05, 1), member(0.1, 2), member(0.02, 3)};
  const std::vector<FusedMemberResult> fused = TrainFused(*workload_, members, options_);
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    ExpectSameAsAlone(fused[m], TrainAlone(members[m]));
  }
}

// Dropout: each member draws its masks from a generator of its own, seeded as its lone trial seeds torch's.
TEST_F(FusedTrainingTest, DropoutMembersTrainAsTheirLoneTrials) {
  const std::vector<FusedMember> members = {
      Member({{"dropout", Value(0.2)}, {"learning_rate", Value(0.05)}}, 1),
      Member({{"dropout", Value(0.2)}, {"learning_rate", Value(0.02)}}, 2),
  };
  const std::vector<FusedMemberResult> fused = TrainFused(*workload_, members, options_);
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    ExpectSameAsAlone(fused[m], TrainAlone(members[m]));
  }
}

// What a fused member reported, in the shape of a lone trial's record.
Alone AsAlone(const FusedMemberResult& member) {
  Alone alone;
  alone.result = member.result;
  alone.recorded.steps = member.steps;
  alone.recorded.evaluations = member.evaluations;
  return alone;
}

// A group stopped at step 120 resumes together from its members' checkpoints (weights, optimizer state, dropout
// generators, best and initial values) and continues bit for bit as the group that never stopped.
TEST_F(FusedTrainingTest, StoppedGroupResumesExactly) {
  std::vector<FusedMember> members = {
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.01)}, {"dropout", Value(0.1)}}, 1),
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.003)}, {"dropout", Value(0.1)}}, 2),
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.02)}, {"dropout", Value(0.1)}}, 3),
  };
  const auto whole = TrainFused(*workload_, members, options_);
  WithCheckpointDirs(members);
  options_.stop_after_step = 120;
  const auto stopped = TrainFused(*workload_, members, options_);
  options_.stop_after_step = 0;
  const auto resumed = TrainFused(*workload_, members, options_);
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    EXPECT_EQ(stopped[m].result.outcome, TrainOutcome::kStopped);
    EXPECT_EQ(resumed[m].result.resumed_from_step, 120);
    ASSERT_EQ(resumed[m].steps.front().step, 121);
    ExpectSameAsAlone(resumed[m], AsAlone(whole[m]), 121);
    for (std::size_t i = 0; i < stopped[m].steps.size(); ++i) {
      ASSERT_EQ(stopped[m].steps[i].loss, whole[m].steps[i].loss);
    }
  }
  // A member with checkpoints beside one without: the group does not resume (its members resume alone).
  std::vector<FusedMember> mixed = {members[0], Member({{"optimizer", Value("adam")}, {"dropout", Value(0.1)}}, 4)};
  mixed[1].checkpoint_dir = (dir_ / "fresh").string();
  try {
    TrainFused(*workload_, mixed, options_);
    ADD_FAILURE() << "a group of a resumable member and a fresh one trained";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kConflict);
    EXPECT_THAT(e.what(), HasSubstr("resume together"));
  }
}

// A device's way, run on the CPU: the optimizer's tensor form (the same rules as a few element-wise operations, which
// round as such: within a few roundings per step of the fused loop) and the steps read at log points only. A member
// that diverges between two reads is found at the next one, with the step and reason its lone trial gives, and the
// others train on.
TEST_F(FusedTrainingTest, TheDevicesWayReadsStepsAtLogPointsAndStillMasksADivergingMember) {
  const std::vector<FusedMember> members = {
      Member({{"optimizer", Value("nesterov")}, {"learning_rate", Value(0.05)}}, 1),
      Member({{"optimizer", Value("nesterov")}, {"learning_rate", Value(400.0)}}, 2),
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.01)}}, 3),
  };
  const auto stepwise = TrainFused(*workload_, {members[0], members[1]}, options_);
  options_.deferred = true;
  options_.training.log_every_steps = 25;
  const auto deferred = TrainFused(*workload_, {members[0], members[1]}, options_);
  EXPECT_EQ(deferred[1].result.outcome, TrainOutcome::kInfeasible);
  EXPECT_EQ(deferred[1].result.reason, stepwise[1].result.reason);
  EXPECT_EQ(deferred[1].result.steps, stepwise[1].result.steps);
  ASSERT_EQ(deferred[0].steps.size(), 200U);
  // Float32 element-wise operations against the fused loop: a few roundings per step, accumulated over 200 steps.
  const double tolerance = 200 * 8 * std::ldexp(1.0, -24);
  for (std::size_t i = 0; i < deferred[0].steps.size(); ++i) {
    EXPECT_NEAR(deferred[0].steps[i].loss, stepwise[0].steps[i].loss, tolerance * stepwise[0].steps[i].loss) << i;
  }
  EXPECT_EQ(deferred[0].result.outcome, TrainOutcome::kCompleted);
  // Adam's tensor form beside a diverging member: masked members keep their state, the others train.
  const auto mixed = TrainFused(
      *workload_, {members[2], Member({{"optimizer", Value("adam")}, {"learning_rate", Value(1000.0)}}, 4)}, options_);
  EXPECT_EQ(mixed[0].result.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(mixed[1].result.outcome, TrainOutcome::kInfeasible);
}

// training.cuda_graph where no CUDA graph can be captured (the CPU): the group trains eagerly, as without it, and says
// why.
TEST_F(FusedTrainingTest, CudaGraphOnTheCpuTrainsEagerlyAndSaysWhy) {
  const std::vector<FusedMember> members = {Member({{"learning_rate", Value(0.05)}}, 1),
                                            Member({{"learning_rate", Value(0.02)}}, 2)};
  options_.deferred = true;
  options_.training.cuda_graph = "false";
  const auto eager = TrainFused(*workload_, members, options_);
  options_.training.cuda_graph = "true";
  ::testing::internal::CaptureStderr();
  const auto asked = TrainFused(*workload_, members, options_);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              HasSubstr("training.cuda_graph: the group trains eagerly: the group trains on cpu"));
  for (std::size_t m = 0; m < members.size(); ++m) ExpectSameAsAlone(asked[m], AsAlone(eager[m]));

  // auto, the default, says nothing where there is nothing to choose.
  options_.training.cuda_graph = "auto";
  ::testing::internal::CaptureStderr();
  const auto automatic = TrainFused(*workload_, members, options_);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), ::testing::Not(HasSubstr("cuda_graph")));
  for (std::size_t m = 0; m < members.size(); ++m) ExpectSameAsAlone(automatic[m], AsAlone(eager[m]));
}

// The built-in CNN on Fashion-MNIST: small widths, a slice of the training images.
class FusedCnnTest : public FusedTrainingTest, public ::testing::WithParamInterface<std::string> {
 protected:
  void SetUp() override {
    FusedTrainingTest::SetUp();
    workload_ = MakeWorkload("fashion_mnist_cnn", {{"train_examples", 1000}});
    options_.max_train_steps = 30;
    options_.training.eval_every_steps = 15;
    options_.training.valid_sample_examples = 300;
  }

  FusedMember CnnMember(double learning_rate, std::uint64_t seed) const {
    return FusedMember{
        HyperParams({{"conv_channels", {4, 8}}, {"dense_size", 16}}, {{"optimizer", Value("nesterov")},
                                                                      {"learning_rate", Value(learning_rate)},
                                                                      {"batch_size", Value(std::int64_t{32})},
                                                                      {"normalization", Value(GetParam())},
                                                                      {"virtual_batch_size", Value(std::int64_t{16})},
                                                                      {"dropout", Value(0.1)}}),
        seed, seed + 7, "", nullptr};
  }
};

// Three members trained fused, each bit for bit as its lone trial (on the CPU each member's convolutions and ghost
// batch norms are its lone model's calls); then stopped at step 15, each member's checkpoint (weights and, with batch
// norm, its running averages) resumed alone.
TEST_P(FusedCnnTest, MembersFollowTheirLoneTrials) {
  if (!fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
  }
  std::vector<FusedMember> members = {CnnMember(0.01, 1), CnnMember(0.02, 2), CnnMember(0.005, 3)};
  const std::vector<FusedMemberResult> fused = TrainFused(*workload_, members, options_);
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    ExpectSameAsAlone(fused[m], TrainAlone(members[m]));
  }
  WithCheckpointDirs(members);
  options_.stop_after_step = 15;
  TrainFused(*workload_, members, options_);
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {} resumed alone", m));
    const Alone resumed = TrainAlone(members[m], members[m].checkpoint_dir);
    EXPECT_EQ(resumed.result.resumed_from_step, 15);
    FusedMemberResult continued;
    continued.result = resumed.result;
    continued.steps = resumed.recorded.steps;
    continued.evaluations = resumed.recorded.evaluations;
    ExpectSameAsAlone(continued, AsAlone(fused[m]), 16);
  }
}

INSTANTIATE_TEST_SUITE_P(Normalizations, FusedCnnTest, ::testing::Values("none", "batch", "ghost"));

// The array model checks the lone model's architecture on a probe batch: a standardization it lacks is refused.
// training.profile_steps: one trace of the group's steps, beside the first member's checkpoints, linked from the
// other member's directory; the members train as they do without it.
TEST_F(FusedTrainingTest, AProfileWindowRecordsTheGroupsStepsOnce) {
  std::vector<FusedMember> members = {
      Member({{"optimizer", Value("nesterov")}, {"learning_rate", Value(0.05)}}, 1),
      Member({{"optimizer", Value("adam")}, {"learning_rate", Value(0.01)}}, 2),
  };
  const auto unprofiled = TrainFused(*workload_, members, options_);
  for (std::size_t m = 0; m < members.size(); ++m) {
    members[m].checkpoint_dir = (dir_ / fmt::format("trial_{}", m) / "checkpoints").string();
  }
  options_.training.profile_steps = "10:12";
  const auto fused = TrainFused(*workload_, members, options_);
  const fs::path trace = dir_ / "trial_0" / "profile.trace.json";
  const fs::path link = dir_ / "trial_1" / "profile.trace.json";
  for (std::size_t m = 0; m < members.size(); ++m) {
    SCOPED_TRACE(fmt::format("member {}", m));
    ASSERT_EQ(fused[m].steps.size(), unprofiled[m].steps.size());
    for (std::size_t i = 0; i < fused[m].steps.size(); ++i) {
      EXPECT_EQ(fused[m].steps[i].loss, unprofiled[m].steps[i].loss);
    }
    ASSERT_EQ(fused[m].evaluations.size(), unprofiled[m].evaluations.size());
    EXPECT_EQ(fused[m].evaluations.back().second.front().value, unprofiled[m].evaluations.back().second.front().value);
    EXPECT_EQ(fused[m].result.profile_trace, (m == 0 ? trace : link).string());
  }
  ASSERT_TRUE(fs::is_regular_file(trace));
  ASSERT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(fs::equivalent(trace, link));
  const nlohmann::json json = nlohmann::json::parse(std::ifstream(trace));
  EXPECT_EQ(json["otherData"]["dltune"]["fused_members"], 2);
  EXPECT_EQ(json["otherData"]["dltune"]["first_step"], 11);
  EXPECT_EQ(json["otherData"]["dltune"]["last_step"], 12);
  std::set<std::string> names;
  for (const nlohmann::json& event : json["traceEvents"]) names.insert(event.value("name", ""));
  EXPECT_TRUE(names.contains("step 11") && names.contains("step 12") && !names.contains("step 13"));
  EXPECT_TRUE(names.contains("aten::baddbmm")) << "the array model's operators";
}

// The kernels of step 3 of a group of `count` members of the quickstart's MLP (examples/quickstart.yaml: Fashion-MNIST,
// one hidden layer of 256, batch 128; the synthetic data where Fashion-MNIST is not installed, the same layers), half
// Nesterov and half Adam, trained as on a device (the optimizer's tensor form): the operations that are not views or
// allocations between the ends of steps 2 and 3, each one a kernel on a device (kernel_count_test_util.h).
std::vector<std::string> QuickstartStepKernels(std::int64_t count) {
  const bool fashion = fs::exists("/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz");
  const std::unique_ptr<Workload> workload = fashion ? MakeWorkload("fashion_mnist_mlp", {{"train_examples", 1024}})
                                                     : MakeWorkload("synthetic", {{"examples", 2000}});
  std::vector<FusedMember> members;
  for (std::int64_t m = 0; m < count; ++m) {
    const bool adam = m >= count / 2;  // sorted by kind: two runs of the optimizer
    std::map<std::string, Value> params = {{"optimizer", Value(adam ? "adam" : "nesterov")},
                                           {"learning_rate", Value(adam ? 1e-3 : 0.05)},
                                           {"batch_size", Value(std::int64_t{128})},
                                           {"weight_decay", Value(0.0)}};
    params.emplace(adam ? "one_minus_beta1" : "one_minus_momentum", Value(0.1));
    if (adam) params.emplace("epsilon", Value(1e-8));
    if (!fashion) params.emplace("width", Value(std::int64_t{256}));
    const auto seed = static_cast<std::uint64_t>(m + 1);
    members.push_back({Params(params), seed, seed + 100, "", nullptr});
  }
  // The counts at the end of each step; stopped after step 3, before any evaluation or read of the steps.
  struct StepEnds : MemberCallbacks {
    const KernelCounter* counter = nullptr;
    std::vector<std::size_t> ends;
    bool ShouldStop(std::int64_t step) override {
      ends.push_back(static_cast<std::size_t>(counter->count()));
      return step == 3;
    }
  };
  FusedOptions options;
  options.max_train_steps = 100;
  options.training.threads = 1;
  options.objective = {"valid", "error_rate", Direction::kMinimize};
  options.deferred = true;
  StepEnds ends;
  options.callbacks = &ends;
  const KernelCounter counter;
  ends.counter = &counter;
  TrainFused(*workload, members, options);
  EXPECT_EQ(ends.ends.size(), 3U);
  const std::vector<std::string>& names = counter.names();
  std::vector<std::string> step3(names.begin() + static_cast<std::ptrdiff_t>(ends.ends.at(1)),
                                 names.begin() + static_cast<std::ptrdiff_t>(ends.ends.at(2)));
  // Step 2's kernels are step 3's: no step but the first (which draws the epoch's order) does more.
  EXPECT_EQ(ends.ends.at(1) - ends.ends.at(0), step3.size());
  return step3;
}

// A fused step launches as many kernels for 32 members as for 4, and no more than its structure asks for (see
// docs/gpu.md, "CPU proxies of the fused step"). The quickstart's step, as counted on the CPU:
//   the batch, 1: the members' rows of the epoch's order made contiguous (copy_; the CPU copies the rows themselves
//     with memcpy, a device with two index_select);
//   forward, 3: baddbmm, relu, baddbmm (the CPU standardizes in one pass of its own, a device with sub and div);
//   loss, 4: _log_softmax, nll_loss_forward, the members' means (mean), their sum (sum);
//   backward, 10: the seed (fill_), the mean's (div), nll_loss_backward, _log_softmax_backward_data, the output
//     layer's input, weight and bias gradients (bmm, bmm, sum), threshold_backward, the hidden layer's weight and bias
//     gradients (bmm, sum: its input needs none);
//   the optimizer's tensor form, 8 for all members: the coefficients in the parameters' type (copy_), the gradients in
//     one [M, P] tensor (cat), their norms (linalg_vector_norm), the mask (lt, masked_fill_), the norms of masked
//     members zeroed (le, copy_, masked_fill_); then per run of one kind, Nesterov's 4 (mul_, add_, addcmul_, addcmul_)
//     and Adam's 8 (lerp_, mul_, mul, addcmul_, sqrt, add_, div, addcmul_).
// 38 in all. A device adds its own: the gather's 2, the standardization's 2, baddbmm's copy of the bias before each
// product (2), the coefficients' copy to the device (1).
TEST(FusedStepKernels, AFusedStepTakesAsManyKernelsWhateverTheNumberOfMembers) {
  const std::vector<std::string> four = QuickstartStepKernels(4);
  const std::vector<std::string> many = QuickstartStepKernels(32);
  EXPECT_EQ(many, four);
  EXPECT_LE(many.size(), 38U) << fmt::format("{}", fmt::join(many, " "));
}

TEST_F(FusedTrainingTest, RefusesWhatItCannotFuse) {
  EXPECT_THROW(TrainFused(*workload_, {Member({}, 1), Member({{"batch_size", Value(std::int64_t{16})}}, 2)}, options_),
               Error);
  EXPECT_THROW(TrainFused(*workload_, {Member({{"grad_clip_norm", Value(1.0)}}, 1)}, options_), Error);
  EXPECT_THROW(TrainFused(*workload_, {Member({{"normalization", Value("batch")}}, 1)}, options_), Error);
  EXPECT_THROW(TrainFused(*workload_, {Member({{"activation", Value("tanh")}}, 1)}, options_), Error);
  EXPECT_THROW(TrainFused(*workload_, {Member({}, 1), Member({{"width", Value(std::int64_t{16})}}, 2)}, options_),
               Error);
}

}  // namespace
}  // namespace dltune
