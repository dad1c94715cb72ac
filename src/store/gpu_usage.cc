#include "store/gpu_usage.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

namespace dltune {
namespace {

std::optional<double> NumberField(const nlohmann::json& record, const char* name) {
  const auto it = record.find(name);
  if (it == record.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

}  // namespace

std::optional<GpuUsage> ParseGpuUsage(const std::string& resources) {
  if (resources.empty()) return std::nullopt;
  const auto record = nlohmann::json::parse(resources, nullptr, false);
  if (!record.is_object()) return std::nullopt;
  const auto uuids = record.find("uuids");
  if (uuids == record.end() || !uuids->is_array() || uuids->empty()) return std::nullopt;
  GpuUsage usage;
  for (const auto& uuid : *uuids) {
    if (uuid.is_string()) usage.uuids.push_back(uuid.get<std::string>());
  }
  if (usage.uuids.empty()) return std::nullopt;
  const auto text = [&](const char* name) {
    const auto it = record.find(name);
    return it != record.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  usage.model = text("model");
  usage.driver = text("driver");
  usage.peak_memory_bytes = NumberField(record, "peak_memory_bytes");
  usage.mean_utilization_percent = NumberField(record, "mean_utilization_percent");
  if (const auto at_once = NumberField(record, "trials_at_once"); at_once && *at_once >= 1) {
    usage.trials_at_once = static_cast<int>(*at_once);
  }
  return usage;
}

std::string DescribeGpuUsage(const GpuUsage& usage) {
  std::string text =
      fmt::format("{} ({})", usage.model.empty() ? std::string("GPU") : usage.model, fmt::join(usage.uuids, ", "));
  if (!usage.driver.empty()) text += ", driver " + usage.driver;
  std::vector<std::string> use;
  if (usage.peak_memory_bytes)
    use.push_back(fmt::format("peak memory {:.1f} GiB", *usage.peak_memory_bytes / (1ULL << 30)));
  if (usage.mean_utilization_percent)
    use.push_back(fmt::format("mean utilization {:.0f}%", *usage.mean_utilization_percent));
  if (usage.trials_at_once > 1) use.push_back(fmt::format("{} trials at once", usage.trials_at_once));
  if (!use.empty()) text += fmt::format("; {}", fmt::join(use, ", "));
  return text;
}

}  // namespace dltune
