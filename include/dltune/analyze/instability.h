// The playbook's "Identifying unstable workloads" and "How to apply learning rate warmup": each run classified from
// its per-step training loss and gradient norms, the learning rate at which the workload becomes unstable (a study
// planned by `dltune plan instability`), and the shortest warmup that trains stably at ten times that rate (one
// planned by `dltune plan warmup`). Pure functions of a study's records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune {

// How a run trained.
enum class Stability {
  kStable,       // the loss never rose
  kEarly,        // it rose in the first tenth of the run and stayed up ("instability at initialization/early")
  kMidTraining,  // it rose suddenly after a steady decline and stayed up (the playbook's Figure 7b)
  kRecovered,    // it rose, then came back to where it was (the playbook's "early instability followed by a recovery")
  kDiverged,     // the loss became NaN or infinite, the trainer stopped it as diverged, or it ended far above its start
};
// "stable", "early instability", "sudden mid-training instability", "recovered", "diverged".
std::string_view StabilityText(Stability stability);

// The thresholds (documented in docs/analyses.md). The loss is smoothed by a trailing median over a window of
// max(20, steps / 25) steps, so a few noisy batches are not a rise.
inline constexpr double kLossRise = 0.5;        // a rise: the smoothed loss 50% above its best so far ...
inline constexpr double kRiseOfProgress = 0.1;  // ... and by a tenth of the progress made (noise of tiny losses)
inline constexpr double kEarlyFraction = 0.1;   // a rise in the first tenth of the run's steps is early
inline constexpr double kRecoveryMargin = 0.1;  // recovered: back within 10% of the best before the rise
inline constexpr double kGradientSpike = 10.0;  // a gradient norm this many times its preceding median is a spike

// One training step's measurements.
struct LossStep {
  std::int64_t step = 0;
  double loss = 0;  // NaN or infinite where training blew up
  std::optional<double> grad_norm;
};

struct StabilityVerdict {
  Stability kind = Stability::kStable;
  std::optional<std::int64_t> rise_step;       // where the smoothed loss first rose
  std::optional<double> rise;                  // the largest rise after it: smoothed loss / best before it - 1
  std::optional<std::int64_t> recovered_step;  // where it was back within kRecoveryMargin of that best (and ended so)
  std::optional<std::int64_t> spike_step;      // the largest gradient-norm jump (over its preceding window's median)
  double spike = 0;                            // that jump, when at least kGradientSpike
  std::string evidence;                        // one line: what was seen, at which steps
};

// Classifies a run from its steps (by step). `planned_steps` is the run's budget (what "the first tenth" is of);
// `stopped_as_diverged` when the trainer ended it as diverged. Fewer than 10 finite steps are judged only for
// divergence.
StabilityVerdict ClassifyStability(const std::vector<LossStep>& steps, std::int64_t planned_steps,
                                   bool stopped_as_diverged);
// A trial's training steps as ClassifyStability reads them.
std::vector<LossStep> LossStepsOf(const StudyData& data, std::uint64_t trial);

// ---- dltune plan instability: the best configuration at 2x, 5x and 10x its learning rate ----

struct ProbeRow {
  std::uint64_t trial = 0;
  double learning_rate = 0;
  double multiplier = 0;  // learning_rate / the parent's best
  TrialState state = TrialState::kPending;
  std::optional<StabilityVerdict> verdict;  // once the trial ended
};

struct InstabilityProbe {
  double base_learning_rate = 0;  // the parent's best configuration's (procedure.options.learning_rate)
  std::vector<ProbeRow> rows;     // by learning rate
  // The smallest probed learning rate whose run was not stable (the playbook's unstable_base_learning_rate); none
  // when every probed rate trained stably.
  std::optional<double> unstable_learning_rate;
  bool finished = false;  // every trial ended
};
// Throws Error when the study is not an instability probe (no procedure.options.learning_rate).
InstabilityProbe AnalyzeInstabilityProbe(const StudyData& data);

// ---- dltune plan warmup: warmup_steps swept at 10x the unstable learning rate ----

struct WarmupRow {
  std::uint64_t trial = 0;
  std::int64_t warmup_steps = 0;
  std::int64_t steps = 0;  // warmup + post-warmup
  TrialState state = TrialState::kPending;
  std::optional<StabilityVerdict> verdict;
  std::optional<double> best_objective;
};

struct WarmupStudy {
  double learning_rate = 0;           // the base learning rate every trial warms up to
  double unstable_learning_rate = 0;  // the probe's
  std::int64_t baseline_steps = 0;    // the baseline's max_train_steps (procedure.options.baseline_steps)
  std::vector<WarmupRow> rows;        // by warmup_steps
  // The shortest warmup whose run trained stably at the learning rate, and every longer one did too.
  std::optional<std::int64_t> shortest_stable;
  bool finished = false;
};
// Throws Error when the study is not a warmup study.
WarmupStudy AnalyzeWarmup(const StudyData& data);

// ---- dltune plan clipping: grad_clip_norm swept around the 90th percentile of the baseline's gradient norms ----

// Clipping that acts on more than this share of the steps is too aggressive: it lowers the learning rate in disguise
// (the playbook's "Gradient clipping").
inline constexpr double kAggressiveClippedShare = 0.5;

struct ClippingRow {
  std::uint64_t trial = 0;
  double threshold = 0;  // grad_clip_norm; 0: no clipping (the reference run)
  TrialState state = TrialState::kPending;
  std::optional<StabilityVerdict> verdict;
  std::optional<double> clipped_share;  // of the recorded steps, those clipped
};

struct ClippingStudy {
  double learning_rate = 0;       // every run's (procedure.options.learning_rate): the unstable one
  double percentile_90 = 0;       // of the baseline's gradient norms (procedure.options.percentile_90)
  std::string baseline;           // the study the configuration comes from (procedure.options.baseline)
  std::vector<ClippingRow> rows;  // by threshold, no clipping first
  // The largest threshold whose run trained stably while clipping at most kAggressiveClippedShare of its steps: the
  // gentlest clipping that cures the instability.
  std::optional<double> recommended;
  bool finished = false;
};
// Throws Error when the study is not a clipping study.
ClippingStudy AnalyzeClipping(const StudyData& data);

}  // namespace dltune
