#include "store/export.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/strings.h"
#include "dltune/core/error.h"
#include "store/trial_resources.h"

namespace dltune {
nlohmann::json IsoTime(std::optional<double> seconds) {
  if (!seconds) return nullptr;
  const auto whole = static_cast<std::time_t>(std::floor(*seconds));
  const int millis = static_cast<int>(std::lround((*seconds - std::floor(*seconds)) * 1000)) % 1000;
  return fmt::format("{}.{:03d}Z", FormatClockTime(static_cast<double>(whole), "%Y-%m-%dT%H:%M:%S", TimeZone::kUtc),
                     millis);
}

namespace {

nlohmann::json OptionalJson(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}
nlohmann::json OptionalJson(const std::optional<std::int64_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

}  // namespace

ExportFormat ParseExportFormat(const std::string& name) {
  if (name == "csv") return ExportFormat::kCsv;
  if (name == "json") return ExportFormat::kJson;
  if (name == "jsonl") return ExportFormat::kJsonLines;
  throw Error(fmt::format("export format '{}' is not one of csv, json, jsonl", name));
}

std::string ExportedTable::Render(ExportFormat format) const {
  std::ostringstream out;
  if (format == ExportFormat::kJson) {
    out << nlohmann::json(rows).dump(2) << "\n";
    return out.str();
  }
  if (format == ExportFormat::kJsonLines) {
    for (const auto& row : rows) out << row.dump() << "\n";
    return out.str();
  }
  for (std::size_t i = 0; i < columns.size(); ++i) out << (i ? "," : "") << CsvField(columns[i]);
  out << "\n";
  for (const auto& row : rows) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      if (i) out << ",";
      const auto it = row.find(columns[i]);
      if (it == row.end() || it->is_null()) continue;
      out << CsvField(it->is_string() ? it->get<std::string>() : it->dump());
    }
    out << "\n";
  }
  return out.str();
}

ExportedTable ExportTrials(Store& store, const StudyRecord& study) {
  const auto trials = store.ListTrials(study.id);
  ExportedTable table;
  table.columns = {"trial",   "configuration", "replica",    "substudy",    "state",      "reason",   "seed",
                   "retries", "best_step",     "best_value", "final_value", "started_at", "ended_at", "worker"};
  // The GPUs each trial used, in columns of their own when any trial used one.
  std::vector<std::optional<GpuUsage>> gpus;
  gpus.reserve(trials.size());
  for (const auto& trial : trials) gpus.push_back(ParseGpuUsage(trial.resources));
  const bool any_gpu = std::any_of(gpus.begin(), gpus.end(), [](const auto& gpu) { return gpu.has_value(); });
  std::vector<std::vector<std::uint64_t>> groups;
  groups.reserve(trials.size());
  for (const auto& trial : trials) groups.push_back(FusedGroupOf(trial.resources));
  if (std::any_of(groups.begin(), groups.end(), [](const auto& group) { return !group.empty(); })) {
    table.columns.emplace_back("fused_group");
  }
  if (any_gpu) {
    table.columns.insert(table.columns.end(), {"gpu_model", "gpu_uuids", "gpu_driver", "gpu_peak_memory_bytes",
                                               "gpu_mean_utilization_percent", "gpu_trials_at_once"});
  }
  const std::set<std::string> fixed(table.columns.begin(), table.columns.end());
  std::set<std::string> seen;
  std::vector<std::string> params;
  for (const auto& trial : trials) {
    for (const auto& [id, value] : trial.params) {
      if (seen.insert(id).second) params.push_back(id);
    }
  }
  // Params are columns under their ids; an id that collides with a fixed column gets a "param_" prefix.
  auto column_of = [&](const std::string& id) { return fixed.count(id) ? "param_" + id : id; };
  for (const auto& id : params) table.columns.push_back(column_of(id));
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& trial = trials[i];
    nlohmann::json row = {{"trial", trial.number},
                          {"configuration", trial.configuration},
                          {"replica", trial.replica},
                          {"substudy", trial.substudy_label},
                          {"state", TrialStateName(trial.state)},
                          {"reason", trial.reason},
                          {"seed", trial.seed},
                          {"retries", trial.retries},
                          {"best_step", OptionalJson(trial.best_step)},
                          {"best_value", OptionalJson(trial.best_value)},
                          {"final_value", OptionalJson(trial.final_value)},
                          {"started_at", IsoTime(trial.started_at)},
                          {"ended_at", IsoTime(trial.ended_at)},
                          {"worker", trial.worker}};
    if (!groups[i].empty()) row["fused_group"] = fmt::format("{}", fmt::join(groups[i], " "));
    if (const auto& gpu = gpus[i]) {
      row["gpu_model"] = gpu->model;
      row["gpu_uuids"] = fmt::format("{}", fmt::join(gpu->uuids, ","));
      row["gpu_driver"] = gpu->driver;
      row["gpu_peak_memory_bytes"] = OptionalJson(gpu->peak_memory_bytes);
      row["gpu_mean_utilization_percent"] = OptionalJson(gpu->mean_utilization_percent);
      row["gpu_trials_at_once"] = gpu->trials_at_once;
    }
    for (const auto& [id, value] : trial.params) row[column_of(id)] = ValueToJson(value);
    table.rows.push_back(std::move(row));
  }
  return table;
}

ExportedTable ExportMeasurements(Store& store, const StudyRecord& study) {
  ExportedTable table;
  table.columns = {"trial", "step", "split", "metric", "value", "examples"};
  for (const auto& [number, m] : store.StudyTraining(study.id)) {
    {
      const std::pair<const char*, std::optional<double>> values[] = {
          {"loss", m.loss},
          {"learning_rate", m.learning_rate},
          {"grad_norm", m.grad_norm},
          {"clipped", m.clipped ? std::optional<double>(*m.clipped ? 1.0 : 0.0) : std::nullopt},
          {"step_time", m.step_time},
          {"data_wait", m.data_wait},
          {"examples_per_second", m.examples_per_second}};
      for (const auto& [metric, value] : values) {
        if (!value) continue;
        table.rows.push_back({{"trial", number},
                              {"step", m.step},
                              {"split", "train_step"},
                              {"metric", metric},
                              {"value", *value},
                              {"examples", nullptr}});
      }
    }
  }
  for (const auto& [number, e] : store.StudyEvaluations(study.id)) {
    table.rows.push_back({{"trial", number},
                          {"step", e.step},
                          {"split", e.split},
                          {"metric", e.metric},
                          {"value", e.value},
                          {"examples", e.examples}});
  }
  return table;
}

}  // namespace dltune
