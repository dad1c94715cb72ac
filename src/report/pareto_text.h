// `dltune show STUDY --pareto COST`: each sub-study's Pareto front of the objective against one recorded cost
// (analyze/pareto.h), as text for a terminal or as JSON (docs/json-output.md).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "analyze/pareto.h"
#include "dltune/analyze/analysis.h"
#include "dltune/store/store.h"

namespace dltune {

// The cost named `name` when the study recorded it. Throws Error naming the costs the study recorded (and every cost
// dltune knows, for a name that is none of them), or saying why the named one was not recorded.
ParetoCost RequireRecordedCost(const StudyData& data, const std::string& name);

// The fronts, one table per sub-study (its front, cheapest first), with what was left out and the other costs. Safe
// to print.
std::string ParetoText(const StudyData& data, ParetoCost cost);

// {study, objective, direction, cost, cost_label, cost_direction, recorded_costs, substudies: [{substudy, front,
// points: [{trial, state, cost, objective, on_front}], without_cost, unfinished}]}.
nlohmann::json ParetoJson(const StudyData& data, ParetoCost cost);

// What `dltune show STUDY --pareto COST` prints: study `study` read with its measurements, its fronts against the cost
// named `cost` as ParetoText, or with `json` as ParetoJson (indented, with its newline). Throws Error as
// RequireRecordedCost does.
std::string ShowPareto(Store& store, const std::string& study, const std::string& cost, bool json);

}  // namespace dltune
