// What `dltune studies`, `show` and `launches` print for scripts (--format json or csv): stable field names,
// documented in docs/json-output.md. Times are ISO 8601 UTC, as `dltune export` writes them.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/store/store.h"
#include "store/export.h"

namespace dltune {

// One row per study, in creation order: its record, trials by state, its objective and best trial.
ExportedTable StudiesTable(Store& store);

// A study as `dltune show STUDY --format json`: {"study": its StudiesTable row, "best_per_substudy": [...],
// "trials": its ExportTrials rows}.
nlohmann::json StudyJson(Store& store, const StudyRecord& study);

// One trial as `dltune show STUDY TRIAL --format json`: {"trial": its ExportTrials row plus params, time_split and
// resources, "train": [...], "evals": [...], "checkpoints": [...]}. Throws Error for a trial the study lacks.
nlohmann::json TrialJson(Store& store, const StudyRecord& study, std::uint64_t number);

// The looks at the test set as `dltune launches` lists them, one row each: launches, then test evaluations that
// launched nothing (each with its study's name).
ExportedTable LaunchesExport(const std::vector<LaunchRecord>& launches,
                             const std::vector<std::pair<std::string, CheckpointEvaluation>>& evaluations);

// The --format option's values, for commands that print a person's text by default: "text", "json" or "csv";
// throws Error (invalid input) naming `command` for "csv" where the output is not a table.
enum class OutputFormat { kText, kJson, kCsv };
OutputFormat ParseOutputFormat(const std::string& name, const std::string& command, bool tabular);

}  // namespace dltune
