// Basic hyperparameter axis plots: every trial's best objective against each param that varies.
// Left out of the plots: failed, pending, running and stopped trials without a best objective (they have nothing
// to place on the objective axis); infeasible trials are kept at their value, marked, with no objective.
#include <optional>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

// The point's position on the param's axis: the value of a range, the index of a choice; nullopt when the value
// does not belong to the param.
std::optional<double> PositionOf(const Param& param, const Value& value) {
  if (analysis_util::IsRange(param)) return NumericValue(value);
  for (std::size_t i = 0; i < param.values.size(); ++i) {
    if (SameValue(param.values[i], value)) return static_cast<double>(i);
  }
  return std::nullopt;
}

}  // namespace

std::vector<AxisPlot> HyperparameterAxisPlots(const StudyData& data) {
  std::vector<AxisPlot> plots;
  if (!data.spec.space) return plots;
  for (const Param& param : data.spec.space->params()) {
    if (!param.Varies()) continue;
    AxisPlot plot;
    plot.param_id = param.id;
    plot.param_name = param.name;
    plot.role = param.role;
    if (analysis_util::IsRange(param)) {
      plot.log_scale = param.scale == Scale::kLog;
      plot.lower = param.min;
      plot.upper = param.max;
    } else {
      plot.categorical = true;
      for (const Value& choice : param.values) plot.categories.push_back(FormatValue(choice));
    }
    for (const TrialRecord& trial : data.trials) {
      const auto value = trial.params.find(param.id);
      if (value == trial.params.end()) continue;
      const bool infeasible = trial.state == TrialState::kInfeasible;
      const std::optional<double> objective = infeasible ? std::nullopt : BestObjectiveOf(data, trial);
      if (!infeasible && !objective) continue;
      const std::optional<double> position = PositionOf(param, value->second);
      if (!position) continue;
      plot.points.push_back({.trial = trial.number,
                             .substudy = trial.substudy_label,
                             .value = value->second,
                             .position = *position,
                             .objective = objective,
                             .infeasible = infeasible,
                             .state = trial.state});
    }
    plots.push_back(std::move(plot));
  }
  return plots;
}

}  // namespace dltune
