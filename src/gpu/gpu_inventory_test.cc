#include "gpu/gpu_inventory.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dltune/core/error.h"
#include "gpu/gpu_test_util.h"
#include "gpu/nvml.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

// Two whole GPUs and a third in MIG mode with two instances, as NVML lists them.
std::vector<GpuDevice> Machine() {
  return {
      {.index = 0, .uuid = "GPU-aaaa1111", .name = "NVIDIA H100 80GB HBM3", .total_memory_bytes = 80 * test::kGiB},
      {.index = 1, .uuid = "GPU-aaaa2222", .name = "NVIDIA H100 80GB HBM3", .total_memory_bytes = 80 * test::kGiB},
      {.index = 2,
       .mig_index = 0,
       .uuid = "MIG-cccc0000",
       .parent_uuid = "GPU-cccc9999",
       .name = "NVIDIA A100 MIG 3g.20gb",
       .total_memory_bytes = 20 * test::kGiB},
      {.index = 2,
       .mig_index = 1,
       .uuid = "MIG-cccc0001",
       .parent_uuid = "GPU-cccc9999",
       .name = "NVIDIA A100 MIG 3g.20gb",
       .total_memory_bytes = 20 * test::kGiB},
  };
}

std::vector<std::string> Uuids(const GpuInventory& inventory) {
  std::vector<std::string> uuids;
  for (const GpuDevice& gpu : inventory.gpus) uuids.push_back(gpu.uuid);
  return uuids;
}

std::vector<std::string> Visible(const std::optional<std::string>& cuda_visible_devices,
                                 const std::string& gpus_option = "all") {
  return Uuids(SelectGpus(Machine(), cuda_visible_devices, gpus_option));
}

using Names = std::vector<std::string>;

TEST(GpuInventoryTest, WithoutCudaVisibleDevicesEveryGpuIsVisible) {
  const GpuInventory inventory = SelectGpus(Machine(), std::nullopt);
  EXPECT_EQ(Uuids(inventory), (Names{"GPU-aaaa1111", "GPU-aaaa2222", "MIG-cccc0000", "MIG-cccc0001"}));
  EXPECT_EQ(inventory.note, "");
}

TEST(GpuInventoryTest, CudaVisibleDevicesNamesGpusByNvmlIndexInItsOrder) {
  EXPECT_EQ(Visible("1,0"), (Names{"GPU-aaaa2222", "GPU-aaaa1111"}));
  EXPECT_EQ(Visible(" 1 , 1 "), (Names{"GPU-aaaa2222"}));
  EXPECT_EQ(Visible("2"), (Names{"MIG-cccc0000", "MIG-cccc0001"}));  // a GPU in MIG mode: its instances
}

TEST(GpuInventoryTest, CudaVisibleDevicesNamesGpusByUuidOrUniquePrefix) {
  EXPECT_EQ(Visible("GPU-aaaa2222,GPU-aaaa1111"), (Names{"GPU-aaaa2222", "GPU-aaaa1111"}));
  EXPECT_EQ(Visible("GPU-aaaa2"), (Names{"GPU-aaaa2222"}));
  EXPECT_EQ(Visible("MIG-cccc0001"), (Names{"MIG-cccc0001"}));
  EXPECT_EQ(Visible("GPU-cccc"), (Names{"MIG-cccc0000", "MIG-cccc0001"}));
  // A prefix of two GPUs names none: it and what follows are ignored.
  const GpuInventory ambiguous = SelectGpus(Machine(), "GPU-aaaa,0");
  EXPECT_TRUE(ambiguous.gpus.empty());
  EXPECT_THAT(ambiguous.note, HasSubstr("'GPU-aaaa' names no GPU"));
}

TEST(GpuInventoryTest, EmptyOrMinusOneHidesEveryGpu) {
  for (const std::string value : {"", "-1", " "}) {
    const GpuInventory inventory = SelectGpus(Machine(), value);
    EXPECT_TRUE(inventory.gpus.empty()) << value;
    EXPECT_THAT(inventory.note, HasSubstr("hides every GPU")) << value;
  }
}

TEST(GpuInventoryTest, AnInvalidEntryHidesItAndTheEntriesAfterItAsCudaDoes) {
  const GpuInventory inventory = SelectGpus(Machine(), "1,7,0");
  EXPECT_EQ(Uuids(inventory), (Names{"GPU-aaaa2222"}));
  EXPECT_THAT(inventory.note, HasSubstr("'7' names no GPU; it and the entries after it are ignored"));
  EXPECT_EQ(Visible("0,-1,1"), (Names{"GPU-aaaa1111"}));
  EXPECT_EQ(Visible("0,gpu1,1"), (Names{"GPU-aaaa1111"}));
}

TEST(GpuInventoryTest, GpusOptionPicksAmongTheVisibleByPositionOrUuid) {
  EXPECT_EQ(Visible("1,0", "1"), (Names{"GPU-aaaa1111"}));  // the second visible: NVML's GPU 0
  EXPECT_EQ(Visible(std::nullopt, "3,0"), (Names{"MIG-cccc0001", "GPU-aaaa1111"}));
  EXPECT_EQ(Visible(std::nullopt, "GPU-aaaa2,MIG-cccc0000"), (Names{"GPU-aaaa2222", "MIG-cccc0000"}));
  EXPECT_EQ(Visible(std::nullopt, " all "), Visible(std::nullopt));
  const GpuInventory none = SelectGpus(Machine(), std::nullopt, "none");
  EXPECT_TRUE(none.gpus.empty());
  EXPECT_EQ(none.note, "--gpus none");
}

TEST(GpuInventoryTest, AGpusEntryThatNamesNoVisibleGpuIsAnInputErrorNamingIt) {
  for (const auto& [visible, option, entry] :
       std::vector<std::tuple<std::string, std::string, std::string>>{{"0,1", "0,2", "'2'"},
                                                                      {"0", "GPU-aaaa2222", "'GPU-aaaa2222'"},
                                                                      {"0,1", "0,,1", "''"},
                                                                      {"0,1", "first", "'first'"},
                                                                      {"0,1", "-1", "'-1'"}}) {
    try {
      SelectGpus(Machine(), visible, option);
      ADD_FAILURE() << option << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
      EXPECT_THAT(e.what(), HasSubstr(fmt::format("--gpus {}: {} names no visible GPU", option, entry))) << e.what();
    }
  }
}

TEST(GpuInventoryTest, FindGpusListsMigInstancesByUuidWithTheDriverVersion) {
  test::FakeGpus fake(
      "driver 535.104.05\n"
      "gpu GPU-11111111-aaaa total=85899345920 name=NVIDIA H100 80GB HBM3\n"
      "gpu GPU-22222222-bbbb total=42949672960 name=NVIDIA A100-SXM4-40GB\n"
      "mig MIG-33333333-cccc total=10737418240 name=NVIDIA A100-SXM4-40GB MIG 2g.10gb\n"
      "mig MIG-44444444-dddd total=21474836480 name=NVIDIA A100-SXM4-40GB MIG 3g.20gb\n");
  Nvml nvml;
  ASSERT_TRUE(nvml.available()) << nvml.unavailable_reason();
  const GpuInventory inventory = FindGpus(nvml);
  EXPECT_EQ(Uuids(inventory), (Names{"GPU-11111111-aaaa", "MIG-33333333-cccc", "MIG-44444444-dddd"}));
  EXPECT_EQ(inventory.driver_version, "535.104.05");
  ASSERT_EQ(inventory.gpus.size(), 3u);
  EXPECT_EQ(inventory.gpus[0].Label(), "GPU 0 (NVIDIA H100 80GB HBM3)");
  EXPECT_EQ(inventory.gpus[0].total_memory_bytes, 80 * test::kGiB);
  EXPECT_EQ(inventory.gpus[2].Label(), "GPU 1 MIG 1 (NVIDIA A100-SXM4-40GB MIG 3g.20gb)");
  EXPECT_EQ(inventory.gpus[2].parent_uuid, "GPU-22222222-bbbb");
  EXPECT_EQ(inventory.gpus[2].total_memory_bytes, 20 * test::kGiB);

  ::setenv("CUDA_VISIBLE_DEVICES", "GPU-2", 1);
  EXPECT_EQ(Uuids(FindGpus(nvml)), (Names{"MIG-33333333-cccc", "MIG-44444444-dddd"}));
  EXPECT_EQ(Uuids(FindGpus(nvml, "1")), (Names{"MIG-44444444-dddd"}));
  ::unsetenv("CUDA_VISIBLE_DEVICES");
}

TEST(NvmlTest, NoLibraryIsNoGpuWithTheReason) {
  test::FakeGpus fake("gpu GPU-1 total=1 name=unused\n");
  ::setenv("DLTUNE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  Nvml nvml;
  EXPECT_FALSE(nvml.available());
  EXPECT_THAT(nvml.unavailable_reason(), HasSubstr("/nonexistent/libnvidia-ml.so.1"));
  EXPECT_TRUE(nvml.Devices().empty());
  EXPECT_FALSE(nvml.Sample("GPU-1"));
  const GpuInventory inventory = FindGpus(nvml);
  EXPECT_TRUE(inventory.gpus.empty());
  EXPECT_THAT(inventory.note, HasSubstr("no NVIDIA driver: /nonexistent/libnvidia-ml.so.1"));
  EXPECT_TRUE(FindGpus(nvml, "none").gpus.empty());
  try {
    FindGpus(nvml, "0");
    ADD_FAILURE() << "--gpus 0 without a GPU was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("'0' names no visible GPU (no GPU is visible"));
    EXPECT_THAT(e.what(), HasSubstr("no NVIDIA driver"));
  }
}

TEST(NvmlTest, ALibraryThatFailsToStartIsNoGpuWithTheReason) {
  test::FakeGpus fake("init_error 9\ngpu GPU-1 total=1 name=unused\n");
  Nvml nvml;
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.unavailable_reason(), "NVML did not start: Driver Not Loaded");
  EXPECT_EQ(FindGpus(nvml).note, "no NVIDIA driver: NVML did not start: Driver Not Loaded");
}

TEST(NvmlTest, ALibraryThatIsNotNvmlIsNoGpu) {
  test::FakeGpus fake("gpu GPU-1 total=1 name=unused\n");
  ::setenv("DLTUNE_NVML_LIBRARY", "libz.so.1", 1);
  Nvml nvml;
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.unavailable_reason(), "libz.so.1 lacks nvmlInit_v2");
}

TEST(NvmlTest, ASampleHasUsedMemoryUtilizationAndTheLiveProcesses) {
  test::FakeGpus fake(
      "gpu GPU-1 total=17179869184 baseline=1073741824 util=37 name=NVIDIA L4\n"
      "gpu GPU-2 total=17179869184 pid_memory=hidden name=NVIDIA L4\n"
      "mig MIG-2a total=8589934592 pid_memory=hidden name=NVIDIA L4 MIG\n");
  test::ChildProcess ended, leaked;
  fake.UseMemory("GPU-1", ::getpid(), 2 * test::kGiB);
  fake.UseMemory("GPU-1", ended.pid(), 4 * test::kGiB);
  fake.UseMemory("GPU-1", leaked.pid(), 8 * test::kGiB, /*lingering=*/true);
  ended.Finish();
  leaked.Finish();
  Nvml nvml;
  const auto sample = nvml.Sample("GPU-1");
  ASSERT_TRUE(sample);
  EXPECT_EQ(sample->total_bytes, 16 * test::kGiB);
  EXPECT_EQ(sample->used_bytes, 11 * test::kGiB);  // baseline, this process, and the lingering memory
  EXPECT_EQ(sample->utilization_percent, 37);
  EXPECT_TRUE(sample->processes_known);
  ASSERT_EQ(sample->processes.size(), 1u);
  EXPECT_EQ(sample->processes[0].pid, ::getpid());
  EXPECT_EQ(sample->processes[0].used_bytes, 2 * test::kGiB);

  fake.UseMemory("MIG-2a", ::getpid(), test::kGiB);
  const auto mig = nvml.Sample("MIG-2a");
  ASSERT_TRUE(mig);
  EXPECT_EQ(mig->used_bytes, test::kGiB);
  EXPECT_FALSE(mig->utilization_percent);  // not supported on a MIG instance
  ASSERT_EQ(mig->processes.size(), 1u);
  EXPECT_FALSE(mig->processes[0].used_bytes);  // hidden
  EXPECT_FALSE(nvml.Sample("GPU-2"));          // in MIG mode: not a device of its own
  EXPECT_FALSE(nvml.Sample("GPU-404"));
}

TEST(NvmlTest, UnderMpsASampleListsTheServersClientsAmongItsProcesses) {
  test::FakeGpus fake("gpu GPU-1 total=17179869184 name=NVIDIA L4\n");
  test::ChildProcess server, client;
  fake.UseMemory("GPU-1", server.pid(), test::kGiB / 4);
  fake.UseMemoryAsMpsClient("GPU-1", client.pid(), 2 * test::kGiB);
  Nvml nvml;
  const auto sample = nvml.Sample("GPU-1");
  ASSERT_TRUE(sample);
  std::vector<std::pair<pid_t, std::optional<std::uint64_t>>> listed;
  for (const GpuProcess& process : sample->processes) listed.emplace_back(process.pid, process.used_bytes);
  EXPECT_THAT(listed, ::testing::UnorderedElementsAre(std::pair{server.pid(), std::optional(test::kGiB / 4)},
                                                      std::pair{client.pid(), std::optional(2 * test::kGiB)}));
}

}  // namespace
}  // namespace dltune
