#include "analyze/time_split.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using ::testing::HasSubstr;

TrialRecord Trial(const std::string& resources, double train_seconds) {
  TrialRecord trial;
  trial.resources = resources;
  trial.time_split = {{"startup", 1.0}, {"train", train_seconds}};
  return trial;
}

TEST(TimeSplit, SumsEachPhaseAndDescribesTheTotal) {
  const TimeSplit total = SumTimeSplits({Trial("", 2.0), Trial("", 4.0)});
  EXPECT_DOUBLE_EQ(total.at("train"), 6.0);
  EXPECT_DOUBLE_EQ(TotalSeconds(total), 8.0);
  EXPECT_THAT(DescribeTimeSplit(total), HasSubstr("training steps 6 s (75%)"));
  EXPECT_EQ(DescribeTimeSplit({}), "not recorded");
}

TEST(TimeSplit, GpuUsageOfAStudyWeighsEachTrialsUtilizationByItsTrainingTime) {
  EXPECT_EQ(DescribeGpuUsage({Trial("", 1.0), Trial("{}", 1.0)}), "") << "no trial used a GPU";
  const auto on_gpu = [](double utilization, double peak_gib, int at_once) {
    return fmt::format(R"({{"model": "NVIDIA H100 80GB HBM3", "uuids": ["GPU-1"], "peak_memory_bytes": {},
                          "mean_utilization_percent": {}, "trials_at_once": {}}})",
                       peak_gib * (1ULL << 30), utilization, at_once);
  };
  const std::string text =
      DescribeGpuUsage({Trial(on_gpu(20, 1.0, 1), 3.0), Trial(on_gpu(60, 2.5, 4), 1.0), Trial("", 5.0)});
  EXPECT_EQ(text,
            "2 trials on GPUs (NVIDIA H100 80GB HBM3): mean utilization 30% (weighted by training time), peak memory "
            "up to 2.5 GiB, up to 4 trials at once on a GPU");
}

}  // namespace
}  // namespace dltune
