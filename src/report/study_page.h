// The study page as a model: the analyses' sections in page order, each with its id, title, explanation, the text
// shown when it has nothing to draw, and its charts (Vega-Lite specs). The HTML report (html_report.h) and the
// dashboard's JSON (dashboard_api.h) both render it, so a section or a chart is added here, once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/importance.h"
#include "report/page_section.h"

namespace dltune {

// Which sections: those drawn from the trial records alone, those that need every measurement (training curves,
// gradient norms, the step budget, throughput, stability) or the analyses the checklist reads too (importance: the
// dashboard loads them second, with the checklist), or all of them.
enum class PageParts { kRecords, kMeasurements, kAll };

struct StudyPageOptions {
  // Trials drawn in the training-curve charts: beyond this many, the running ones and each sub-study's best
  // (CurveTrials in analysis.h).
  std::size_t max_curve_trials = 200;
  // Resamples of the "Have we sampled enough?" bootstrap, and its seed.
  int bootstrap_resamples = 1000;
  std::uint64_t bootstrap_seed = 0;
  // The importance section's settings, which its checklist's `unimportant` finding reads too (StudyPage).
  ImportanceSettings importance;
};

// The analyses' sections of `data`'s study page, in page order: trial variance (a study with replicas), against the
// parent (a study planned from one), isolation, axis plots, interactions, importance, training curves, best steps,
// gradient norms, "have we sampled enough?", quality against cost, where the time went (those of `parts`).
std::vector<PageSection> StudyPageSections(const StudyData& data, const StudyPageOptions& options,
                                           PageParts parts = PageParts::kAll);

// The page's sections and, where `parts` holds the measurements, its checklist: the importance both read (the section
// and the `unimportant` finding) computed once, with options.importance.
struct StudyPage {
  std::vector<PageSection> sections;    // StudyPageSections(data, options, parts)
  std::vector<Diagnostic> diagnostics;  // Diagnose(data); empty for PageParts::kRecords
};
StudyPage BuildStudyPage(const StudyData& data, const StudyPageOptions& options, PageParts parts = PageParts::kAll);

// A section as the dashboard reads it: {id, position, title, explanation, empty, charts: [{id, title, spec, wide}],
// more_title, more_charts}.
nlohmann::json PageSectionJson(const PageSection& section);

// A checklist finding as the dashboard and `dltune doctor --format json` give it (docs/json-output.md): {id,
// severity, title, detail, suggestion, section, substudy, param, trials, expand_to, handled}.
nlohmann::json FindingJson(const Diagnostic& finding);

}  // namespace dltune
