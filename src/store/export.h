// A study's records as a table for other tools (`dltune export`): CSV, a JSON array or JSON lines.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/store/store.h"

namespace dltune {

enum class ExportFormat { kCsv, kJson, kJsonLines };

// "csv", "json" or "jsonl"; throws Error for anything else.
ExportFormat ParseExportFormat(const std::string& name);

// Rows as (column -> JSON value) in a fixed column order.
struct ExportedTable {
  std::vector<std::string> columns;
  std::vector<nlohmann::json> rows;  // objects; a column a row lacks, or null, is an empty CSV field

  // The table as CSV (a header line, then one line per row), a JSON array of objects, or one object per line.
  std::string Render(ExportFormat format) const;
};

// ISO 8601 in UTC with milliseconds, as exports write times: "2026-11-22T07:01:47.046Z"; null for none.
nlohmann::json IsoTime(std::optional<double> seconds);

// One row per trial: trial, substudy, state, reason, seed, retries, best_step, best_value, final_value, started_at,
// ended_at (ISO 8601 UTC), worker, then each param under its id ("param_<id>" when the id is one of those).
ExportedTable ExportTrials(Store& store, const StudyRecord& study);

// Tidy form: one row per (trial, step, split, metric) with its value and examples; the training measurements have
// split "train_step".
ExportedTable ExportMeasurements(Store& store, const StudyRecord& study);

}  // namespace dltune
