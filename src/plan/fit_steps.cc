// dltune plan fit-steps: the playbook's constant learning-rate sweep for an initial max_train_steps.
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "dltune/analyze/step_budget.h"
#include "dltune/core/schedule.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"

namespace dltune {

using namespace plan_internal;

namespace {

// Rounded to 3 significant digits, so the grid reads as people write learning rates.
double ThreeDigits(double value) { return std::stod(fmt::format("{:.3g}", value)); }

// `count` values spaced evenly on a log scale from `low` to `high`.
std::vector<double> LogGrid(double low, double high, int count) {
  std::vector<double> grid;
  for (int i = 0; i < count; ++i) {
    const double u = count == 1 ? 0.5 : static_cast<double>(i) / (count - 1);
    grid.push_back(ThreeDigits(std::exp(std::log(low) + u * (std::log(high) - std::log(low)))));
  }
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  return grid;
}

// The default sweep: 7 points over the range the parent searched the best trial's learning rate in, or from 1/30
// to 30 times it when the parent held it fixed.
std::vector<double> DefaultGrid(const StudyData& parent, const TrialRecord& best) {
  for (const auto& [id, value] : best.params) {
    const Param* param = parent.spec.space->Find(id);
    if (param == nullptr || param->name != ScheduleParamNames::kLearningRate) continue;
    if (param->Varies() && !param->IsChoice() && param->min > 0) return LogGrid(param->min, param->max, 7);
    if (const auto number = NumericValue(value); number && *number > 0) {
      return LogGrid(*number / 30, *number * 30, 7);
    }
  }
  return LogGrid(1e-4, 1.0, 7);
}

}  // namespace

PlannedStudy PlanFitSteps(Store& store, const FitStepsRequest& request) {
  const FitCondition condition = FitCondition::Parse(request.fit);
  if (request.steps < 1) throw Error("--steps must be 1 or more: the budget each learning rate gets to fit");
  const StudyData parent = LoadParent(store, request.parent);
  const std::string name = PlannedName(request.name, parent.study.name, "fit-steps");
  // The overall best of the parent: its params (by the names training reads) are the sweep's fixed ones.
  const Chosen chosen = BestOverall(parent);
  std::vector<double> grid = request.learning_rates;
  if (grid.empty()) grid = DefaultGrid(parent, chosen.trial);
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  if (grid.size() < 2 || grid.front() <= 0) {
    throw Error("--learning-rates needs at least two positive learning rates to sweep");
  }

  YamlTree space = ConstantScheduleSpace(parent, chosen.trial, /*without_regularization=*/true);
  YamlTree rates = YamlTree::Sequence(/*flow=*/true);
  for (const double lr : grid) rates.Append(YamlTree::Of(lr));
  YamlTree lr_param = YamlTree::Map(/*flow=*/true);
  lr_param.Set("values", rates);
  lr_param.comment = "the sweep: every learning rate once (the grid sampler)";
  space.Set(ScheduleParamNames::kLearningRate, lr_param);

  SpecParts parts;
  parts.name = name;
  parts.header = fmt::format(
      "Planned by: dltune plan fit-steps --from {} --fit '{}' --steps {}{}\n"
      "The playbook's \"Algorithm for picking an initial candidate for max_train_steps using a learning rate "
      "sweep\": the best configuration of study {} (trial {}) with a constant learning rate and no regularization, "
      "swept over {} learning rates for {} steps. The fastest to reach {} gives the candidate max_train_steps; it "
      "should not be at the edge of the sweep.",
      parent.study.name, condition.Text(), request.steps, request.name.empty() ? "" : " --name " + request.name,
      parent.study.name, chosen.trial.number, grid.size(), request.steps, condition.Text());
  parts.description = fmt::format("Constant learning-rate sweep of {}'s best configuration: the steps to fit {}",
                                  parent.study.name, condition.Text());
  parts.goal = fmt::format("How many steps does the fastest learning rate need to reach {}?", condition.Text());
  parts.max_train_steps = request.steps;
  YamlTree training = ParentTraining(parent);
  const std::int64_t every =
      request.eval_every > 0 ? request.eval_every : std::max<std::int64_t>(1, request.steps / 100);
  YamlTree& interval = training.Set("eval_every_steps", YamlTree::Of(std::min(every, request.steps)));
  interval.comment = "dense enough to see when the training set is fit";
  training.Erase("log_every_steps");
  training.Erase("valid_sample_examples");
  parts.training = training;
  parts.joint = true;
  parts.sampler = GridSampler();
  parts.space = space;
  YamlTree options = YamlTree::Map();
  options.Set("fit", YamlTree::Of(condition.Text()));
  options.Set("steps", YamlTree::Of(request.steps));
  options.Set("trial", YamlTree::Of(static_cast<std::int64_t>(chosen.trial.number)));
  parts.procedure = ProcedureBlock("fit-steps", parent, options, {});
  return Finish(name, Write(parent, parts));
}

}  // namespace dltune
