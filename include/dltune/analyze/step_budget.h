// The playbook's "Algorithm for picking an initial candidate for max_train_steps using a learning rate sweep": a
// constant learning-rate sweep without regularization (dltune plan fit-steps), and the first step at which each
// learning rate fits the training set. Pure functions of a study's records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune {

// What "fits the training set" means: an evaluation `split/metric` at most (or at least) `threshold`, e.g.
// "train/error_rate<=0.01" or "train/accuracy>=0.99".
struct FitCondition {
  std::string split = "train";
  std::string metric = "error_rate";
  bool at_most = true;  // <= (else >=)
  double threshold = 0;

  bool Holds(double value) const { return at_most ? value <= threshold : value >= threshold; }
  // "train/error_rate<=0.01".
  std::string Text() const;
  // Parses "split/metric<=number" or ">="; throws Error naming the text otherwise.
  static FitCondition Parse(const std::string& text);
};

struct FitRow {
  std::uint64_t trial = 0;
  double learning_rate = 0;
  TrialState state = TrialState::kPending;
  std::optional<std::int64_t> first_fit_step;  // the first evaluation at which the condition holds
  std::optional<double> last_value;            // the metric at the trial's last evaluation
};

// The condition a fit-steps sweep waits for when none is given, from the objective's metric: train/error_rate<=0.01
// for an error rate, train/accuracy>=0.99 for an accuracy (the playbook's training set fit "perfectly", nearly); ""
// for any other metric, whose value at a fit only its author knows.
std::string DefaultFitCondition(const Objective& objective);

struct StepBudget {
  FitCondition condition;
  std::vector<FitRow> rows;  // by learning rate
  // The fastest learning rate to fit (the lower learning rate on a tie), and its step: the candidate max_train_steps.
  std::optional<std::uint64_t> fastest_trial;
  std::optional<std::int64_t> candidate_steps;
  // The fastest learning rate is the lowest or the highest of the sweep: the playbook's warning ("bad search spaces
  // can make it possible to engage in self-deception") — the true fastest may lie beyond it.
  bool at_edge = false;
};

// For a study planned by `dltune plan fit-steps` (its condition in procedure.options.fit; the learning rate is the
// trials' `learning_rate` param). Trials without a learning rate are left out. Throws Error when the study holds no
// fit condition.
StepBudget AnalyzeStepBudget(const StudyData& data);

}  // namespace dltune
