#include "store/trial_resources.h"

#include <gtest/gtest.h>

namespace dltune {
namespace {

TEST(GpuUsage, ATrialThatRecordedNoGpuHasNone) {
  EXPECT_FALSE(ParseGpuUsage(""));
  EXPECT_FALSE(ParseGpuUsage("{}"));
  EXPECT_FALSE(ParseGpuUsage("not json"));
  EXPECT_FALSE(ParseGpuUsage(R"({"model": "NVIDIA L4", "uuids": []})"));
}

TEST(GpuUsage, SaysWhatTheTrialsGpusWereAndDid) {
  const auto packed = ParseGpuUsage(R"({"model": "NVIDIA H100 80GB HBM3", "uuids": ["GPU-1"], "driver": "550.54.15",
                      "peak_memory_bytes": 2147483648, "mean_utilization_percent": 40.6, "trials_at_once": 3})");
  ASSERT_TRUE(packed);
  EXPECT_EQ(packed->trials_at_once, 3);
  EXPECT_EQ(DescribeGpuUsage(*packed),
            "NVIDIA H100 80GB HBM3 (GPU-1), driver 550.54.15; peak memory 2.0 GiB, mean utilization 41%, 3 trials at "
            "once");
  const auto unmeasured = ParseGpuUsage(R"({"model": "NVIDIA L4", "uuids": ["GPU-1", "GPU-2"], "driver": "",
                      "peak_memory_bytes": null, "mean_utilization_percent": null, "trials_at_once": 1})");
  ASSERT_TRUE(unmeasured);
  EXPECT_FALSE(unmeasured->peak_memory_bytes);
  EXPECT_EQ(DescribeGpuUsage(*unmeasured), "NVIDIA L4 (GPU-1, GPU-2)");
}

TEST(FusedGroup, IsKeptBesideTheGpusAndDescribedFromATrialsSide) {
  EXPECT_TRUE(FusedGroupOf("").empty());
  EXPECT_TRUE(FusedGroupOf(R"({"model": "L4", "uuids": ["GPU-1"]})").empty());
  const std::string resources = WithFusedGroup(R"({"model": "L4", "uuids": ["GPU-1"]})", {3, 5, 8});
  EXPECT_EQ(FusedGroupOf(resources), (std::vector<std::uint64_t>{3, 5, 8}));
  EXPECT_TRUE(ParseGpuUsage(resources)) << "the GPUs stay";
  EXPECT_EQ(FusedGroupOf(WithFusedGroup("", {1, 2})), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(DescribeFusedGroup({3, 5, 8}, 5), "trained together with trials 3 and 8 (one process, one array model)");
  EXPECT_EQ(DescribeFusedGroup({3, 5, 8, 9}, 3),
            "trained together with trials 5, 8 and 9 (one process, one array model)");
  EXPECT_EQ(DescribeFusedGroup({3, 5}, 3), "trained together with trial 5 (one process, one array model)");
  EXPECT_EQ(DescribeFusedGroup({}, 3), "");
}

}  // namespace
}  // namespace dltune
