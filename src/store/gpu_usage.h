// The GPUs a trial used, as its worker recorded them (TrialRecord::resources, written by the GPU placement:
// docs/parallel-layout.md, "GPUs"), read back for `show`, the report, the dashboard and `export`.
#pragma once

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

}  // namespace dltune
