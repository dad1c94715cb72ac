#include "store/trial_resources.h"

#include <algorithm>

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

std::vector<std::uint64_t> FusedGroupOf(const std::string& resources) {
  std::vector<std::uint64_t> numbers;
  if (resources.empty()) return numbers;
  const auto record = nlohmann::json::parse(resources, nullptr, false);
  if (!record.is_object()) return numbers;
  const auto group = record.find("fused_group");
  if (group == record.end() || !group->is_array()) return numbers;
  for (const auto& number : *group) {
    if (number.is_number_unsigned()) numbers.push_back(number.get<std::uint64_t>());
  }
  return numbers;
}

std::string WithFusedGroup(const std::string& resources, const std::vector<std::uint64_t>& numbers) {
  nlohmann::json record =
      resources.empty() ? nlohmann::json::object() : nlohmann::json::parse(resources, nullptr, false);
  if (!record.is_object()) record = nlohmann::json::object();
  record["fused_group"] = numbers;
  return record.dump();
}

std::string WithRuntime(const std::string& resources, const std::map<std::string, std::string>& runtime) {
  if (runtime.empty()) return resources;
  nlohmann::json record =
      resources.empty() ? nlohmann::json::object() : nlohmann::json::parse(resources, nullptr, false);
  if (!record.is_object()) record = nlohmann::json::object();
  record["runtime"] = runtime;
  return record.dump();
}

std::map<std::string, std::string> RuntimeOf(const std::string& resources) {
  std::map<std::string, std::string> runtime;
  const nlohmann::json record = nlohmann::json::parse(resources, nullptr, false);
  if (!record.is_object() || !record.contains("runtime") || !record["runtime"].is_object()) return runtime;
  for (const auto& [name, value] : record["runtime"].items()) {
    if (value.is_string()) runtime[name] = value.get<std::string>();
  }
  return runtime;
}

std::string DescribeFusedGroup(const std::vector<std::uint64_t>& group, std::uint64_t trial) {
  std::vector<std::uint64_t> sorted = group;  // in member order, which puts optimizer kinds together
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::string> others;
  for (const std::uint64_t number : sorted) {
    if (number != trial) others.push_back(std::to_string(number));
  }
  if (others.empty()) return "";
  const bool plural = others.size() > 1;
  std::string list = others.back();
  if (others.size() > 1) {
    others.pop_back();
    list = fmt::format("{} and {}", fmt::join(others, ", "), list);
  }
  return fmt::format("trained together with trial{} {} (one process, one array model)", plural ? "s" : "", list);
}

}  // namespace dltune
