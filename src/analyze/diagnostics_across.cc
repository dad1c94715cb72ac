// Checks across studies: trial variance over replicas, single runs compared, and a planned study against its parent.
#include <fmt/format.h>

#include "core/strings.h"
#include "diagnostic_checks.h"
#include "dltune/analyze/step_budget.h"
#include "dltune/analyze/throughput.h"
#include "dltune/analyze/trial_variance.h"
#include "store/recorded_spec.h"

namespace dltune::diagnostic_checks {
namespace {

using analysis_util::Num;

std::string IntervalText(const MeanInterval& m) {
  if (!m.low || !m.high) return fmt::format("{} (one pair: no interval)", Num(m.mean));
  return fmt::format("{} (95% CI [{}, {}], {} pairs)", Num(m.mean), Num(*m.low), Num(*m.high), m.n);
}

// How the study was made: the name of its spec file, for commands.
std::string SpecPath(const StudyData& data) { return SpecFileOf(data.study); }

}  // namespace

void CheckTrialVariance(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (data.spec.replicas < 2) return;
  const TrialVariance variance = AnalyzeTrialVariance(data);
  const std::string noise = variance.pooled_sd
                                ? fmt::format("; the runs of one configuration spread by a standard deviation of {}",
                                              Num(*variance.pooled_sd))
                                : "";
  for (const ReplicaComparison& c : variance.comparisons) {
    const std::string parent =
        c.parent_gap ? fmt::format(" In the parent study their single runs differed by {}.", Num(*c.parent_gap)) : "";
    Diagnostic d{.id = c.within_noise ? "within_noise" : "beyond_noise",
                 .severity = c.within_noise ? Severity::kWarning : Severity::kInfo,
                 .section = kAdoptSection};
    if (c.within_noise) {
      d.title = fmt::format("{} and {} are within the run-to-run noise", c.better_label, c.other_label);
      d.detail = fmt::format("Trained from the same seeds, {} is better by {}{}.{}", c.better_label,
                             IntervalText(c.advantage), noise, parent);
      d.suggestion = data.spec.procedure.kind == "retrain"
                         ? fmt::format(
                               "do not adopt either on this evidence: more replicas of this study narrow the interval "
                               "({}), or keep the simpler option",
                               MoreReplicasCommand(data))
                         : fmt::format(
                               "do not adopt either on this evidence: more replicas narrow the interval (raise "
                               "replicas: in {} and run it under another name), or keep the simpler option",
                               SpecPath(data));
    } else {
      d.title = fmt::format("{} is better than {} beyond the run-to-run noise", c.better_label, c.other_label);
      d.detail =
          fmt::format("Trained from the same seeds, it is better by {}{}.{}", IntervalText(c.advantage), noise, parent);
      d.suggestion = fmt::format(
          "adopt it if the gain is worth its complexity: dltune decide {0} --adopt configuration {1} --because "
          "'...', then dltune launch {0} --reason '...' evaluates its median replica on the test set once",
          data.study.name, c.better);
    }
    out.push_back(std::move(d));
  }
}

void CheckSingleRuns(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (data.spec.replicas > 1 || context.ranked.size() < 2) return;
  // Sub-studies compared through their best single runs: how close are they?
  std::vector<std::pair<std::string, double>> bests;
  for (const auto& group : context.ranked) {
    if (!group.empty()) bests.emplace_back(group.front().trial->substudy_label, group.front().objective);
  }
  if (bests.size() < 2) return;
  std::sort(bests.begin(), bests.end(),
            [&](const auto& a, const auto& b) { return IsBetter(a.second, b.second, context.objective.direction); });
  out.push_back(
      {.id = "single_runs",
       .severity = Severity::kInfo,
       .title = fmt::format("{} leads {} by {}, on single runs: variance unknown", bests[0].first, bests[1].first,
                            Num(std::fabs(bests[0].second - bests[1].second))),
       .detail = "Each sub-study's best is one training run; a run from another seed can land elsewhere, and the "
                 "playbook warns that this trial variance alone can exceed the differences being compared.",
       .suggestion = fmt::format("before adopting, retrain the best of each sub-study from several seeds: dltune "
                                 "plan retrain --from {} --replicas 5",
                                 data.study.name),
       .section = kAdoptSection});
}

void CheckAgainstParent(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (!data.spec.procedure.ComparesWithParent()) return;
  const RoundComparison rounds = CompareWithParent(data);
  if (rounds.rows.size() < 2) return;
  const auto label_of = [&](std::uint64_t configuration) {
    for (const RoundRow& row : rounds.rows) {
      if (row.configuration == configuration) return row.label;
    }
    return fmt::format("configuration {}", configuration);
  };
  const std::string correlation = rounds.rank_correlation
                                      ? fmt::format("Spearman rank correlation {:.2f}", *rounds.rank_correlation)
                                      : "no rank correlation (the values tie)";
  const bool round2 = data.spec.procedure.kind == "round2";
  // A retrain's comparisons are its trial-variance findings; only a parent's winner that does not hold is news.
  if (!round2 && !rounds.winner_changed) return;
  Diagnostic d{.severity = rounds.winner_changed ? Severity::kWarning : Severity::kInfo,
               .section = round2 ? kRoundsSection : kAdoptSection};
  if (rounds.winner_changed) {
    d.id = "winner_changed";
    d.title = fmt::format("the winner changed from study {}: {} was best there, {} is best here",
                          data.spec.procedure.parent, label_of(*rounds.parent_winner), label_of(*rounds.winner));
    d.suggestion = round2 ? "conclusions from the shorter runs do not carry over: keep this round's winner, and "
                            "check the other conclusions of round 1 at this length"
                          : "the parent's winner was a lucky seed: compare configurations by their means here";
  } else {
    d.id = "winner_held";
    d.title = fmt::format("{} is best both here and in study {}", label_of(*rounds.winner), data.spec.procedure.parent);
    d.suggestion = fmt::format("dltune launch {} --reason '...' evaluates it on the test set once", data.study.name);
  }
  d.detail = fmt::format("{} configurations ranked in both studies; {}.", rounds.rows.size(), correlation);
  out.push_back(std::move(d));
}

void CheckStepBudget(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (data.spec.procedure.kind != "fit-steps") return;
  const StepBudget budget = AnalyzeStepBudget(data);
  const std::string condition = budget.condition.Text();
  const std::string again =
      fmt::format("dltune plan fit-steps --from {} --fit '{}'", data.spec.procedure.parent, condition);
  if (!budget.candidate_steps) {
    const bool finished =
        std::all_of(budget.rows.begin(), budget.rows.end(), [](const FitRow& row) { return IsFinished(row.state); });
    if (!finished || budget.rows.empty()) return;
    out.push_back(
        {.id = "fit_steps_none",
         .severity = Severity::kWarning,
         .title = fmt::format("No learning rate reached {} within {} steps", condition, data.spec.max_train_steps),
         .detail = "The playbook's procedure assumes the training set can be fit with a constant learning "
                   "rate; within this budget none of the sweep did.",
         .suggestion =
             fmt::format("train longer ({} --steps {}), or loosen --fit", again, 2 * data.spec.max_train_steps),
         .section = kFitStepsSection});
    return;
  }
  const FitRow& fastest = *std::find_if(budget.rows.begin(), budget.rows.end(),
                                        [&](const FitRow& row) { return row.trial == *budget.fastest_trial; });
  out.push_back({.id = "fit_steps",
                 .severity = Severity::kInfo,
                 .title = fmt::format("Candidate max_train_steps: {} (learning rate {} reaches {} first)",
                                      *budget.candidate_steps, Num(fastest.learning_rate), condition),
                 .detail = fmt::format("{} of the {} learning rates reached it within {} steps.",
                                       std::count_if(budget.rows.begin(), budget.rows.end(),
                                                     [](const FitRow& row) { return row.first_fit_step.has_value(); }),
                                       budget.rows.size(), data.spec.max_train_steps),
                 .suggestion = fmt::format("start from max_train_steps: {} in the study's spec, and tune the other "
                                           "hyperparameters at that budget: dltune plan apply-steps --from {} writes "
                                           "that spec",
                                           *budget.candidate_steps, ShellQuote(data.study.name)),
                 .section = kFitStepsSection,
                 .trials = {fastest.trial}});
  if (budget.at_edge) {
    const bool low = &fastest == &budget.rows.front();
    const double edge = fastest.learning_rate;
    out.push_back(
        {.id = "fit_steps_edge",
         .severity = Severity::kWarning,
         .title = fmt::format("The fastest learning rate, {}, is the {} of the sweep", Num(edge),
                              low ? "lowest" : "highest"),
         .detail = "\"Bad search spaces can make it possible to engage in self-deception\": a learning rate beyond "
                   "the sweep may fit sooner, and the candidate max_train_steps is then too large.",
         .suggestion = fmt::format("sweep further that way: {} --steps {} --learning-rates {}:{}:7", again,
                                   data.spec.max_train_steps, Num(low ? edge / 30 : edge), Num(low ? edge : edge * 30)),
         .section = kFitStepsSection,
         .trials = {fastest.trial}});
  }
}

void CheckThroughput(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  if (data.spec.procedure.kind != "throughput") return;
  const Throughput throughput = AnalyzeThroughput(data);
  if (!throughput.untrustworthy.empty()) {
    out.push_back({.id = "throughput_untrustworthy",
                   .severity = Severity::kWarning,
                   .title = "The throughput measurements cannot be trusted: no batch size is recommended",
                   .detail = throughput.untrustworthy + ".",
                   .suggestion = fmt::format(
                       "measure again on a quiet machine, as a new sweep beside this one: {}; or keep a batch size "
                       "and go on to the step budget at it: dltune plan fit-steps --from {} --batch-size SIZE",
                       MeasureThroughputAgainCommand(data), ShellQuote(data.study.name)),
                   .section = kBatchSizeSection});
    return;
  }
  if (!throughput.worth_using) return;
  std::string detail;
  for (const ThroughputRow& row : throughput.rows) {
    if (!detail.empty()) detail += "; ";
    if (row.examples_per_second) {
      detail += fmt::format("{}: {} s/step, {} examples/s", row.batch_size, Num(*row.step_time),
                            Num(*row.examples_per_second));
      if (row.efficiency) detail += fmt::format(" ({:.0f}% of perfect scaling)", 100 * *row.efficiency);
    } else if (row.out_of_memory) {
      detail += fmt::format("{}: out of memory", row.batch_size);
    }
  }
  out.push_back(
      {.id = "throughput",
       .severity = Severity::kInfo,
       .title = fmt::format("Batch sizes up to {} pay; perfect scaling up to {}{}", *throughput.worth_using,
                            throughput.perfect_until ? std::to_string(*throughput.perfect_until) : "none",
                            throughput.first_out_of_memory
                                ? fmt::format("; {} runs out of memory", *throughput.first_out_of_memory)
                                : ""),
       .detail = detail + ".",
       .suggestion = fmt::format("train with a batch size of at most {} (the largest whose doubling still raised "
                                 "throughput by 20%); a new batch size means re-tuning the learning rate and most "
                                 "other hyperparameters. The step budget at it: dltune plan fit-steps --from {}",
                                 *throughput.worth_using, ShellQuote(data.study.name)),
       .section = kBatchSizeSection});
  if (throughput.input_bound) {
    out.push_back({.id = "throughput_input_bound",
                   .severity = Severity::kWarning,
                   .title = fmt::format("At batch size {} training waits for data", *throughput.worth_using),
                   .detail = "More than 10% of each step is spent waiting for the next batch: the input pipeline, "
                             "not the model, sets the speed.",
                   .suggestion = "speed up the input pipeline before choosing the batch size by throughput",
                   .section = kInputSection});
  }
}

}  // namespace dltune::diagnostic_checks
