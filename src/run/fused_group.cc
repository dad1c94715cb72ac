#include "run/fused_group.h"

#include <algorithm>
#include <charconv>

#include <nlohmann/json.hpp>

#include "dltune/core/training_settings.h"
#include "dltune/run/study_session.h"
#include "dltune/workloads/train.h"

namespace dltune {

std::size_t FuseLimit(const StudySpec& spec, std::size_t auto_limit) {
  const std::string& fuse = spec.training.fuse;
  if (fuse.empty() || fuse == "off" || !spec.command.empty() || spec.training.processes > 1) return 0;
  if (!FusibleWorkload(spec.workload.name)) return 0;
  if (fuse == "auto" || fuse == "chosen") return auto_limit >= 2 ? auto_limit : 0;
  std::size_t limit = 0;
  const auto [end, error] = std::from_chars(fuse.data(), fuse.data() + fuse.size(), limit);
  return error == std::errc() && end == fuse.data() + fuse.size() && limit >= 2 ? limit : 0;
}

std::string FusionKey(const std::map<std::string, Value>& params_by_name) {
  nlohmann::json key = nlohmann::json::object();
  for (const auto& [name, value] : params_by_name) {
    if (!FusibleHyperparameters().contains(name)) key[name] = ValueToJson(value);
  }
  return key.dump();
}

std::vector<std::size_t> SubstudiesToFuse(const StudySpec& spec, const std::vector<TrialRecord>& pending,
                                          const std::string& key, std::size_t except) {
  std::vector<std::size_t> substudies;
  for (const TrialRecord& trial : pending) {
    if (trial.substudy == except ||
        std::find(substudies.begin(), substudies.end(), trial.substudy) != substudies.end()) {
      continue;
    }
    if (FusionKey(ParamsByName(*spec.space, trial.params)) == key) substudies.push_back(trial.substudy);
  }
  return substudies;
}

std::string OptimizerKindOf(const std::map<std::string, Value>& params_by_name) {
  const auto it = params_by_name.find("optimizer");
  return it == params_by_name.end() ? "sgd" : FormatValue(it->second);
}

std::vector<std::string> GroupReportSplitter::Split(std::string_view bytes) {
  partial_.append(bytes);
  std::vector<std::string> lines(members_);
  std::size_t start = 0;
  for (std::size_t end = partial_.find('\n'); end != std::string::npos; end = partial_.find('\n', start)) {
    const std::string_view line(partial_.data() + start, end - start + 1);
    start = end + 1;
    const std::size_t tab = line.find('\t');
    std::size_t member = 0;
    const auto [after, error] =
        std::from_chars(line.data(), line.data() + (tab == std::string_view::npos ? 0 : tab), member);
    if (tab == std::string_view::npos || error != std::errc() || after != line.data() + tab || member >= members_) {
      lines[0].append(line);
      continue;
    }
    lines[member].append(line.substr(tab + 1));
  }
  partial_.erase(0, start);
  return lines;
}

}  // namespace dltune
