// What the live dashboard (`dltune serve`) shows, as JSON documents built from the store: the studies table, one
// study (tracking record, diagnostics, charts, trials), one trial. The HTTP server only routes requests to these;
// the page (web/dashboard.js) renders them. Every user-written string is a JSON string value, never markup: the page
// inserts them as text. Each function reads the store once per call; not thread-safe (one Store per thread).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/store/store.h"

namespace dltune {

// {"store": URL, "studies": [{"name", "description", "spec_path", "trials", "states": {state: count}, "best":
//  {"value", "trial", "step"} | null, "objective", "updated_at"}]}
nlohmann::json StudiesJson(Store& store);

// The study page comes in two parts, so that the page shows what the trial records alone tell while the
// measurements (of a 10,000-trial study: half a million rows) are read and analysed.
enum class StudyPart {
  // {"name", "description", "goal", "parent", "procedure", "children": [name], "notes": [{"kind", "adopt", "text",
  //  "author", "created_at"}], "launches": [{"id", "trial", "step", "metrics", "reason", "author", "git_commit",
  //  "export_path", "created_at"}], "test_evaluations", "replicas", "spec_path", "spec_hash", "dltune_version",
  //  "git_commit", "git_dirty", "created_at", "updated_at", "objective", "direction", "max_train_steps", "states",
  //  "best", "best_per_substudy": [{"value", "trial", "substudy", "step", "text", and with replicas "replicas",
  //  "low", "high"}], "sections": [PageSectionJson] (study_page.h: trial variance, against the parent, isolation,
  //  axis plots, best steps, have we sampled enough?), "trials": [{"number", "configuration", "replica", "substudy",
  //  "state", "best", "best_step", "final", "reason", "params": {name: value}}]}.
  kRecords,
  // {"updated_at", "diagnostics": [{"id", "severity", "title", "detail", "suggestion", "section", "substudy"}],
  //  "sections": [...] (training curves, gradient norms)}.
  kMeasurements,
};
// Throws Error for an unknown study.
nlohmann::json StudyJson(Store& store, const std::string& name, StudyPart part);

// StudyJson documents, serialized, kept while their study does not change: a finished study of 10,000 trials is
// built once, not on every poll of the page. A study is cached only once its last write (StudyRecord::updated_at,
// which every write of the store moves) is a few seconds old, so a write in the same clock tick as a read can never
// leave a stale page behind; running studies are rebuilt on each request. Not thread-safe.
class StudyJsonCache {
 public:
  // A part of the study's page; throws Error for an unknown study.
  std::string Get(Store& store, const std::string& name, StudyPart part);

 private:
  struct Entry {
    double updated_at = 0;
    std::string body;
  };
  std::map<std::pair<std::string, StudyPart>, Entry> entries_;
};

// {"study", "number", "substudy", "state", "reason", "worker", "retries", "started_at", "ended_at", "best",
//  "best_step", "final", "exit_status", "stderr_tail", "params", "checkpoints": [{"step", "path", "objective",
//  "pool", "deleted"}], "profile_trace": {"path", "steps", "bytes"} | null (the trial's profile trace, when the file
//  exists: TrialProfileTrace), "sections": [...] (the trial's training curves and gradient norms)}. Throws Error for
// an unknown study or trial.
nlohmann::json TrialJson(Store& store, const std::string& name, std::uint64_t number);

// The trial's profile trace file (training.profile_steps), found from its checkpoints (FindProfileTrace in
// html_report.h), for the dashboard to serve; nullopt when it has none. Throws Error for an unknown study or trial.
std::optional<std::filesystem::path> TrialProfileTrace(Store& store, const std::string& name, std::uint64_t number);

// A file the dashboard serves.
struct WebAsset {
  std::string url_name;  // "/assets/<url_name>"; the page itself is "index.html"
  std::filesystem::path path;
  std::string content_type;
};

// Every file the dashboard serves — its page, script and style (web/dashboard.*) and the vega builds — found where
// the report finds its libraries (FindWebDir, html_report.h). Throws Error naming what is missing.
std::vector<WebAsset> DashboardAssets();

}  // namespace dltune
