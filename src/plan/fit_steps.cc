// dltune plan fit-steps: the playbook's constant learning-rate sweep for an initial max_train_steps.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "core/schedule.h"
#include "core/strings.h"
#include "dltune/analyze/step_budget.h"
#include "dltune/analyze/throughput.h"
#include "dltune/plan/plan.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"
#include "store/tracking.h"

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

// The range `spec` searches the learning rate in (a range param named learning_rate), if it searches one.
std::optional<std::pair<double, double>> SearchedLearningRates(const StudySpec& spec) {
  for (const Param& param : spec.space->params()) {
    if (param.name == ScheduleParamNames::kLearningRate && param.Varies() && !param.IsChoice() && param.min > 0) {
      return std::pair{param.min, param.max};
    }
  }
  return std::nullopt;
}

// The default sweep: 7 points over the range `origin` searches the learning rate in, or from 1/30 to 30 times the
// configuration's learning rate when it holds it fixed.
std::vector<double> DefaultGrid(const StudySpec& origin, const StudyData& parent, const TrialRecord& trial) {
  if (const auto range = SearchedLearningRates(origin)) return LogGrid(range->first, range->second, 7);
  for (const auto& [name, value] : ParamsByDisplayName(*parent.spec.space, trial.params)) {
    const auto number = NumericValue(value);
    if (name == ScheduleParamNames::kLearningRate && number && *number > 0)
      return LogGrid(*number / 30, *number * 30, 7);
  }
  return LogGrid(1e-4, 1.0, 7);
}

// A throughput study's origin: the spec file or study its sweep was planned from, whose learning-rate range and
// budget the step-budget sweep takes (the throughput sweep itself ran one learning rate for a few steps).
StudyData ThroughputOrigin(Store* store, const StudyData& throughput) {
  const std::string& from = throughput.spec.procedure.parent;
  std::error_code error;
  if (std::filesystem::is_regular_file(from, error)) return ParentFromSpecFile(from);
  if (const auto parent = store != nullptr ? FindParentStudy(*store, throughput.study) : std::nullopt) {
    return LoadStudyData(*store, parent->name, /*with_measurements=*/false);
  }
  throw Error(
      fmt::format("the throughput study {} was planned from {}, which is neither a spec file here nor a study "
                  "in the store: plan the sweep from a spec file (--from SPEC --batch-size N)",
                  throughput.study.name, from));
}

// The trial of the batch size a throughput study recommends (or `batch_size` when given).
TrialRecord TrialAtBatchSize(const StudyData& throughput, std::int64_t batch_size) {
  const Throughput measured = AnalyzeThroughput(throughput);
  if (batch_size == 0) {
    if (!measured.worth_using) {
      throw Error(fmt::format(
          "the throughput study {} recommends no batch size ({}): pass --batch-size, or measure "
          "again (dltune doctor {})",
          throughput.study.name, measured.untrustworthy.empty() ? "no batch size was measured" : measured.untrustworthy,
          throughput.study.name));
    }
    batch_size = *measured.worth_using;
  }
  for (const ThroughputRow& row : measured.rows) {
    if (row.batch_size != batch_size) continue;
    for (const TrialRecord& trial : throughput.trials) {
      if (trial.number == row.trial) return trial;
    }
  }
  // A batch size the sweep did not measure: its trials differ only by their batch size, which --batch-size sets.
  if (!throughput.trials.empty()) return throughput.trials.front();
  throw Error(
      fmt::format("the throughput study {} has no trial to take the configuration from", throughput.study.name));
}

}  // namespace

PlannedStudy PlanFitSteps(Store* store, const FitStepsRequest& request) {
  std::error_code error;
  const bool from_file = std::filesystem::is_regular_file(request.parent, error);
  if (!from_file && store == nullptr) throw Error(fmt::format("--from {}: no such spec file", request.parent));
  const StudyData parent =
      from_file ? ParentFromSpecFile(request.parent) : LoadParent(*store, request.parent, /*with_measurements=*/true);
  const bool from_throughput = parent.spec.procedure.kind == "throughput";
  const StudyData origin = from_throughput ? ThroughputOrigin(store, parent) : parent;
  const std::string fit = request.fit.empty() ? DefaultFitCondition(parent.spec.objective) : request.fit;
  if (fit.empty()) {
    throw Error(
        fmt::format("--fit is needed: when is the training set fit for objective {}? (split/metric<=value, "
                    "such as 'train/loss<=0.05')",
                    parent.spec.objective.Name()));
  }
  const FitCondition condition = FitCondition::Parse(fit);
  const std::int64_t steps = request.steps > 0 ? request.steps : origin.spec.max_train_steps;
  if (steps < 1) throw Error("--steps must be 1 or more: the budget each learning rate gets to fit");
  if (request.batch_size < 0) throw Error("--batch-size must be positive");

  // The configuration swept: a spec file's first trial, a throughput study's trial at its recommended batch size, or
  // a study's overall best (its params by the names training reads are the sweep's fixed ones).
  TrialRecord trial;
  std::string source;
  if (from_file) {
    trial.params = StudyPlan(parent.spec).Trial(0).params;
    source = fmt::format("the first trial of {}", request.parent);
  } else if (from_throughput) {
    trial = TrialAtBatchSize(parent, request.batch_size);
    source = fmt::format("the configuration study {} measured (trial {})", parent.study.name, trial.number);
  } else {
    trial = BestOverall(parent).trial;
    source = fmt::format("the best configuration of study {} (trial {})", parent.study.name, trial.number);
  }
  const std::string name = PlannedName(
      request.name, from_throughput ? NameBefore(parent.study.name, "-throughput") : parent.study.name, "fit-steps");
  std::vector<double> grid = request.learning_rates;
  if (grid.empty()) grid = DefaultGrid(origin.spec, parent, trial);
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  if (grid.size() < 2 || grid.front() <= 0) {
    throw Error("--learning-rates needs at least two positive learning rates to sweep");
  }

  YamlTree space = ConstantScheduleSpace(parent, trial, /*without_regularization=*/true);
  YamlTree rates = YamlTree::Sequence(/*flow=*/true);
  for (const double lr : grid) rates.Append(YamlTree::Of(lr));
  YamlTree lr_param = YamlTree::Map(/*flow=*/true);
  lr_param.Set("values", rates);
  lr_param.comment = "the sweep: every learning rate once (the grid sampler)";
  space.Set(ScheduleParamNames::kLearningRate, lr_param);
  if (request.batch_size > 0) {
    YamlTree& batch = space.Set("batch_size", YamlTree::Of(request.batch_size));
    batch.comment = "--batch-size";
  } else if (YamlTree* batch = space.Find("batch_size"); batch && from_throughput) {
    batch->comment = fmt::format("the batch size study {} recommends", parent.study.name);
  }

  SpecParts parts;
  parts.name = name;
  parts.header = fmt::format(
      "Planned by: dltune plan fit-steps --from {} --fit '{}' --steps {}{}{}\n"
      "The playbook's \"Algorithm for picking an initial candidate for max_train_steps using a learning rate "
      "sweep\": {} with a constant learning rate and no regularization, swept over {} learning rates for {} steps. "
      "The fastest to reach {} gives the candidate max_train_steps; it should not be at the edge of the sweep.",
      request.parent, condition.Text(), steps,
      request.batch_size > 0 ? fmt::format(" --batch-size {}", request.batch_size) : "",
      request.name.empty() ? "" : " --name " + request.name, source, grid.size(), steps, condition.Text());
  parts.description = fmt::format("Constant learning-rate sweep of {}: the steps to fit {}", source, condition.Text());
  parts.goal = fmt::format("How many steps does the fastest learning rate need to reach {}?", condition.Text());
  parts.max_train_steps = steps;
  YamlTree training = ParentTraining(origin);
  const std::int64_t every = request.eval_every > 0 ? request.eval_every : std::max<std::int64_t>(1, steps / 100);
  YamlTree& interval = training.Set("eval_every_steps", YamlTree::Of(std::min(every, steps)));
  interval.comment = "dense enough to see when the training set is fit";
  training.Erase("log_every_steps");
  training.Erase("valid_sample_examples");
  parts.training = training;
  parts.joint = true;
  parts.sampler = GridSampler();
  parts.space = space;
  YamlTree options = YamlTree::Map();
  options.Set("fit", YamlTree::Of(condition.Text()));
  options.Set("steps", YamlTree::Of(steps));
  if (!from_file) options.Set("trial", YamlTree::Of(static_cast<std::int64_t>(trial.number)));
  parts.procedure = ProcedureBlock("fit-steps", parent, options, {});
  if (from_file) parts.procedure.Set("parent", YamlTree::Of(request.parent));
  return Finish(name, Write(parent, parts));
}

}  // namespace dltune
