// Which trials may train in one fused group (FusionKey), where a group looks for more members beyond its own
// sub-study (SubstudiesToFuse), how its members are ordered (OptimizerKindOf), and its report channel split by member.
#include "run/fused_group.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dltune/run/study_session.h"

namespace dltune {
namespace {

using ::testing::ElementsAre;

// Nesterov vs Adam at two widths: the optimizer (fusible) and the width (not) are scientific, four sub-studies.
StudySpec TwoQuestions() {
  return ParseStudySpec(R"(name: s
workload: {name: fashion_mnist_mlp}
max_train_steps: 10
objective: {metric: valid/error_rate, direction: minimize}
trials: 2
space:
  optimizer: {values: [nesterov, adam], role: scientific}
  width: {values: [16, 32], role: scientific}
  nesterov_learning_rate: {name: learning_rate, when: {optimizer: nesterov}, min: 0.01, max: 1.0, scale: log}
  adam_learning_rate: {name: learning_rate, when: {optimizer: adam}, min: 0.0001, max: 0.01, scale: log}
  batch_size: 64
)",
                        "study.yaml");
}

TrialRecord Pending(std::uint64_t number, std::size_t substudy, const std::string& optimizer, std::int64_t width) {
  TrialRecord trial;
  trial.number = number;
  trial.substudy = substudy;
  trial.params = {{"optimizer", Value(optimizer)}, {"width", Value(width)}, {"batch_size", Value(std::int64_t{64})}};
  trial.params[optimizer + "_learning_rate"] = Value(0.01 * static_cast<double>(number + 1));
  return trial;
}

// A study that leaves training.fuse out (chosen) groups its trials as the probe chose, and apart where none ran (on
// the CPU); explicit values keep their meaning.
TEST(FuseLimit, TheDefaultTakesTheProbesChoiceAndIsApartWithoutOne) {
  StudySpec spec = TwoQuestions();
  EXPECT_EQ(spec.training.fuse, "chosen");
  EXPECT_EQ(FuseLimit(spec), 0U);
  EXPECT_EQ(FuseLimit(spec, 8), 8U);
  spec.training.fuse = "off";
  EXPECT_EQ(FuseLimit(spec, 8), 0U);
  spec.training.fuse = "4";
  EXPECT_EQ(FuseLimit(spec, 8), 4U);
  spec.training.fuse = "auto";
  EXPECT_EQ(FuseLimit(spec, 8), 8U);
  EXPECT_EQ(FuseLimit(spec, 0), 0U);
}

TEST(FusionKey, LeavesOutTheFusibleHyperparametersOnly) {
  const std::map<std::string, Value> nesterov = {
      {"optimizer", Value("nesterov")}, {"learning_rate", Value(0.1)}, {"width", Value(std::int64_t{16})}};
  std::map<std::string, Value> adam = nesterov;
  adam["optimizer"] = Value("adam");
  adam["learning_rate"] = Value(0.001);
  adam["one_minus_beta1"] = Value(0.1);
  EXPECT_EQ(FusionKey(nesterov), FusionKey(adam));
  std::map<std::string, Value> wider = nesterov;
  wider["width"] = Value(std::int64_t{32});
  EXPECT_NE(FusionKey(nesterov), FusionKey(wider));
  std::map<std::string, Value> other_batch = nesterov;
  other_batch["batch_size"] = Value(std::int64_t{32});
  EXPECT_NE(FusionKey(nesterov), FusionKey(other_batch));
}

TEST(SubstudiesToFuse, TakesTheOtherSubstudiesWhosePendingTrialsDifferOnlyInFusibleHyperparameters) {
  const StudySpec spec = TwoQuestions();
  // Sub-studies 0 and 2 train width 16, 1 and 3 width 32; the pending trials interleave them.
  const std::vector<TrialRecord> pending = {Pending(4, 1, "nesterov", 32), Pending(5, 3, "adam", 32),
                                            Pending(6, 2, "adam", 16), Pending(7, 0, "nesterov", 16),
                                            Pending(8, 2, "adam", 16)};
  const std::string width_16 = FusionKey(ParamsByName(*spec.space, Pending(0, 0, "nesterov", 16).params));
  EXPECT_THAT(SubstudiesToFuse(spec, pending, width_16, 0), ElementsAre(2));
  const std::string width_32 = FusionKey(ParamsByName(*spec.space, Pending(1, 1, "nesterov", 32).params));
  EXPECT_THAT(SubstudiesToFuse(spec, pending, width_32, 1), ElementsAre(3));
  EXPECT_THAT(SubstudiesToFuse(spec, pending, width_32, 0), ElementsAre(1, 3));
  EXPECT_TRUE(SubstudiesToFuse(spec, {}, width_16, 0).empty());
}

TEST(OptimizerKindOf, IsTheOptimizerParamOrSgd) {
  EXPECT_EQ(OptimizerKindOf({{"optimizer", Value("adam")}}), "adam");
  EXPECT_EQ(OptimizerKindOf({{"learning_rate", Value(0.1)}}), "sgd");
}

TEST(GroupReportSplitter, GivesEachMemberItsLinesAcrossReads) {
  GroupReportSplitter splitter(2);
  EXPECT_THAT(splitter.Split("0\tstart 0\n1\tst"), ElementsAre("start 0\n", ""));
  EXPECT_THAT(splitter.Split("art 0\n1\ttrain 1 loss=0.5\n"), ElementsAre("", "start 0\ntrain 1 loss=0.5\n"));
  // A line with no valid member goes to member 0 as it is (it breaks the protocol there).
  EXPECT_THAT(splitter.Split("7\tend\nnoise\n"), ElementsAre("7\tend\nnoise\n", ""));
}

}  // namespace
}  // namespace dltune
