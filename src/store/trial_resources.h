// What a trial's worker recorded of the resources it used (TrialRecord::resources), read back for `show`, the
// report, the dashboard and `export`: its GPUs (written by the GPU placement: docs/parallel-layout.md, "GPUs") and
// the fused group it trained in (docs/training.md, "Fused trials").
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dltune {

struct GpuUsage {
  std::string model;
  std::vector<std::string> uuids;  // by rank
  std::string driver;
  std::optional<double> peak_memory_bytes;
  std::optional<double> mean_utilization_percent;
  int trials_at_once = 1;  // the most trials that shared its GPU while it ran
};

// The GPUs of a trial's resources record; nullopt when it used none (or recorded nothing readable).
std::optional<GpuUsage> ParseGpuUsage(const std::string& resources);

// "NVIDIA H100 80GB HBM3 (GPU-5c1e…), driver 580.159.04; peak memory 1.2 GiB, mean utilization 37%, 8 trials at once".
std::string DescribeGpuUsage(const GpuUsage& usage);

// The trials (by number, this one included) of the fused group the trial trained in; empty when it trained alone.
std::vector<std::uint64_t> FusedGroupOf(const std::string& resources);

// `resources` (a JSON object, or "") with the fused group `numbers` added under "fused_group".
std::string WithFusedGroup(const std::string& resources, const std::vector<std::uint64_t>& numbers);

// `resources` (a JSON object, or "") with the versions of the trial process's runtime, by name, under "runtime"
// (docs/trial-protocol.md, "runtime"); unchanged when `runtime` is empty.
std::string WithRuntime(const std::string& resources, const std::map<std::string, std::string>& runtime);

// The runtime versions a trial's resources record, by name; empty when none were sent.
std::map<std::string, std::string> RuntimeOf(const std::string& resources);

// "trained together with trials 3 and 5 (one process, one array model)"; "" for none.
std::string DescribeFusedGroup(const std::vector<std::uint64_t>& group, std::uint64_t trial);

}  // namespace dltune
