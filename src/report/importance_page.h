// The study page's hyperparameter-importance section (importance.h): per sub-study a bar chart of each nuisance
// hyperparameter's importance with its interval and noise floor, and a parallel-coordinates chart of its trials.
#pragma once

#include <nlohmann/json.hpp>

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/importance.h"
#include "report/page_section.h"
#include "report/vega_specs.h"

namespace dltune {

// Horizontal bars of the importance above the noise floor, most important first, grey where indistinguishable from no
// effect, with its interval as a line and the floor (0) as a red rule.
nlohmann::json ImportanceBarSpec(const SubStudyImportance& substudy, const ImportanceSettings& settings,
                                 const ChartOptions& options = {});

// One line per completed trial of the sub-study (its best `max_trials` when it has more) across the nuisance params
// (most important first) at their unit positions (ranges: UnitPosition; lists: their index over the list), coloured
// by the best objective, better darker; each axis labelled with its two ends.
nlohmann::json ParallelCoordinatesSpec(const StudyData& data, const SubStudyImportance& substudy,
                                       const ChartOptions& options = {}, std::size_t max_trials = 500);

// Whether a study's page has the section: a search, not a list of chosen configurations (retrain, round 2) nor a
// measurement (probe, warmup, clipping, fit-steps, throughput), whose params are not a search to weigh.
bool ShowsImportance(const StudyData& data);

// The section "importance" of the study page, drawing `importance` (AnalyzeImportance(data, settings)).
PageSection ImportanceSection(const StudyData& data, const HyperparameterImportance& importance,
                              const ChartOptions& normal, const ChartOptions& wide);

}  // namespace dltune
