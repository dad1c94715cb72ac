// Interaction plots: two searched hyperparameters at once, every trial coloured by its best objective.
#include <map>

#include "dltune/analyze/analysis.h"

namespace dltune {

std::vector<InteractionPlot> InteractionPlots(const StudyData& data, std::size_t max_pairs) {
  std::vector<AxisPlot> ranges;
  for (AxisPlot& plot : HyperparameterAxisPlots(data)) {
    if (!plot.categorical) ranges.push_back(std::move(plot));
  }
  std::vector<InteractionPlot> plots;
  for (std::size_t a = 0; a < ranges.size() && plots.size() < max_pairs; ++a) {
    for (std::size_t b = a + 1; b < ranges.size() && plots.size() < max_pairs; ++b) {
      std::map<std::uint64_t, const AxisPoint*> ys;
      for (const AxisPoint& point : ranges[b].points) ys[point.trial] = &point;
      InteractionPlot plot;
      for (const AxisPoint& point : ranges[a].points) {
        const auto y = ys.find(point.trial);
        if (y == ys.end()) continue;
        plot.points.push_back({.trial = point.trial,
                               .substudy = point.substudy,
                               .x = point.position,
                               .y = y->second->position,
                               .objective = point.objective,
                               .infeasible = point.infeasible});
      }
      if (plot.points.empty()) continue;  // two params that never exist in the same trial
      plot.x_axis = ranges[a];
      plot.y_axis = ranges[b];
      plot.x_axis.points.clear();
      plot.y_axis.points.clear();
      plots.push_back(std::move(plot));
    }
  }
  return plots;
}

}  // namespace dltune
