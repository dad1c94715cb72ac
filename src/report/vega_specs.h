// Vega-Lite specs (https://vega.github.io/vega-lite/) of the playbook's plots, built from the analyses' structs
// (dltune/analyze/analysis.h). The HTML report and the dashboard render them with vega-embed.
//
// Every function is pure and returns a complete spec with its data inline (`data.values`), so a spec can be saved,
// diffed or opened in the Vega editor as it is. Text a user wrote (param names and values, sub-study labels, ...)
// is put only into data values and literal titles, which Vega draws as text; never into a Vega expression, and
// field names are fixed words, so no user text can change what a spec computes. Nothing here escapes HTML: embed
// the spec with ScriptJson (dltune/report/html_report.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyze/pareto.h"
#include "dltune/analyze/analysis.h"
#include "dltune/analyze/step_budget.h"
#include "dltune/analyze/throughput.h"
#include "dltune/analyze/trial_variance.h"

namespace dltune {

// How a chart is drawn. Width and height are the plotting area in CSS pixels (axes and legends come on top); 0 takes
// the chart's own default.
struct ChartOptions {
  int width = 0;
  int height = 0;
  // Every sub-study's label in the study's order: the color domain, so a sub-study has the same color in every
  // chart. Empty: the sub-studies found in the chart's data, in order of appearance.
  std::vector<std::string> substudies;
  // Curves against steps on a log axis: the study evaluates densely early (training.eval_schedule dense or log).
  bool log_steps = false;
};

// The objective's axis title: "valid/error_rate (lower is better)".
std::string ObjectiveTitle(const Objective& objective);

// A hyperparameter axis plot ("Identifying bad search space boundaries"): the best objective of each trial against
// the param's value, log x for log params, the search space's bounds as dashed rules, infeasible trials as red
// crosses at their value (at their objective when they have one, else along the worse edge of the plot).
nlohmann::json AxisPlotSpec(const AxisPlot& plot, const Objective& objective, const ChartOptions& options = {});

// An isolation plot: the best objective reached for each value (or bucket) of a scientific param, the nuisance
// params optimized away. With replicas each point is a mean with its 95% interval as a bar; with single runs the
// subtitle says their variance is unknown and the axis is not zoomed to their difference.
nlohmann::json IsolationPlotSpec(const IsolationPlot& plot, const Objective& objective,
                                 const ChartOptions& options = {});

// Trial variance: each configuration's replicas as points, their mean as a tick with its 95% interval as a bar,
// and the parent trial's single run as a red diamond.
nlohmann::json ReplicaSpec(const TrialVariance& variance, const Objective& objective, const ChartOptions& options = {});

// Paired comparisons: how much better one configuration is than another over replicas trained from the same seeds,
// with its 95% interval against 0, and the gap between their parent trials as a red diamond.
nlohmann::json PairedDifferenceSpec(const TrialVariance& variance, const Objective& objective,
                                    const ChartOptions& options = {});

// This study against its parent: each configuration's value in the parent (x) and here (y), labelled with its rank
// here.
nlohmann::json RoundComparisonSpec(const RoundComparison& rounds, const Objective& objective, const std::string& parent,
                                   const ChartOptions& options = {});

// One series of every trial against the step — `series` from `source` ("train/loss" of the training steps, or an
// evaluation such as "valid/error_rate"): the highlighted (best few of each sub-study) strong, the others faint,
// colored by sub-study, log y for a loss or norm spanning a decade or more. When the other trials stretch the y axis
// to more than twice the highlighted trials' range, it is zoomed on the highlighted ones ("zoomed" in its title) and
// the rest clipped. With `mark_best_steps`, each trial's best step is marked on its curve (the retrospective optimal
// checkpoint). Other curves are ignored.
nlohmann::json TrainingCurvesSpec(const std::vector<TrainingCurve>& curves, const std::string& series,
                                  CurveSource source, bool mark_best_steps, const ChartOptions& options = {});

// Each completed trial's best step against its best objective, with the first 10% and the last 25% of
// max_train_steps shaded (the playbook's "max_train_steps too high" and "compute-bound" regions).
nlohmann::json BestStepSpec(const std::vector<BestStepPoint>& points, std::int64_t max_train_steps,
                            const Objective& objective, const ChartOptions& options = {});

// The gradient norm (before clipping) of every trial against the step, log y when every norm is positive, with the
// 90th percentile as a dashed red rule (its value in the rule's tooltip).
nlohmann::json GradientNormCurvesSpec(const GradientNorms& norms, const ChartOptions& options = {});

// The histogram of every recorded gradient norm, with the 90th percentile (the suggested clipping threshold) as a
// rule.
nlohmann::json GradientNormHistogramSpec(const GradientNorms& norms, const ChartOptions& options = {});

// "Have we sampled enough?": for each budget of trials, the distribution of the best objective of that many trials
// drawn from the completed ones, as box plots (whiskers min..max, box q1..q3, median tick).
nlohmann::json BootstrapSpec(const BootstrapPlot& plot, const Objective& objective, const ChartOptions& options = {});

// Two studies at equal budget: for each, the box of the best objective of `budget` trials drawn from its completed
// ones (CompareStudies).
nlohmann::json EqualBudgetSpec(const StudyComparison& comparison, const ChartOptions& options = {});

// The learning-rate sweep of dltune plan fit-steps: the first step at which each learning rate fits the training
// set (log x), those that never did at max_train_steps with another shape, the fastest in red.
nlohmann::json StepBudgetSpec(const StepBudget& budget, std::int64_t max_train_steps, const ChartOptions& options = {});

// Two hyperparameters at once: every trial at its two values (log axes for log params), coloured by its best
// objective (viridis, better darker), infeasible trials as red crosses.
nlohmann::json InteractionSpec(const InteractionPlot& plot, const Objective& objective,
                               const ChartOptions& options = {});

// The batch-size sweep: examples per second, seconds per step, or seconds for kTimedExamples training examples against
// the batch size (log2 axis), with perfect scaling from the smallest batch size as a dashed line.
enum class ThroughputMeasure { kExamplesPerSecond, kStepTime, kTimeForExamples };
nlohmann::json ThroughputSpec(const Throughput& throughput, ThroughputMeasure measure,
                              const ChartOptions& options = {});

// Where a study's time went: each phase's seconds summed over the trials, as bars (phases in a trial's order; the
// ones outside the wall time, waiting for data and store writes, drawn lighter).
nlohmann::json TimeTotalsSpec(const TimeSplit& total, const ChartOptions& options = {});
// Each trial's time as one stacked bar of its phases (trial on y), for `trials` (at most a few hundred).
nlohmann::json TrialTimesSpec(const std::vector<TrialRecord>& trials, const ChartOptions& options = {});

// One run's per-step training loss, labelled ("5x (0.415): recovered"), with the step where it started to rise.
struct LabelledCurve {
  std::string label;
  std::uint64_t trial = 0;
  std::vector<std::pair<std::int64_t, double>> points;  // (step, loss), finite
  std::optional<std::int64_t> rise_step;
};
// The runs of an instability probe or a warmup study: training loss against steps on log axes (early instability
// shows in the first steps), one colour per run, the start of each rise marked.
nlohmann::json StabilityCurvesSpec(const std::vector<LabelledCurve>& curves, const ChartOptions& options = {});

// Quality against cost (analyze/pareto.h): each sub-study's trials at their cost (x, log when it spans a decade) and
// best objective (y), the front drawn strong and joined by a staircase, dominated trials faint, infeasible trials as
// red crosses at their cost along the worse edge.
nlohmann::json ParetoSpec(const ParetoView& view, const Objective& objective, const ChartOptions& options = {});

}  // namespace dltune
