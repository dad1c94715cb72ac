// "Have we sampled enough?": the playbook's Figure 3, the best objective of smaller budgets by bootstrapping.
#include <algorithm>
#include <map>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"
#include "dltune/core/rng.h"

namespace dltune {

std::vector<BootstrapPlot> BootstrapBestObjective(const StudyData& data, int resamples, std::uint64_t seed) {
  resamples = std::max(resamples, 1);
  const Direction direction = data.spec.objective.direction;
  // Each sub-study's completed trials' best objectives, in trial-number order.
  std::map<std::size_t, std::pair<std::string, std::vector<double>>> substudies;
  for (const TrialRecord& trial : data.trials) {
    if (trial.state != TrialState::kCompleted) continue;
    if (const auto objective = BestObjectiveOf(data, trial)) {
      auto& [label, values] = substudies[trial.substudy];
      label = trial.substudy_label;
      values.push_back(*objective);
    }
  }
  std::vector<BootstrapPlot> plots;
  for (const auto& [index, substudy] : substudies) {
    const auto& [label, values] = substudy;
    const std::uint64_t n = values.size();
    BootstrapPlot plot{.substudy = label, .boxes = {}};
    Rng rng(MixSeed(seed, index));
    // running[r]: the best of resample r's draw so far; budget k extends every draw by one trial.
    std::vector<double> running(static_cast<std::size_t>(resamples));
    std::vector<double> best(running.size());
    for (std::uint64_t budget = 1; budget <= n; ++budget) {
      for (double& draw_best : running) {
        const double value = values[rng.Below(n)];
        if (budget == 1 || analysis_util::Better(value, draw_best, direction)) draw_best = value;
      }
      best = running;
      std::sort(best.begin(), best.end());
      plot.boxes.push_back({.budget = static_cast<int>(budget),
                            .min = best.front(),
                            .q1 = analysis_util::Quantile(best, 0.25),
                            .median = analysis_util::Quantile(best, 0.5),
                            .q3 = analysis_util::Quantile(best, 0.75),
                            .max = best.back()});
    }
    plots.push_back(std::move(plot));
  }
  return plots;
}

}  // namespace dltune
