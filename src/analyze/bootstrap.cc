// "Have we sampled enough?": the playbook's Figure 3, the best objective of smaller budgets by bootstrapping.
#include <algorithm>
#include <cmath>
#include <map>

#include "analysis_util.h"
#include "core/rng.h"
#include "dltune/analyze/analysis.h"

namespace dltune {

std::vector<std::uint64_t> BootstrapBudgets(std::uint64_t n) {
  constexpr std::uint64_t kEveryBudgetUpTo = 50;
  constexpr double kGrowth = 1.05;  // about 47 boxes per tenfold more trials beyond that
  std::vector<std::uint64_t> budgets;
  if (n == 0) return budgets;
  for (std::uint64_t budget = 1; budget <= std::min(n, kEveryBudgetUpTo); ++budget) budgets.push_back(budget);
  for (double next = static_cast<double>(kEveryBudgetUpTo) * kGrowth; next < static_cast<double>(n); next *= kGrowth) {
    const auto budget = static_cast<std::uint64_t>(std::llround(next));
    if (budget > budgets.back() && budget < n) budgets.push_back(budget);
  }
  if (budgets.back() != n) budgets.push_back(n);
  return budgets;
}

namespace {

// The box of the best values of `budget`-trial draws (sorted here).
BootstrapBox BoxOf(std::vector<double>& best, std::uint64_t budget) {
  std::sort(best.begin(), best.end());
  return {.budget = static_cast<int>(budget),
          .min = best.front(),
          .q1 = analysis_util::Quantile(best, 0.25),
          .median = analysis_util::Quantile(best, 0.5),
          .q3 = analysis_util::Quantile(best, 0.75),
          .max = best.back()};
}

}  // namespace

BootstrapBox BestOfBudget(const std::vector<double>& values, std::uint64_t budget, Direction direction, int resamples,
                          std::uint64_t seed) {
  resamples = std::max(resamples, 1);
  budget = std::max<std::uint64_t>(budget, 1);
  if (values.empty()) return {.budget = static_cast<int>(budget)};
  Rng rng(seed);
  std::vector<double> best(static_cast<std::size_t>(resamples));
  for (double& draw_best : best) {
    for (std::uint64_t i = 0; i < budget; ++i) {
      const double value = values[rng.Below(values.size())];
      if (i == 0 || IsBetter(value, draw_best, direction)) draw_best = value;
    }
  }
  return BoxOf(best, budget);
}

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
    const std::vector<std::uint64_t> budgets = BootstrapBudgets(n);
    auto next_box = budgets.begin();
    for (std::uint64_t budget = 1; budget <= n; ++budget) {
      for (double& draw_best : running) {
        const double value = values[rng.Below(n)];
        if (budget == 1 || IsBetter(value, draw_best, direction)) draw_best = value;
      }
      if (next_box == budgets.end() || *next_box != budget) continue;
      ++next_box;
      best = running;
      plot.boxes.push_back(BoxOf(best, budget));
    }
    plots.push_back(std::move(plot));
  }
  return plots;
}

}  // namespace dltune
