#include "run/warm_programs.h"

#include <sys/stat.h>

#include <cstdint>
#include <optional>

#include "dltune/core/error.h"
#include "gpu/machine_cache.h"

namespace dltune {
namespace {

MachineCache WarmProgramsCache() {
  return {.file = MachineCacheDirectory() / "warm-programs.json", .version = 1, .section = "programs"};
}

// A file's size and modification time (in ns), as one JSON object; nullopt when it is not a regular file.
std::optional<nlohmann::json> FileStamp(const std::filesystem::path& file) {
  struct stat status {};
  if (::stat(file.c_str(), &status) != 0 || !S_ISREG(status.st_mode)) return std::nullopt;
  const std::int64_t mtime_ns =
      static_cast<std::int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 + status.st_mtim.tv_nsec;
  return nlohmann::json{{"size", static_cast<std::int64_t>(status.st_size)}, {"mtime_ns", mtime_ns}};
}

}  // namespace

nlohmann::json WarmProgramKey(const std::string& command, const std::filesystem::path& working_dir,
                              const std::map<std::string, std::string>& load_environment) {
  std::error_code error;
  const std::filesystem::path directory = working_dir.empty() ? std::filesystem::current_path(error) : working_dir;
  return {{"command", command},
          {"working_dir", std::filesystem::absolute(directory, error).lexically_normal().string()},
          {"load_environment", load_environment}};
}

std::optional<WarmMode> KnownWarmMode(const nlohmann::json& key) {
  const auto entry = WarmProgramsCache().Entry(MachineCache::EntryName(key));
  if (!entry || !entry->value("serves", false) || !entry->contains("program") || !(*entry)["program"].is_string()) {
    return std::nullopt;
  }
  const auto stamp = FileStamp((*entry)["program"].get<std::string>());
  if (!stamp || entry->value("file", nlohmann::json()) != *stamp) return std::nullopt;
  return entry->value("reuse_process", false) ? WarmMode::kInProcess : WarmMode::kForked;
}

void RememberServesWarm(const nlohmann::json& key, const std::filesystem::path& program, WarmMode mode) {
  const auto stamp = FileStamp(program);
  if (!stamp) return;  // a program read from -c code or standard input: nothing tells that it is still the same
  try {
    WarmProgramsCache().Store(MachineCache::EntryName(key), {{"serves", true},
                                                             {"program", program.string()},
                                                             {"file", *stamp},
                                                             {"reuse_process", mode == WarmMode::kInProcess},
                                                             {"key", key}});
  } catch (const Error&) {
  }
}

void ForgetServesWarm(const nlohmann::json& key) {
  try {
    WarmProgramsCache().Store(MachineCache::EntryName(key), {{"serves", false}, {"key", key}});
  } catch (const Error&) {
  }
}

}  // namespace dltune
