// The playbook's checklist as diagnostics: each a finding about a study, with the playbook section it comes from and
// a concrete suggestion. Pure functions over StudyData (analysis.h): deterministic, no I/O, thread-safe.
// docs/analyses.md explains each check for users.
#pragma once

#include <vector>

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/finding.h"
#include "dltune/analyze/importance.h"

namespace dltune {

// Every diagnostic that applies, most serious first (problem, warning, info), then in the order of the list below,
// then by sub-study index and spec order of params. Terms as in analysis.h: "best objective", "the best trials of a
// sub-study" (its top 3 completed trials: TopTrials(data, 3)), "unit position" (where a range param's value lies in
// its range, 0 at min and 1 at max, on a log scale for Scale::kLog). The checks:
// - boundary (warning; "Identifying bad search space boundaries"): in a sub-study with at least 5 completed trials
//   that have a range param (nuisance, or scientific in joint mode), its 3 best such trials all lie in the outer 10%
//   of the range at the same end (unit position >= 0.9, or <= 0.1): "expand the space this way" (log ranges by a
//   decade, linear ones by half their width, fractions such as momentum up to 0.999; Diagnostic::expand_to). The
//   playbook asks whether "the best points cluster towards the edge"; three best points, not one, because one point
//   alone lands in the outer tenths a fifth of the time by chance.
// - infeasible_share (warning above 20%, problem above 50%; "Extracting insight from experimental results"): of the
//   finished trials (completed, infeasible, failed; at least 5) of a sub-study, the share that is infeasible. The
//   detail names the range param along which infeasible trials differ most from completed ones, when they do.
// - instability (problem; "When to apply learning rate warmup"): for a learning-rate range param (its id or name
//   contains "learning_rate", or the name is "lr" or ends in "_lr"), the threshold t is the lowest value of an
//   infeasible trial such that at least 80% of the finished trials at or above t are infeasible (at least 2 of
//   them); the check fires when completed trials lie below t and the sub-study's best trial is below t within 20%
//   of the range (in unit position) of it — the playbook's Figure 7a, "the best learning rate is right at the edge
//   of what is feasible": "instability — see warmup and clipping".
// - overfitting (warning; "Examining the training curves"): one of the best trials of a sub-study (at least 3
//   evaluations of the objective) ends — its last evaluation — worse than its best value by more than 5% of the
//   range (max - min) of its objective curve (problematic overfitting).
// - late_variance (warning; "Examining the training curves"): one of the best trials has at least 3 evaluations of
//   the objective in the last 25% of training (step > 0.75 max_train_steps) whose step-to-step noise — the standard
//   deviation of consecutive differences / sqrt(2), which ignores a steady trend — is above 5% of their mean |level|.
// - compute_bound (info; "Deciding how long to train when training is not compute-bound"): the best steps of all the
//   best trials of every sub-study (at least 3 trials in all) are in the last 25% of training (best step > 0.75
//   max_train_steps): "train longer".
// - steps_too_high (warning; same section): every completed trial with a best step (at least 3) has it in the first
//   10% of training (best step <= 0.1 max_train_steps): "max_train_steps is too high".
// - training_loss_rising (warning; problem when at least half of the checked trials show it; "Examining the
//   training curves"): a completed trial with at least 10 finite training losses whose moving average (window: a
//   tenth of them) ends more than 10% of its range (max - min of the average) above its minimum: likely a pipeline
//   bug, or instability.
// - input_bound (warning; "Optimizing the input pipeline"): over every training step recording both, data wait is
//   more than 10% of step time.
// - aggressive_clipping (warning; "Gradient clipping"): one of the best trials clipped more than 50% of the steps
//   that carry a `clipped` flag: "lower the learning rate instead" (the playbook's "extremely aggressive").
// - periodic_validation (warning; "Setting up periodic evaluations"): of the completed trials with at least 16
//   evaluations of the objective, at least half repeat: the autocorrelation of the curve's second differences (which
//   take out any trend) is at least 0.5 at some lag of 2 or more evaluations, at most -0.2 at half that lag, and at
//   least 0.3 at twice it when the curve is that long: "can
//   indicate implementation bugs such as test data having overlap with training data, or training data not being
//   properly shuffled".
// - unimportant (info; "Identifying scientific, nuisance, and fixed hyperparameters"): in a study that searches (not a
//   list of chosen configurations nor a measurement), a nuisance param whose PED-ANOVA importance (importance.h) is
//   indistinguishable from no effect (its bootstrap interval reaches down to the noise floor) in every sub-study
//   with at least kMinTopTrialsToFix top trials: "fix it at the best trial's value" (dltune plan fix), one finding per
//   param, the value that of the best trial over those sub-studies (none when that trial lacks the param).
// Across studies ("Determining whether to adopt a training pipeline change or hyperparameter configuration"):
// - within_noise (warning) / beyond_noise (info): in a study with replicas, each comparison of AnalyzeTrialVariance
//   (trial_variance.h) whose paired interval holds 0 (or has fewer than 2 pairs), or does not: the evidence, the
//   run-to-run standard deviation and the parent's single-run gap, and what to do next (more replicas; or decide and
//   launch, with the commands).
// - single_runs (info): a study without replicas whose sub-studies' bests are single runs: how far apart the two
//   best are, and the command that retrains them (dltune plan retrain).
// - fit_steps (info), fit_steps_edge (warning), fit_steps_none (warning; "Algorithm for picking an initial candidate
//   for max_train_steps using a learning rate sweep"): a study planned by dltune plan fit-steps
//   (AnalyzeStepBudget, step_budget.h): the candidate max_train_steps; its learning rate at the sweep's edge; no
//   learning rate fitting within the budget once every trial finished.
// - throughput (info), throughput_input_bound (warning; "Determining the feasible batch sizes and estimating training
//   throughput"): a study planned by dltune plan throughput (AnalyzeThroughput, throughput.h): each batch size's time
//   per step and examples per second, the largest worth using and where perfect scaling ends; training waiting for
//   data at that batch size. throughput_untrustworthy (warning) instead when the measurements cannot be trusted
//   (Throughput::untrustworthy: step times spread by a busy machine, an impossible efficiency): no batch size then.
// - clipping (info) / clipping_none (warning; "Gradient clipping"): a study planned by dltune plan clipping
//   (AnalyzeClipping, instability.h): the gentlest grad_clip_norm that trains stably at the unstable learning rate
//   while clipping at most half the steps (dltune plan apply-clipping applies it), or none.
// - adam_budget (warning; "How should Adam's hyperparameters be tuned?"): CheckAdamBudget (search_budget.h).
// - winner_changed (warning) / winner_held (info; round 2: "Deciding how long to train when training is
//   compute-bound"): a study planned from a parent whose configurations rank (CompareWithParent) with another winner
//   than in the parent, or the same; with the rank correlation.
// A finding a note of the study resolves (StudyNote::resolves, its id) is marked handled and listed after the open
// ones.
std::vector<Diagnostic> Diagnose(const StudyData& data);
// The same, its `unimportant` check reading `importance` (AnalyzeImportance(data, settings), whatever the settings)
// rather than computing it: a page that shows the importance and the checklist computes it once.
std::vector<Diagnostic> Diagnose(const StudyData& data, const HyperparameterImportance& importance);

}  // namespace dltune
