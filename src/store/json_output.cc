#include "store/json_output.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "core/reproduction.h"
#include "dltune/core/error.h"
#include "store/tracking.h"

namespace dltune {
namespace {

nlohmann::json Optional(const std::optional<double>& value) { return value ? nlohmann::json(*value) : nullptr; }
nlohmann::json Optional(const std::optional<std::int64_t>& value) { return value ? nlohmann::json(*value) : nullptr; }
nlohmann::json Optional(const std::optional<bool>& value) { return value ? nlohmann::json(*value) : nullptr; }

constexpr TrialState kStates[] = {TrialState::kPending,    TrialState::kRunning, TrialState::kCompleted,
                                  TrialState::kInfeasible, TrialState::kFailed,  TrialState::kStopped};

nlohmann::json StudyRow(Store& store, const StudyRecord& study, const StudySummary& summary) {
  nlohmann::json row = {{"study", study.name},
                        {"uid", study.uid},
                        {"parent", study.parent.empty() ? nlohmann::json() : nlohmann::json(study.parent)},
                        {"description", study.description},
                        {"goal", summary.goal},
                        {"spec_path", study.spec_path},
                        {"spec_hash", study.spec_hash},
                        {"created_at", IsoTime(study.created_at)},
                        {"updated_at", IsoTime(study.updated_at)},
                        {"dltune_version", study.dltune_version},
                        {"git_commit", study.git_commit},
                        {"git_dirty", Optional(study.git_dirty)},
                        {"trials", summary.trial_count}};
  for (const TrialState state : kStates) row[TrialStateName(state)] = summary.Count(state);
  row["objective"] = summary.objective.Name();
  row["direction"] = DirectionName(summary.objective.direction);
  const auto& best = summary.best;
  row["best_value"] = best ? nlohmann::json(best->value) : nullptr;
  row["best_trial"] = best ? nlohmann::json(best->number) : nullptr;
  row["best_step"] = best ? Optional(best->step) : nullptr;
  row["best_substudy"] = best ? nlohmann::json(best->substudy_label) : nullptr;
  row["best_replicas"] = best && best->stats ? nlohmann::json(best->stats->n) : nullptr;
  row["best_low"] = best && best->stats ? Optional(best->stats->low) : nullptr;
  row["best_high"] = best && best->stats ? Optional(best->stats->high) : nullptr;
  const auto notes = store.ListNotes(study.id);
  row["latest_note"] = notes.empty() ? nlohmann::json() : nlohmann::json(notes.back().text);
  row["latest_note_kind"] = notes.empty() ? nlohmann::json() : nlohmann::json(NoteKindName(notes.back().kind));
  row["reproduce"] = summary.reproduce;
  return row;
}

std::vector<std::string> StudyColumns() {
  std::vector<std::string> columns = {"study",      "uid",       "parent",     "description", "goal",
                                      "spec_path",  "spec_hash", "created_at", "updated_at",  "dltune_version",
                                      "git_commit", "git_dirty", "trials"};
  for (const TrialState state : kStates) columns.push_back(TrialStateName(state));
  columns.insert(columns.end(),
                 {"objective", "direction", "best_value", "best_trial", "best_step", "best_substudy", "best_replicas",
                  "best_low", "best_high", "latest_note", "latest_note_kind", "reproduce"});
  return columns;
}

}  // namespace

ExportedTable StudiesTable(Store& store) {
  ExportedTable table;
  table.columns = StudyColumns();
  for (const StudyRecord& study : store.ListStudies()) {
    table.rows.push_back(StudyRow(store, study, SummarizeStudy(store, study)));
  }
  return table;
}

nlohmann::json StudyJson(Store& store, const StudyRecord& study) {
  const StudySummary summary = SummarizeStudy(store, study);
  nlohmann::json out = {{"study", StudyRow(store, study, summary)},
                        {"best_per_substudy", nlohmann::json::array()},
                        {"trials", ExportTrials(store, study).rows},
                        {"reproduction", ParseRecord(study.reproduction)}};
  for (const BestTrial& best : summary.best_per_substudy) {
    out["best_per_substudy"].push_back({{"substudy", best.substudy_label},
                                        {"trial", best.number},
                                        {"value", best.value},
                                        {"step", Optional(best.step)},
                                        {"replicas", best.stats ? nlohmann::json(best.stats->n) : nullptr},
                                        {"low", best.stats ? Optional(best.stats->low) : nullptr},
                                        {"high", best.stats ? Optional(best.stats->high) : nullptr}});
  }
  return out;
}

nlohmann::json TrialJson(Store& store, const StudyRecord& study, std::uint64_t number) {
  const auto trial = store.FindTrial(study.id, number);
  if (!trial) throw Error(fmt::format("study '{}' has no trial {}", study.name, number), ErrorKind::kInvalidInput);
  nlohmann::json row;
  for (const auto& exported : ExportTrials(store, study).rows) {
    if (exported["trial"] == number) row = exported;
  }
  nlohmann::json params = nlohmann::json::object();
  for (const auto& [id, value] : trial->params) params[id] = ValueToJson(value);
  row["params"] = params;
  row["time_split"] = trial->time_split;
  row["resources"] = nlohmann::json::parse(trial->resources, nullptr, false);
  row["runtime_differences"] = RuntimeDifferences(
      ParseRecord(study.reproduction),
      row["resources"].is_object() ? row["resources"].value("runtime", nlohmann::json()) : nlohmann::json());
  nlohmann::json out = {{"trial", row},
                        {"train", nlohmann::json::array()},
                        {"evals", nlohmann::json::array()},
                        {"checkpoints", nlohmann::json::array()}};
  for (const TrainMeasurement& m : store.TrainSeries(trial->id)) {
    out["train"].push_back({{"step", m.step},
                            {"loss", Optional(m.loss)},
                            {"learning_rate", Optional(m.learning_rate)},
                            {"grad_norm", Optional(m.grad_norm)},
                            {"clipped", Optional(m.clipped)},
                            {"step_time", Optional(m.step_time)},
                            {"data_wait", Optional(m.data_wait)},
                            {"examples_per_second", Optional(m.examples_per_second)}});
  }
  for (const EvalMeasurement& e : store.EvalSeries(trial->id)) {
    out["evals"].push_back(
        {{"step", e.step}, {"split", e.split}, {"metric", e.metric}, {"value", e.value}, {"examples", e.examples}});
  }
  for (const CheckpointRecord& c : store.ListCheckpoints(trial->id)) {
    out["checkpoints"].push_back({{"step", c.step},
                                  {"path", c.path},
                                  {"objective", Optional(c.objective)},
                                  {"checksum", c.checksum},
                                  {"pool", CheckpointPoolName(c.pool)},
                                  {"deleted", c.deleted},
                                  {"created_at", IsoTime(c.created_at)}});
  }
  return out;
}

ExportedTable LaunchesExport(const std::vector<LaunchRecord>& launches,
                             const std::vector<std::pair<std::string, CheckpointEvaluation>>& evaluations) {
  ExportedTable table;
  table.columns = {"look",     "id",    "created_at", "author",     "study",     "trial", "step",   "checkpoint",
                   "checksum", "split", "examples",   "git_commit", "git_dirty", "model", "reason", "decision_id"};
  std::vector<std::pair<double, nlohmann::json>> rows;
  std::set<std::string> metrics;
  auto look = [&](const CheckpointEvaluation& e, const std::string& kind, std::int64_t id, const std::string& study) {
    nlohmann::json row = {{"look", kind},
                          {"id", id},
                          {"created_at", IsoTime(e.created_at)},
                          {"study", study},
                          {"trial", e.trial},
                          {"step", e.step},
                          {"checkpoint", e.checkpoint_path},
                          {"checksum", e.checksum},
                          {"split", e.split},
                          {"examples", e.examples}};
    for (const auto& [metric, value] : e.metrics) {
      row["metric_" + metric] = value;
      metrics.insert(metric);
    }
    return row;
  };
  for (const LaunchRecord& l : launches) {
    nlohmann::json row = look(l.evaluation, "launch", l.id, l.study);
    row["author"] = l.author;
    row["git_commit"] = l.git_commit;
    row["git_dirty"] = Optional(l.git_dirty);
    row["model"] = l.export_path;
    row["reason"] = l.reason;
    row["decision_id"] = Optional(l.decision);
    rows.emplace_back(l.created_at, std::move(row));
  }
  for (const auto& [study, e] : evaluations) {
    nlohmann::json row = look(e, "evaluation", e.id, study);
    for (const char* absent : {"author", "git_commit", "git_dirty", "model", "reason", "decision_id"}) {
      row[absent] = nullptr;
    }
    rows.emplace_back(e.created_at, std::move(row));
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const std::string& metric : metrics) table.columns.push_back("metric_" + metric);
  for (auto& [when, row] : rows) table.rows.push_back(std::move(row));
  return table;
}

OutputFormat ParseOutputFormat(const std::string& name, const std::string& command, bool tabular) {
  if (name == "text") return OutputFormat::kText;
  if (name == "json") return OutputFormat::kJson;
  if (name == "csv" && tabular) return OutputFormat::kCsv;
  throw Error(fmt::format("{} --format {}: choose {}", command, name, tabular ? "text, json or csv" : "text or json"),
              ErrorKind::kInvalidInput);
}

}  // namespace dltune
