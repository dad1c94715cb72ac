#include "run/study_reproduction.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/reproduction.h"
#include "gpu/gpu_test_util.h"

namespace dltune {
namespace {

TEST(StudyReproduction, ANewStudyRecordsTheModelsOfItsGpusAndTheDriver) {
  test::FakeGpus fake(
      "driver 550.54.15\ngpu GPU-1 total=85899345920 name=NVIDIA H100 80GB HBM3\n"
      "gpu GPU-2 total=85899345920 name=NVIDIA H100 80GB HBM3\n");
  const NewStudy study = WithMachineGpus({.name = "s", .reproduction = R"({"os":"Linux"})"});
  const nlohmann::json record = ParseRecord(study.reproduction);
  EXPECT_EQ(record["os"], "Linux");
  EXPECT_EQ(record["gpus"], nlohmann::json::array({"NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"}));
  EXPECT_EQ(record["driver"], "550.54.15");
}

TEST(StudyReproduction, AMachineWithoutNvmlLeavesTheRecordAsItIs) {
  test::FakeGpus fake("init_error 9\n");
  EXPECT_EQ(WithMachineGpus({.name = "s", .reproduction = R"({"os":"Linux"})"}).reproduction, R"({"os":"Linux"})");
}

}  // namespace
}  // namespace dltune
