#include "dltune/analyze/step_budget.h"

#include <algorithm>
#include <regex>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {

std::string FitCondition::Text() const {
  return fmt::format("{}/{}{}{}", split, metric, at_most ? "<=" : ">=", threshold);
}

FitCondition FitCondition::Parse(const std::string& text) {
  static const std::regex kPattern(R"(\s*([A-Za-z0-9_]+)/([A-Za-z0-9_]+)\s*(<=|>=)\s*([-+0-9.eE]+)\s*)");
  std::smatch match;
  if (!std::regex_match(text, match, kPattern)) {
    throw Error(
        fmt::format("--fit must be split/metric<=value or split/metric>=value, such as "
                    "'train/error_rate<=0.01', not '{}'",
                    text));
  }
  FitCondition condition{.split = match[1].str(), .metric = match[2].str(), .at_most = match[3].str() == "<="};
  try {
    std::size_t used = 0;
    condition.threshold = std::stod(match[4].str(), &used);
    if (used != match[4].str().size()) throw std::invalid_argument("trailing text");
  } catch (const std::exception&) {
    throw Error(fmt::format("--fit '{}': '{}' is not a number", text, match[4].str()));
  }
  return condition;
}

std::string DefaultFitCondition(const Objective& objective) {
  if (objective.metric == "error_rate") return "train/error_rate<=0.01";
  if (objective.metric == "accuracy") return "train/accuracy>=0.99";
  return "";
}

StepBudget AnalyzeStepBudget(const StudyData& data) {
  const auto fit = data.spec.procedure.options.find("fit");
  if (fit == data.spec.procedure.options.end() || !fit->is_string()) {
    throw Error(
        fmt::format("study '{}' was not planned by dltune plan fit-steps: it names no fit condition", data.study.name));
  }
  StepBudget budget;
  budget.condition = FitCondition::Parse(fit->get<std::string>());
  for (const TrialRecord& trial : data.trials) {
    const auto lr = trial.params.find("learning_rate");
    const auto value = lr == trial.params.end() ? std::nullopt : NumericValue(lr->second);
    if (!value) continue;
    FitRow row{.trial = trial.number, .learning_rate = *value, .state = trial.state};
    if (const auto evals = data.evals.find(trial.number); evals != data.evals.end()) {
      for (const EvalMeasurement& e : evals->second) {  // by step
        if (e.split != budget.condition.split || e.metric != budget.condition.metric) continue;
        row.last_value = e.value;
        if (!row.first_fit_step && budget.condition.Holds(e.value)) row.first_fit_step = e.step;
      }
    }
    budget.rows.push_back(row);
  }
  std::stable_sort(budget.rows.begin(), budget.rows.end(),
                   [](const FitRow& a, const FitRow& b) { return a.learning_rate < b.learning_rate; });
  const FitRow* fastest = nullptr;
  for (const FitRow& row : budget.rows) {
    if (row.first_fit_step && (fastest == nullptr || *row.first_fit_step < *fastest->first_fit_step)) fastest = &row;
  }
  if (fastest != nullptr) {
    budget.fastest_trial = fastest->trial;
    budget.candidate_steps = fastest->first_fit_step;
    budget.at_edge = budget.rows.size() > 1 && (fastest == &budget.rows.front() || fastest == &budget.rows.back());
  }
  return budget;
}

}  // namespace dltune
