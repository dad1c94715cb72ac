// The study report: one self-contained HTML file with the study's tracking record, the playbook checklist's
// diagnostics, the best trials and every plot of the analyses. It opens offline: the charting libraries (vega,
// vega-lite, vega-embed) are inlined. docs/report.md describes what it shows and its escaping rules.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/analyze/analysis.h"
#include "dltune/store/store.h"

namespace dltune {

// What the report shows of a trial beyond the analyses' input: the caller fills these for the trials of the table of
// best trials (TopTrials(data, top_trials), analysis.h), from the store and from the run module, which this module
// does not depend on.
struct TrialExtras {
  // As Store::ListCheckpoints returns them; they also locate the trial's profile trace (FindProfileTrace), linked
  // when that file exists.
  std::vector<CheckpointRecord> checkpoints;
  std::string reproduce;  // a command that trains the trial again (run/trial_setup.h)
};

// The profile trace of a trial (training.profile_steps, docs/training.md) where the built-in trainer writes it:
// ProfileTracePath of the directory holding its checkpoints, the trial's directory, found from the paths of its
// checkpoints (kept or deleted). The first such file that exists; nullopt when none does (no profile window, no
// checkpoint yet, or a program of one's own that keeps its checkpoints elsewhere).
std::optional<std::filesystem::path> FindProfileTrace(const std::vector<CheckpointRecord>& checkpoints);

// Options of RenderReport. Plain value type.
struct ReportOptions {
  // Rows per sub-study in the table of best trials: TopTrials(data, top_trials) (at least 1).
  std::size_t top_trials = 5;
  // Checkpoints and reproduction commands by trial number; a trial without an entry shows "-".
  std::map<std::uint64_t, TrialExtras> extras;
  // Where the charting libraries are (see FindWebDir); empty: FindWebDir().
  std::filesystem::path web_dir;
  // Resamples of the "Have we sampled enough?" bootstrap, and its seed (the same report for the same records).
  int bootstrap_resamples = 1000;
  std::uint64_t bootstrap_seed = 0;
  // Trials drawn in the training-curve charts: beyond this many, the running ones and each sub-study's best
  // (CurveTrials in analysis.h); one line per trial of a 10,000-trial study helps no one.
  std::size_t max_curve_trials = 200;
  // Shown in the page's footer, e.g. "2026-11-22 10:31 UTC"; empty: left out (the page is then a pure function of
  // its input).
  std::string generated_at;
};

// The directory that holds vega/build/vega.min.js, vega-lite/build/vega-lite.min.js and
// vega-embed/build/vega-embed.min.js (a node_modules directory), looking in the first of: $DLTUNE_WEB_DIR; the
// installed tree's share/dltune/web (found from the running program: <prefix>/bin/dltune); the source tree's web/
// (a build tree). Each may hold the libraries itself or in its node_modules/ (the layout of web/). Throws Error
// naming where it looked and `scripts/setup` when none holds them, or when $DLTUNE_WEB_DIR is set and does not.
std::filesystem::path FindWebDir();

// The report of a study as one HTML document (UTF-8). Throws Error when the charting libraries cannot be read. Apart
// from those libraries it reads only whether the best trials' profile traces exist (FindProfileTrace).
std::string RenderReport(const StudyData& data, const ReportOptions& options = {});

// Two studies side by side, as one HTML document (`dltune compare`): their records, the best result at equal budget
// (CompareStudies), isolation plots and trial variance side by side, the best trials' objective curves overlaid.
// Throws Error when the studies measure different objectives or the charting libraries cannot be read.
std::string RenderComparison(const StudyData& a, const StudyData& b, const ReportOptions& options = {});

// `text` for HTML text and attribute values: & < > " ' escaped, invalid UTF-8 replaced by U+FFFD, NUL dropped.
std::string HtmlEscape(std::string_view text);

// `json` as text that is safe inside a <script> element and parses back to the same value: ASCII only, with <, >
// and & written as \u003c, \u003e and \u0026, so no "</script>" or "<!--" can appear. Invalid UTF-8 in strings is
// replaced by U+FFFD.
std::string ScriptJson(const nlohmann::json& json);

// A script's source as safe to inline in a <script> element: "</script" (any case) written "<\/script" and "<!--"
// written "\x3C!--" (the same in JavaScript string, template and regular-expression literals, where they can occur).
std::string InlineScript(std::string_view source);

}  // namespace dltune
