#include "gpu/gpu_inventory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>

#include "dltune/core/error.h"

namespace dltune {
namespace {

std::string Trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t") - first + 1);
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    items.push_back(Trim(text.substr(start, comma - start)));
    if (comma == std::string::npos) return items;
    start = comma + 1;
  }
}

std::optional<std::size_t> WholeNumber(const std::string& text) {
  const auto digit = [](char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; };
  if (text.empty() || text.size() > 6 || !std::all_of(text.begin(), text.end(), digit)) return std::nullopt;
  return std::stoul(text);
}

bool IsUuidPrefix(const std::string& text) { return text.starts_with("GPU-") || text.starts_with("MIG-"); }

// The devices whose UUID starts with `prefix`, or whose GPU's does (a GPU in MIG mode stands for its instances);
// empty when no device or more than one GPU or instance matches.
std::vector<GpuDevice> ByUuidPrefix(const std::vector<GpuDevice>& devices, const std::string& prefix) {
  std::set<std::string> named;
  for (const GpuDevice& device : devices) {
    if (device.uuid.starts_with(prefix)) {
      named.insert(device.uuid);
    } else if (!device.parent_uuid.empty() && device.parent_uuid.starts_with(prefix)) {
      named.insert(device.parent_uuid);
    }
  }
  if (named.size() != 1) return {};
  std::vector<GpuDevice> matched;
  for (const GpuDevice& device : devices) {
    if (named.contains(device.uuid) || named.contains(device.parent_uuid)) matched.push_back(device);
  }
  return matched;
}

// The devices an entry of CUDA_VISIBLE_DEVICES names: a GPU by NVML index (with its MIG instances), or by UUID.
std::vector<GpuDevice> NamedByCuda(const std::vector<GpuDevice>& devices, const std::string& entry) {
  if (IsUuidPrefix(entry)) return ByUuidPrefix(devices, entry);
  const auto index = WholeNumber(entry);
  std::vector<GpuDevice> matched;
  if (!index) return matched;
  for (const GpuDevice& device : devices) {
    if (static_cast<std::size_t>(device.index) == *index) matched.push_back(device);
  }
  return matched;
}

// The devices an entry of --gpus names: a position in the visible list, or a UUID.
std::vector<GpuDevice> NamedByOption(const std::vector<GpuDevice>& visible, const std::string& entry) {
  if (IsUuidPrefix(entry)) return ByUuidPrefix(visible, entry);
  const auto position = WholeNumber(entry);
  if (position && *position < visible.size()) return {visible[*position]};
  return {};
}

void AppendNew(std::vector<GpuDevice>& list, const std::vector<GpuDevice>& more) {
  for (const GpuDevice& device : more) {
    const bool seen = std::any_of(list.begin(), list.end(), [&](const GpuDevice& d) { return d.uuid == device.uuid; });
    if (!seen) list.push_back(device);
  }
}

std::vector<GpuDevice> VisibleToCuda(const std::vector<GpuDevice>& devices, const std::string& variable,
                                     std::string& note) {
  std::vector<GpuDevice> visible;
  if (Trim(variable).empty() || Trim(variable) == "-1") {
    note = fmt::format("CUDA_VISIBLE_DEVICES='{}' hides every GPU", variable);
    return visible;
  }
  for (const std::string& entry : SplitList(variable)) {
    const std::vector<GpuDevice> named = NamedByCuda(devices, entry);
    if (named.empty()) {
      note = fmt::format(
          "CUDA_VISIBLE_DEVICES: '{}' names no GPU; it and the entries after it are ignored, as CUDA does", entry);
      break;
    }
    AppendNew(visible, named);
  }
  return visible;
}

std::string VisibleRange(const std::vector<GpuDevice>& visible) {
  if (visible.empty()) return "no GPU is visible";
  if (visible.size() == 1) return "GPU 0 is the only one visible";
  return fmt::format("GPUs 0 to {} are visible", visible.size() - 1);
}

std::vector<GpuDevice> SelectedByOption(const std::vector<GpuDevice>& visible, const std::string& option) {
  std::vector<GpuDevice> selected;
  for (const std::string& entry : SplitList(option)) {
    const std::vector<GpuDevice> named = NamedByOption(visible, entry);
    if (named.empty()) {
      throw Error(
          fmt::format("--gpus {}: '{}' names no visible GPU ({}; give all, none, or a comma list of their "
                      "indices or UUIDs)",
                      option, entry, VisibleRange(visible)));
    }
    AppendNew(selected, named);
  }
  return selected;
}

}  // namespace

GpuInventory SelectGpus(const std::vector<GpuDevice>& devices, const std::optional<std::string>& cuda_visible_devices,
                        const std::string& gpus_option) {
  GpuInventory inventory;
  const std::vector<GpuDevice> visible =
      cuda_visible_devices ? VisibleToCuda(devices, *cuda_visible_devices, inventory.note) : devices;
  const std::string option = Trim(gpus_option);
  if (option == "none") {
    inventory.note = "--gpus none";
    return inventory;
  }
  inventory.gpus = option.empty() || option == "all" ? visible : SelectedByOption(visible, option);
  if (inventory.gpus.empty() && inventory.note.empty()) inventory.note = "NVML lists no GPU";
  return inventory;
}

GpuInventory FindGpus(Nvml& nvml, const std::string& gpus_option) {
  const char* variable = std::getenv("CUDA_VISIBLE_DEVICES");
  const std::optional<std::string> cuda_visible_devices =
      variable != nullptr ? std::optional<std::string>(variable) : std::nullopt;
  if (!nvml.available()) {
    const std::string why = "no NVIDIA driver: " + nvml.unavailable_reason();
    try {
      GpuInventory inventory = SelectGpus({}, cuda_visible_devices, gpus_option);
      inventory.note = why;
      return inventory;
    } catch (const Error& e) {
      throw Error(fmt::format("{}; {}", e.what(), why));
    }
  }
  GpuInventory inventory = SelectGpus(nvml.Devices(), cuda_visible_devices, gpus_option);
  inventory.driver_version = nvml.DriverVersion();
  return inventory;
}

}  // namespace dltune
