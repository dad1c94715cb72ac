// The study page's "Quality against cost" section (analyze/pareto.h): the Pareto front of the objective against the
// default cost, training seconds (else the first cost the study recorded), the other recorded costs folded below, and
// the costs not recorded named with the reason.
#pragma once

#include <optional>

#include "analyze/pareto.h"
#include "dltune/analyze/analysis.h"
#include "report/page_section.h"
#include "report/vega_specs.h"

namespace dltune {

// The cost the section and `dltune show --pareto` start from: training seconds where recorded, else the first
// recorded one (ParetoCosts order); nullopt when the study recorded none.
std::optional<ParetoCost> DefaultParetoCost(const StudyData& data);

// The section (id "pareto"); reads the trials' training steps (seconds per step, examples per second).
PageSection ParetoSection(const StudyData& data, const ChartOptions& options);

}  // namespace dltune
