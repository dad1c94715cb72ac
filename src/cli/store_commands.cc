// `dltune studies`, `dltune show` and `dltune export`: the store's tracking record, for people and spreadsheets.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <set>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "dltune/core/strings.h"
#include "dltune/store/tracking.h"
#include "text_table.h"

namespace dltune::cli {
namespace {

std::string FormatTime(std::optional<double> seconds) {
  return seconds ? FormatClockTime(*seconds, "%Y-%m-%d %H:%M:%S", TimeZone::kLocal) : "-";
}

// ISO 8601 in UTC with milliseconds, for exports: "2026-11-22T07:01:47.046Z".
nlohmann::json IsoTime(std::optional<double> seconds) {
  if (!seconds) return nullptr;
  const auto whole = static_cast<std::time_t>(std::floor(*seconds));
  const int millis = static_cast<int>(std::lround((*seconds - std::floor(*seconds)) * 1000)) % 1000;
  return fmt::format("{}.{:03d}Z", FormatClockTime(static_cast<double>(whole), "%Y-%m-%dT%H:%M:%S", TimeZone::kUtc),
                     millis);
}

std::string FormatNumber(std::optional<double> value) { return value ? fmt::format("{:.6g}", *value) : "-"; }

std::string BestText(const std::optional<BestTrial>& best) {
  if (!best) return "-";
  return fmt::format("{:.6g} (trial {}{})", best->value, best->number,
                     best->step ? fmt::format(", step {}", *best->step) : std::string());
}

}  // namespace

std::string TrackingTable(Store& store, const std::vector<StudyRecord>& studies) {
  TextTable table({"study", "description", "spec", "trials", "best", "reproduce with"});
  for (const auto& study : studies) {
    const StudySummary summary = SummarizeStudy(study, store.ListTrials(study.id));
    table.AddRow({study.name, study.description, study.spec_path, summary.StateText(),
                  summary.best ? fmt::format("{} {}", summary.objective.metric, BestText(summary.best)) : "-",
                  summary.reproduce});
  }
  return table.Render();
}

void AddStorageOption(CLI::App* command, std::string& storage) {
  command->add_option("--storage", storage,
                      "Store URL: sqlite:///path/file.db or postgresql://user@host:port/db "
                      "(default: $DLTUNE_STORAGE, else ./dltune.db)");
}

namespace {

std::unique_ptr<Store> OpenForReading(const std::string& storage) {
  return OpenStore(storage.empty() ? DefaultStoreUrl() : storage, /*create_if_missing=*/false);
}

void PrintStudies(Store& store) {
  const auto studies = store.ListStudies();
  if (studies.empty()) {
    std::printf("%s has no studies yet\n", store.url().c_str());
    return;
  }
  std::fputs(TrackingTable(store, studies).c_str(), stdout);
}

void PrintStudy(Store& store, const StudyRecord& study) {
  const auto trials = store.ListTrials(study.id);
  const StudySummary summary = SummarizeStudy(study, trials);
  std::string out = fmt::format("study {}", study.name);
  if (!study.description.empty()) out += ": " + study.description;
  out += "\n\n";
  TextTable facts({"", ""});
  facts.AddRow({"spec", fmt::format("{} (sha256 {})", study.spec_path, study.spec_hash.substr(0, 12))});
  facts.AddRow({"created", fmt::format("{} by dltune {}{}", FormatTime(study.created_at), study.dltune_version,
                                       study.git_commit.empty() ? "" : ", user's commit " + study.git_commit)});
  facts.AddRow({"updated", FormatTime(study.updated_at)});
  facts.AddRow({"objective", DirectionName(summary.objective.direction) + " " + summary.objective.metric});
  facts.AddRow({"trials", summary.StateText()});
  facts.AddRow({"best", BestText(summary.best)});
  for (const auto& best : summary.best_per_substudy) facts.AddRow({"  " + best.substudy_label, BestText(best)});
  facts.AddRow({"reproduce with", summary.reproduce});
  const std::string rendered = facts.Render(2);
  out += rendered.substr(rendered.find('\n') + 1);

  // One row per trial; params that differ between trials as columns (ids), absent ones as "-"; the others once.
  std::map<std::string, std::vector<Value>> values_by_id;
  std::vector<std::string> param_ids;
  for (const auto& trial : trials) {
    for (const auto& entry : trial.params) {
      auto& values = values_by_id[entry.first];
      if (values.empty()) param_ids.push_back(entry.first);
      if (std::none_of(values.begin(), values.end(), [&](const Value& v) { return SameValue(v, entry.second); })) {
        values.push_back(entry.second);
      }
    }
  }
  std::string constant;
  std::erase_if(param_ids, [&](const std::string& id) {
    const auto& values = values_by_id[id];
    if (values.size() != 1) return false;
    constant += (constant.empty() ? "" : ", ") + id + "=" + FormatValue(values.front());
    return true;
  });
  std::vector<std::string> header = {"trial", "sub-study", "state", "best", "best step", "final"};
  header.insert(header.end(), param_ids.begin(), param_ids.end());
  TextTable table(header);
  for (const auto& trial : trials) {
    std::vector<std::string> row = {fmt::format("{}", trial.number),
                                    trial.substudy_label,
                                    TrialStateName(trial.state),
                                    FormatNumber(trial.best_value),
                                    trial.best_step ? fmt::format("{}", *trial.best_step) : "-",
                                    FormatNumber(trial.final_value)};
    for (const auto& id : param_ids) {
      const auto it = trial.params.find(id);
      if (it == trial.params.end()) {
        row.emplace_back("-");
      } else if (const auto* real = std::get_if<double>(&it->second)) {
        row.push_back(fmt::format("{:.4g}", *real));
      } else {
        row.push_back(FormatValue(it->second));
      }
    }
    table.AddRow(std::move(row));
  }
  out += "\n" + table.Render(2);
  if (!constant.empty()) out += "\n  the same in every trial: " + constant + "\n";
  std::fputs(out.c_str(), stdout);
}

void PrintTrial(Store& store, const StudyRecord& study, std::uint64_t number) {
  const auto trial = store.FindTrial(study.id, number);
  if (!trial) {
    throw Error(fmt::format("{}: study '{}' has no trial {} (it has {})", store.url(), study.name, number,
                            store.ListTrials(study.id).size()));
  }
  std::string out = fmt::format("trial {} of study {} ({})\n\n", trial->number, study.name, trial->substudy_label);
  TextTable facts({"", ""});
  facts.AddRow({"state", TrialStateName(trial->state) + (trial->reason.empty() ? "" : ": " + trial->reason)});
  facts.AddRow({"worker", trial->worker.empty() ? "-" : trial->worker});
  facts.AddRow({"started", FormatTime(trial->started_at)});
  facts.AddRow({"ended", FormatTime(trial->ended_at)});
  facts.AddRow({"last heartbeat", FormatTime(trial->heartbeat_at)});
  facts.AddRow({"retries", fmt::format("{}", trial->retries)});
  facts.AddRow({"seed", fmt::format("{}", trial->seed)});
  facts.AddRow({"best", trial->best_value
                            ? fmt::format("{:.6g} at step {}", *trial->best_value, trial->best_step.value_or(-1))
                            : "-"});
  facts.AddRow({"final", FormatNumber(trial->final_value)});
  if (trial->exit_status) facts.AddRow({"exit status", fmt::format("{}", *trial->exit_status)});
  for (const auto& [id, value] : trial->params) facts.AddRow({"param " + id, FormatValue(value)});
  const std::string rendered = facts.Render(2);
  out += rendered.substr(rendered.find('\n') + 1);

  const auto train = store.TrainSeries(trial->id);
  const auto evals = store.EvalSeries(trial->id);
  out += fmt::format("\nmeasurements: {} training step{} recorded{}, {} evaluation values\n", train.size(),
                     train.size() == 1 ? "" : "s",
                     train.empty() ? "" : fmt::format(" (steps {}-{})", train.front().step, train.back().step),
                     evals.size());
  if (!evals.empty()) {
    const std::int64_t last_step = evals.back().step;
    TextTable last({"split", "metric", "value", "examples"});
    for (const auto& e : evals) {
      if (e.step == last_step)
        last.AddRow({e.split, e.metric, fmt::format("{:.6g}", e.value), fmt::format("{}", e.examples)});
    }
    out += fmt::format("last evaluation, at step {}:\n", last_step) + last.Render(2);
  }
  const auto checkpoints = store.ListCheckpoints(trial->id);
  if (!checkpoints.empty()) {
    TextTable table({"step", "pool", "objective", "path", "state"});
    for (const auto& c : checkpoints) {
      table.AddRow({fmt::format("{}", c.step), CheckpointPoolName(c.pool), FormatNumber(c.objective), c.path,
                    c.deleted ? "deleted" : "kept"});
    }
    out += "\ncheckpoints:\n" + table.Render(2);
  }
  if (!trial->stderr_tail.empty()) out += "\nend of stderr:\n" + trial->stderr_tail + "\n";
  std::fputs(out.c_str(), stdout);
}

// --- export ---------------------------------------------------------------------------------------------------

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

nlohmann::json OptionalJson(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}
nlohmann::json OptionalJson(const std::optional<std::int64_t>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json();
}

// Rows as (column -> JSON value) in a fixed column order, written as CSV, a JSON array or JSON lines.
struct Table {
  std::vector<std::string> columns;
  std::vector<nlohmann::json> rows;  // objects
};

void WriteTable(const Table& table, const std::string& format, std::ostream& out) {
  if (format == "json") {
    out << nlohmann::json(table.rows).dump(2) << "\n";
    return;
  }
  if (format == "jsonl") {
    for (const auto& row : table.rows) out << row.dump() << "\n";
    return;
  }
  for (std::size_t i = 0; i < table.columns.size(); ++i) out << (i ? "," : "") << CsvField(table.columns[i]);
  out << "\n";
  for (const auto& row : table.rows) {
    for (std::size_t i = 0; i < table.columns.size(); ++i) {
      if (i) out << ",";
      const auto it = row.find(table.columns[i]);
      if (it == row.end() || it->is_null()) continue;
      out << CsvField(it->is_string() ? it->get<std::string>() : it->dump());
    }
    out << "\n";
  }
}

Table TrialsTable(Store& store, const StudyRecord& study) {
  const auto trials = store.ListTrials(study.id);
  Table table;
  table.columns = {"trial",     "substudy",   "state",       "reason",     "seed",     "retries",
                   "best_step", "best_value", "final_value", "started_at", "ended_at", "worker"};
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
  for (const auto& trial : trials) {
    nlohmann::json row = {{"trial", trial.number},
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
    for (const auto& [id, value] : trial.params) row[column_of(id)] = ValueToJson(value);
    table.rows.push_back(std::move(row));
  }
  return table;
}

// Tidy form: one row per (trial, step, split, metric); training measurements have split "train_step".
Table MeasurementsTable(Store& store, const StudyRecord& study) {
  Table table;
  table.columns = {"trial", "step", "split", "metric", "value", "examples"};
  for (const auto& trial : store.ListTrials(study.id)) {
    for (const auto& m : store.TrainSeries(trial.id)) {
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
        table.rows.push_back({{"trial", trial.number},
                              {"step", m.step},
                              {"split", "train_step"},
                              {"metric", metric},
                              {"value", *value},
                              {"examples", nullptr}});
      }
    }
    for (const auto& e : store.EvalSeries(trial.id)) {
      table.rows.push_back({{"trial", trial.number},
                            {"step", e.step},
                            {"split", e.split},
                            {"metric", e.metric},
                            {"value", e.value},
                            {"examples", e.examples}});
    }
  }
  return table;
}

}  // namespace

void RegisterStoreCommands(CLI::App& app) {
  auto storage = std::make_shared<std::string>();

  auto* studies = app.add_subcommand(
      "studies",
      "The tracking table of every study in the store: description, spec, trials by state, best objective (with its "
      "trial and step) and the command that reproduces it.\n\nExample:\n  dltune studies --storage "
      "sqlite:///runs/dltune.db");
  AddStorageOption(studies, *storage);
  studies->callback([storage] { PrintStudies(*OpenForReading(*storage)); });

  struct ShowArgs {
    std::string study;
    std::optional<std::uint64_t> trial;
  };
  auto show_args = std::make_shared<ShowArgs>();
  auto* show =
      app.add_subcommand("show",
                         "A study's record and its trials, or one trial's details, measurements and checkpoints.\n\n"
                         "Examples:\n  dltune show quickstart\n  dltune show quickstart 3");
  show->add_option("STUDY", show_args->study, "Study name")->required();
  show->add_option("TRIAL", show_args->trial, "Trial number");
  AddStorageOption(show, *storage);
  show->callback([storage, show_args] {
    auto store = OpenForReading(*storage);
    const StudyRecord study = RequireStudy(*store, show_args->study);
    if (show_args->trial) {
      PrintTrial(*store, study, *show_args->trial);
    } else {
      PrintStudy(*store, study);
    }
  });

  struct ExportArgs {
    std::string study;
    std::string format = "csv";
    std::string what = "trials";
    std::string output;
  };
  auto export_args = std::make_shared<ExportArgs>();
  auto* exporter = app.add_subcommand(
      "export",
      "A study's records for a spreadsheet or pandas: one row per trial with params as columns (--what trials), or "
      "every measurement in tidy form (--what measurements).\n\n"
      "Example:\n  dltune export quickstart --format csv -o quickstart.csv");
  exporter->add_option("STUDY", export_args->study, "Study name")->required();
  exporter->add_option("--format", export_args->format, "csv, json or jsonl (default: csv)")
      ->check(CLI::IsMember({"csv", "json", "jsonl"}));
  exporter->add_option("--what", export_args->what, "trials or measurements (default: trials)")
      ->check(CLI::IsMember({"trials", "measurements"}));
  exporter->add_option("-o,--output", export_args->output, "Write to this file instead of standard output");
  AddStorageOption(exporter, *storage);
  exporter->callback([storage, export_args] {
    auto store = OpenForReading(*storage);
    const StudyRecord study = RequireStudy(*store, export_args->study);
    const Table table = export_args->what == "trials" ? TrialsTable(*store, study) : MeasurementsTable(*store, study);
    if (export_args->output.empty()) {
      WriteTable(table, export_args->format, std::cout);
      return;
    }
    std::ofstream out(export_args->output);
    if (!out) throw Error(fmt::format("{}: cannot write the export", export_args->output));
    WriteTable(table, export_args->format, out);
    out.close();
    if (!out) throw Error(fmt::format("{}: writing the export failed", export_args->output));
    std::fprintf(stderr, "wrote %zu %s of study %s to %s\n", table.rows.size(), export_args->what.c_str(),
                 study.name.c_str(), export_args->output.c_str());
  });
}

}  // namespace dltune::cli
