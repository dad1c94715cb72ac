#include "report/study_page.h"

#include <algorithm>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "analyze/time_split.h"
#include "core/eval_schedule.h"
#include "dltune/analyze/instability.h"
#include "dltune/analyze/step_budget.h"
#include "dltune/analyze/throughput.h"
#include "dltune/analyze/trial_variance.h"
#include "report/importance_page.h"
#include "report/pareto_section.h"
#include "vega_specs.h"

namespace dltune {
namespace {

// A curve's series and where its points come from (training steps or evaluations: both may be "train/loss").
struct SeriesKey {
  std::string name;
  CurveSource source = CurveSource::kEvaluation;
  bool operator==(const SeriesKey&) const = default;
  bool operator<(const SeriesKey& other) const { return std::tie(name, source) < std::tie(other.name, other.source); }
};

// The series in page order: the objective, the training loss of every step, then the evaluations by name.
std::vector<SeriesKey> SeriesOrder(const std::vector<TrainingCurve>& curves, const Objective& objective) {
  std::set<SeriesKey> found;
  for (const auto& curve : curves) found.insert({curve.series, curve.source});
  std::vector<SeriesKey> order;
  for (const SeriesKey& first :
       {SeriesKey{objective.Name(), CurveSource::kEvaluation}, SeriesKey{"train/loss", CurveSource::kTrainingSteps},
        SeriesKey{"train/learning_rate", CurveSource::kTrainingSteps}}) {
    if (found.erase(first) > 0) order.push_back(first);
  }
  order.insert(order.end(), found.begin(), found.end());
  return order;
}

std::string SeriesCaption(const SeriesKey& series, const Objective& objective) {
  if (series.source == CurveSource::kTrainingSteps) return series.name + ", every training step";
  if (series.name == objective.Name()) return series.name + ", the objective, at each evaluation";
  return series.name + ", at each evaluation";
}

// "curves_valid_error_rate", "curves_train_loss_steps": a chart id from a series.
std::string SeriesChartId(const SeriesKey& series) {
  std::string id = "curves_";
  for (const char c : series.name) id += (c == '/' ? '_' : c);
  return series.source == CurveSource::kTrainingSteps ? id + "_steps" : id;
}

struct Charting {
  ChartOptions normal, wide, small;
};

Charting ChartSizes(const StudyData& data) {
  Charting sizes;
  std::set<std::string> seen;
  for (const auto& trial : data.trials) {
    if (seen.insert(trial.substudy_label).second) sizes.normal.substudies.push_back(trial.substudy_label);
  }
  sizes.normal.log_steps = EvalSchedule::Parse(data.spec.training.eval_schedule).DenseEarly();
  sizes.wide = sizes.normal;
  sizes.wide.width = 980;
  sizes.wide.height = 300;
  sizes.small = sizes.normal;
  sizes.small.width = 400;
  sizes.small.height = 210;
  return sizes;
}

PageSection IsolationSection(const StudyData& data, const Charting& sizes) {
  const Objective& objective = data.spec.objective;
  PageSection section{.id = "isolation",
                      .title = "Isolation plots: is the change useful?",
                      .explanation =
                          "For each value of a scientific hyperparameter, the best trial once the nuisance "
                          "hyperparameters are optimized away (the best trial among those sharing the "
                          "value). Compare these, not individual trials.",
                      .empty_text = "This study has no scientific hyperparameter to compare."};
  for (const auto& plot : IsolationPlots(data)) {
    const bool intervals =
        std::any_of(plot.points.begin(), plot.points.end(), [](const IsolationPoint& p) { return p.low.has_value(); });
    section.charts.push_back({.id = "isolation_" + plot.param_id,
                              .caption = intervals ? fmt::format("mean {} per {} of the best configuration, with its "
                                                                 "95% interval over replicas",
                                                                 objective.Name(), plot.param_name)
                                                   : fmt::format("best {} per {}: single runs, variance unknown "
                                                                 "(dltune plan retrain measures it)",
                                                                 objective.Name(), plot.param_name),
                              .spec = IsolationPlotSpec(plot, objective, sizes.normal)});
  }
  return section;
}

// Trial variance: a study whose configurations are trained several times (replicas:).
PageSection VarianceSection(const StudyData& data, const Charting& sizes) {
  const Objective& objective = data.spec.objective;
  PageSection section{
      .id = "variance",
      .title = "Trial variance: is the difference larger than the noise?",
      .explanation =
          "Each configuration trained several times from different seeds (replica r of every configuration from the "
          "same seed): its runs as points, their mean with its 95% interval, and the parent study's single run as a "
          "red diamond. Below, each comparison pair by pair: when its interval holds 0, the difference is within the "
          "run-to-run noise and the playbook would not adopt the change on this evidence.",
      .empty_text = "No configuration has a completed replica yet."};
  const TrialVariance variance = AnalyzeTrialVariance(data);
  if (std::none_of(variance.configurations.begin(), variance.configurations.end(),
                   [](const ConfigurationReplicas& c) { return !c.values.empty(); })) {
    return section;
  }
  ChartOptions wide = sizes.wide;
  wide.height = 260;
  section.charts.push_back(
      {.id = "variance_replicas",
       .caption = fmt::format("{} of each configuration's replicas{}", objective.Name(),
                              variance.pooled_sd ? fmt::format("; run-to-run sd {:.3g}", *variance.pooled_sd) : ""),
       .spec = ReplicaSpec(variance, objective, wide),
       .wide = true});
  if (!variance.comparisons.empty()) {
    ChartOptions differences = wide;
    differences.width = 560;  // beside labels as long as two sub-studies' names
    section.charts.push_back({.id = "variance_differences",
                              .caption = "paired differences between configurations, with the parent's gap",
                              .spec = PairedDifferenceSpec(variance, objective, differences),
                              .wide = true});
  }
  return section;
}

// A planned study against its parent: round 2 against round 1, a retrain against the single runs.
PageSection ParentSection(const StudyData& data, const Charting& sizes) {
  PageSection section{.id = "parent",
                      .title = "Against the parent study: do the rankings hold?",
                      .explanation = fmt::format(
                          "Each configuration's value in study {} (the run it was taken from) and here. A rank "
                          "correlation near 1 says the parent's ranking holds; a changed winner says the parent's "
                          "conclusion does not carry over.",
                          data.spec.procedure.parent),
                      .empty_text =
                          "No configuration has completed here yet, or the parent's trials are not in "
                          "this store."};
  const RoundComparison rounds = CompareWithParent(data);
  if (rounds.rows.empty()) return section;
  std::string caption = fmt::format("{} configurations", rounds.rows.size());
  if (rounds.rank_correlation) caption += fmt::format("; Spearman rank correlation {:.2f}", *rounds.rank_correlation);
  caption += rounds.winner_changed ? "; the winner changed" : "; the same winner";
  section.charts.push_back(
      {.id = "parent_ranks",
       .caption = caption,
       .spec = RoundComparisonSpec(rounds, data.spec.objective, data.spec.procedure.parent, sizes.normal)});
  return section;
}

// A constant learning-rate sweep (dltune plan fit-steps): how fast each learning rate fits the training set.
PageSection StepBudgetSection(const StudyData& data, const Charting& sizes) {
  PageSection section{.id = "fit-steps",
                      .title = "Steps to fit the training set: a candidate max_train_steps",
                      .explanation =
                          "The playbook's constant learning-rate sweep without regularization: for each learning "
                          "rate, the first evaluation at which the training set is fit. The fastest gives the "
                          "candidate max_train_steps; if it is at either end of the sweep, a learning rate beyond "
                          "it may be faster still.",
                      .empty_text = "No trial has evaluated the training split yet."};
  const StepBudget budget = AnalyzeStepBudget(data);
  if (budget.rows.empty()) return section;
  std::string caption = budget.candidate_steps ? fmt::format("candidate max_train_steps {}{}", *budget.candidate_steps,
                                                             budget.at_edge ? " (at the edge of the sweep)" : "")
                                               : fmt::format("no learning rate fits {} yet", budget.condition.Text());
  section.charts.push_back(
      {.id = "fit_steps", .caption = caption, .spec = StepBudgetSpec(budget, data.spec.max_train_steps, sizes.normal)});
  return section;
}

PageSection AxisPlotSection(const StudyData& data, const Charting& sizes) {
  PageSection section{
      .id = "axis-plots",
      .title = "Hyperparameter axis plots: are the search space's boundaries good?",
      .explanation =
          "Each point is a trial's best objective against one hyperparameter; dashed lines are the search "
          "space's bounds. When the best trials crowd against a bound, the space should be expanded that "
          "way. Red crosses are infeasible trials, at their value (along the edge of worse values when "
          "they never produced an objective).",
      .empty_text = "No hyperparameter varies in this study."};
  for (const auto& plot : HyperparameterAxisPlots(data)) {
    section.charts.push_back(
        {.id = "axis_" + plot.param_id,
         .caption = fmt::format(
             "{} ({}{}{})", plot.param_name, RoleName(plot.role),
             plot.param_id != plot.param_name ? ", id " + plot.param_id : "",
             plot.lower && plot.upper ? fmt::format(", searched in [{:g}, {:g}]", *plot.lower, *plot.upper) : ""),
         .spec = AxisPlotSpec(plot, data.spec.objective, sizes.normal)});
  }
  return section;
}

// "0.166", "5": three significant digits.
std::string FormatNumber(double value) { return fmt::format("{:.3g}", value); }

// A run's per-step loss for the stability charts: at most kMaxPoints, each kept point the highest of its group of
// steps so that spikes stay visible.
LabelledCurve StabilityCurve(const StudyData& data, std::uint64_t trial, std::string label,
                             const std::optional<StabilityVerdict>& verdict) {
  constexpr std::size_t kMaxPoints = 1500;
  LabelledCurve curve{.label = std::move(label), .trial = trial};
  const std::vector<LossStep> steps = LossStepsOf(data, trial);
  const std::size_t group = (steps.size() + kMaxPoints - 1) / std::max<std::size_t>(kMaxPoints, 1);
  for (std::size_t i = 0; i < steps.size(); i += std::max<std::size_t>(group, 1)) {
    const auto end = std::min(steps.size(), i + std::max<std::size_t>(group, 1));
    const auto highest = std::max_element(steps.begin() + static_cast<std::ptrdiff_t>(i),
                                          steps.begin() + static_cast<std::ptrdiff_t>(end),
                                          [](const LossStep& a, const LossStep& b) { return a.loss < b.loss; });
    if (std::isfinite(highest->loss)) curve.points.emplace_back(highest->step, highest->loss);
  }
  if (verdict && verdict->kind != Stability::kStable) curve.rise_step = verdict->rise_step;
  return curve;
}

// The chart of a probe's or warmup study's runs, once any has recorded steps (else the section's empty text shows).
void AddStabilityChart(PageSection& section, const std::string& id, const std::vector<LabelledCurve>& curves,
                       const std::string& caption, const Charting& sizes) {
  if (std::all_of(curves.begin(), curves.end(), [](const LabelledCurve& c) { return c.points.empty(); })) return;
  section.charts.push_back({.id = id,
                            .caption = "training loss of each run: " + caption,
                            .spec = StabilityCurvesSpec(curves, sizes.wide),
                            .wide = true});
}

std::string VerdictLabel(const std::optional<StabilityVerdict>& verdict) {
  return verdict ? std::string(StabilityText(verdict->kind)) : "not finished";
}

// The instability probe (dltune plan instability).
PageSection ProbeSection(const StudyData& data, const Charting& sizes) {
  PageSection section{
      .id = "instability-probe",
      .title = "Instability probe: at which learning rate does training become unstable?",
      .explanation =
          "The best configuration at multiples of its learning rate, each run's training loss at every "
          "step on log axes (early instability shows in the first steps). A run is unstable when its "
          "smoothed loss rises 50% above its best so far (a triangle marks where); the smallest unstable "
          "learning rate is where a warmup study starts (10x it).",
      .empty_text = "No run of the probe has recorded its training steps yet."};
  const InstabilityProbe probe = AnalyzeInstabilityProbe(data);
  std::vector<LabelledCurve> curves;
  for (const ProbeRow& row : probe.rows) {
    curves.push_back(StabilityCurve(data, row.trial,
                                    fmt::format("{}x ({}): {}", FormatNumber(row.multiplier),
                                                FormatNumber(row.learning_rate), VerdictLabel(row.verdict)),
                                    row.verdict));
  }
  const std::string caption =
      probe.unstable_learning_rate
          ? fmt::format("unstable from learning rate {} (the playbook's unstable_base_learning_rate)",
                        FormatNumber(*probe.unstable_learning_rate))
          : (probe.finished ? "stable at every learning rate probed" : "not finished");
  AddStabilityChart(section, "instability_probe_loss", curves, caption, sizes);
  return section;
}

// The warmup study (dltune plan warmup).
PageSection WarmupSection(const StudyData& data, const Charting& sizes) {
  PageSection section{
      .id = "warmup",
      .title = "Warmup: which warmup trains stably at the higher learning rate?",
      .explanation =
          "Each run warms the learning rate up from 0 over warmup_steps, then trains twice as long at the "
          "base learning rate (10x the unstable one). The shortest warmup from which on every run trained "
          "stably is the one to prepend to the baseline (dltune plan apply-warmup).",
      .empty_text = "No run of the warmup study has recorded its training steps yet."};
  const WarmupStudy study = AnalyzeWarmup(data);
  std::vector<LabelledCurve> curves;
  for (const WarmupRow& row : study.rows) {
    curves.push_back(StabilityCurve(
        data, row.trial,
        fmt::format("warmup {} ({} steps): {}", row.warmup_steps, row.steps, VerdictLabel(row.verdict)), row.verdict));
  }
  const std::string caption = study.shortest_stable
                                  ? fmt::format("{} steps of warmup train stably at {}", *study.shortest_stable,
                                                FormatNumber(study.learning_rate))
                                  : (study.finished ? "no warmup tried trains stably" : "not finished");
  AddStabilityChart(section, "warmup_loss", curves, caption, sizes);
  return section;
}

// The clipping study (dltune plan clipping).
PageSection ClippingSection(const StudyData& data, const Charting& sizes) {
  PageSection section{
      .id = "clipping",
      .title = "Gradient clipping: which threshold trains stably at the unstable learning rate?",
      .explanation =
          "The best configuration at the learning rate where training became unstable, without clipping and with "
          "grad_clip_norm around the 90th percentile of its gradient norms. Clipping that acts on most steps lowers "
          "the learning rate in disguise; the gentlest threshold that trains stably is the one to apply (dltune plan "
          "apply-clipping).",
      .empty_text = "No run of the clipping study has recorded its training steps yet."};
  const ClippingStudy study = AnalyzeClipping(data);
  std::vector<LabelledCurve> curves;
  for (const ClippingRow& row : study.rows) {
    const std::string clipped =
        row.clipped_share ? fmt::format(", {:.0f}% clipped", 100 * *row.clipped_share) : std::string();
    curves.push_back(StabilityCurve(
        data, row.trial,
        fmt::format("{}{}: {}", row.threshold > 0 ? "clip at " + FormatNumber(row.threshold) : "no clipping", clipped,
                    VerdictLabel(row.verdict)),
        row.verdict));
  }
  const std::string caption =
      study.recommended ? fmt::format("clipping at {} trains stably at {}", FormatNumber(*study.recommended),
                                      FormatNumber(study.learning_rate))
                        : (study.finished ? "no threshold trains stably without clipping most steps" : "not finished");
  AddStabilityChart(section, "clipping_loss", curves, caption, sizes);
  return section;
}

// "; 12 trials on GPUs (...)": what the trials' GPUs did, for the time chart's caption; "" on the CPU.
std::string GpuCaption(const std::vector<TrialRecord>& trials) {
  const std::string gpus = DescribeGpuUsage(trials);
  return gpus.empty() ? "" : "; " + gpus;
}

// Where the study's time went (every trial's time split).
PageSection TimeSection(const StudyData& data, const Charting& sizes) {
  constexpr std::size_t kMaxTrialBars = 200;
  PageSection section{
      .id = "time",
      .title = "Where did this study's time go?",
      .explanation =
          "Each trial's time from its worker's slot coming free to its process ending: scheduling (claim, sampler, "
          "trial files), start-up (process, libraries, model, resume), data loading, training steps (of which "
          "waiting for data), evaluation, checkpoints, and the rest. Store writes happen in the worker alongside.",
      .empty_text = "No trial has recorded its time yet (trials recorded before this was measured have none)."};
  const TimeSplit total = SumTimeSplits(data.trials);
  if (!(TotalSeconds(total) > 0)) return section;
  section.charts.push_back({.id = "time_totals",
                            .caption = "all trials: " + DescribeTimeSplit(total) + GpuCaption(data.trials),
                            .spec = TimeTotalsSpec(total, sizes.normal)});
  std::vector<TrialRecord> timed;
  for (const TrialRecord& trial : data.trials) {
    if (!trial.time_split.empty() && timed.size() < kMaxTrialBars) timed.push_back(trial);
  }
  section.charts.push_back(
      {.id = "time_trials",
       .caption = timed.size() == kMaxTrialBars ? fmt::format("the first {} trials", kMaxTrialBars) : "each trial",
       .spec = TrialTimesSpec(timed, sizes.normal)});
  return section;
}

// The batch-size sweep (dltune plan throughput).
PageSection ThroughputSection(const StudyData& data, const Charting& sizes) {
  PageSection section{.id = "throughput",
                      .title = "Throughput: which batch sizes pay?",
                      .explanation =
                          "Each batch size trained alone on the machine. Perfect scaling (dashed) doubles the examples "
                          "per second with the batch size and keeps the time per step; where the measured line leaves "
                          "it, a larger batch stops saving training time. Changing the batch size means re-tuning "
                          "most hyperparameters.",
                      .empty_text = "No batch size has recorded its step times yet."};
  const Throughput throughput = AnalyzeThroughput(data);
  if (std::none_of(throughput.rows.begin(), throughput.rows.end(),
                   [](const ThroughputRow& row) { return row.examples_per_second.has_value(); })) {
    return section;
  }
  std::string caption;
  if (throughput.worth_using) caption += fmt::format("recommended batch size {}", *throughput.worth_using);
  if (throughput.perfect_until) caption += fmt::format("; perfect scaling up to {}", *throughput.perfect_until);
  if (throughput.first_out_of_memory) caption += fmt::format("; out of memory at {}", *throughput.first_out_of_memory);
  if (throughput.input_bound) caption += "; input-bound";
  if (!throughput.untrustworthy.empty()) caption = "no batch size recommended: " + throughput.untrustworthy;
  std::string times;
  for (const ThroughputRow& row : throughput.rows) {
    if (!row.examples_per_second) continue;
    times += fmt::format("{}{}: {:.3g} s", times.empty() ? "" : ", ", row.batch_size,
                         kTimedExamples / *row.examples_per_second);
  }
  section.charts.push_back({.id = "throughput_time",
                            .caption = caption + ". Time for a million training examples: " + times,
                            .spec = ThroughputSpec(throughput, ThroughputMeasure::kTimeForExamples, sizes.normal)});
  section.charts.push_back({.id = "throughput_examples",
                            .caption = "examples per second",
                            .spec = ThroughputSpec(throughput, ThroughputMeasure::kExamplesPerSecond, sizes.normal)});
  section.charts.push_back({.id = "throughput_step_time",
                            .caption = "time per step (the median of each measurement's median, over the repeats)",
                            .spec = ThroughputSpec(throughput, ThroughputMeasure::kStepTime, sizes.normal)});
  return section;
}

PageSection InteractionSection(const StudyData& data, const Charting& sizes) {
  PageSection section{.id = "interactions",
                      .title = "Interactions: does the best value of one hyperparameter depend on another?",
                      .explanation =
                          "Each pair of searched hyperparameters, every trial at its two values and coloured by its "
                          "best objective (darker is better). A diagonal band of good trials means the two interact "
                          "— as the learning rate does with the batch size or momentum — and must be tuned together; "
                          "exploration is for finding such interactions.",
                      .empty_text = "Fewer than two numeric hyperparameters vary together in this study."};
  for (const InteractionPlot& plot : InteractionPlots(data)) {
    section.charts.push_back({.id = "interaction_" + plot.x_axis.param_id + "_" + plot.y_axis.param_id,
                              .caption = fmt::format("{} against {}, {} trials", plot.y_axis.param_name,
                                                     plot.x_axis.param_name, plot.points.size()),
                              .spec = InteractionSpec(plot, data.spec.objective, sizes.normal)});
  }
  return section;
}

// "N of the M trials: the running ones and each sub-study's best" when `shown` (a SubsetOfTrials) leaves trials of
// `all` out; "" otherwise.
std::string CurveTrialsNote(const StudyData& shown, const StudyData& all) {
  if (shown.trials.size() >= all.trials.size()) return "";
  return fmt::format("{} of the {} trials: the running ones and each sub-study's best", shown.trials.size(),
                     all.trials.size());
}

PageSection CurvesSection(const StudyData& data, const StudyData& shown, const Charting& sizes) {
  const Objective& objective = data.spec.objective;
  const std::string drawn = CurveTrialsNote(shown, data);
  PageSection section{
      .id = "curves",
      .title = "Training curves",
      .explanation =
          "Every trial's curves against the step: the 3 best trials of each sub-study drawn strong, the others "
          "faint, colored by sub-study; diamonds mark each trial's best step (the checkpoint retrospective "
          "selection keeps). A \"zoomed\" axis covers the strong curves and clips the others. Look for overfitting "
          "(the validation objective getting worse after its best step), high step-to-step variance late in "
          "training, and a training loss that rises (often a pipeline bug)." +
          (drawn.empty() ? "" : " Drawn: " + drawn + "."),
      .empty_text = "No trial has reported measurements yet."};
  const auto curves = TrainingCurves(shown);
  if (curves.empty()) return section;
  // Wide: the objective, the training loss and the objective's metric on the training split (the generalization
  // gap); the other evaluations smaller, below.
  const SeriesKey train_objective{"train/" + objective.metric, CurveSource::kEvaluation};
  const auto primary = [&](const SeriesKey& series) {
    return series == SeriesKey{objective.Name(), CurveSource::kEvaluation} ||
           series == SeriesKey{"train/loss", CurveSource::kTrainingSteps} ||
           series == SeriesKey{"train/learning_rate", CurveSource::kTrainingSteps} || series == train_objective;
  };
  // Per-class counts (correct_class_<k>): one chart per class, folded away until asked for.
  const auto per_class = [](const SeriesKey& series) {
    return series.name.find("/correct_class_") != std::string::npos;
  };
  for (const SeriesKey& series : SeriesOrder(curves, objective)) {
    const bool is_objective = series.source == CurveSource::kEvaluation && series.name == objective.Name();
    if (primary(series)) {
      section.charts.push_back(
          {.id = SeriesChartId(series),
           .caption = SeriesCaption(series, objective),
           .spec = TrainingCurvesSpec(curves, series.name, series.source, is_objective, sizes.wide),
           .wide = true});
    } else {
      (per_class(series) ? section.folded_charts : section.more_charts)
          .push_back({.id = SeriesChartId(series),
                      .caption = SeriesCaption(series, objective),
                      .spec = TrainingCurvesSpec(curves, series.name, series.source, false, sizes.small)});
    }
  }
  if (!section.more_charts.empty()) {
    section.more_title = fmt::format("Other evaluations ({})", section.more_charts.size());
  }
  if (!section.folded_charts.empty()) {
    section.folded_title = fmt::format("Correct examples of each class ({} charts)", section.folded_charts.size());
  }
  return section;
}

PageSection BestStepSection(const StudyData& data, const Charting& sizes) {
  PageSection section{.id = "best-steps",
                      .title = "Best step vs max_train_steps: is the step budget right?",
                      .explanation =
                          "Where in training each completed trial reached its best objective. Best steps "
                          "in the last 25% of training mean the trials are likely compute-bound (train "
                          "longer); all of them in the first 10% mean max_train_steps is higher than "
                          "needed.",
                      .empty_text = "No completed trial has a best step yet."};
  if (const auto best_steps = BestSteps(data); !best_steps.empty()) {
    section.charts.push_back(
        {.id = "best_steps",
         .caption = fmt::format("{} completed trials", best_steps.size()),
         .spec = BestStepSpec(best_steps, data.spec.max_train_steps, data.spec.objective, sizes.normal)});
  }
  return section;
}

PageSection GradientSection(const StudyData& data, const StudyData& shown, const Charting& sizes) {
  const GradientNorms norms = GradientNormAnalysis(data);
  PageSection section{.id = "gradients",
                      .title = "Gradient norms: how to clip",
                      .explanation =
                          "The global gradient norm before clipping. The playbook suggests clipping at "
                          "about the 90th percentile of the norms, and lowering the learning rate instead "
                          "when clipping would act on most steps.",
                      .empty_text = "No trial reported gradient norms."};
  if (norms.p90) {
    section.explanation += fmt::format(" Here: 90th percentile {:.4g} over {} steps.", *norms.p90, norms.steps);
  }
  if (norms.clipped_fraction) {
    section.explanation += fmt::format(" Steps clipped: {:.1f}%.", 100 * *norms.clipped_fraction);
  }
  if (norms.steps == 0) return section;
  if (!norms.curves.empty()) {
    const bool all_drawn = shown.trials.size() >= data.trials.size();
    GradientNorms with_shown_curves = norms;
    if (!all_drawn) with_shown_curves.curves = GradientNormAnalysis(shown).curves;
    section.charts.push_back({.id = "grad_norms",
                              .caption = fmt::format("gradient norm by step, {}; dashed red: the 90th percentile",
                                                     all_drawn ? "every trial" : "the trials of the training curves"),
                              .spec = GradientNormCurvesSpec(with_shown_curves, sizes.normal)});
  }
  if (!norms.histogram.empty()) {
    section.charts.push_back({.id = "grad_norm_histogram",
                              .caption = "every recorded gradient norm",
                              .spec = GradientNormHistogramSpec(norms, sizes.normal)});
  }
  return section;
}

PageSection BootstrapSection(const StudyData& data, const StudyPageOptions& options, const Charting& sizes) {
  PageSection section{
      .id = "enough",
      .title = "Have we sampled enough?",
      .explanation =
          "For each number of trials, the best objective of that many trials drawn (with replacement) from "
          "the completed ones, over many draws: whiskers from the least to the most, boxes the middle "
          "half, ticks the median. When the boxes still move or stay wide at the right, more trials would "
          "likely find better results.",
      .empty_text = "No trial has completed yet."};
  for (const auto& plot : BootstrapBestObjective(data, options.bootstrap_resamples, options.bootstrap_seed)) {
    if (plot.boxes.empty()) continue;
    section.charts.push_back(
        {.id = "bootstrap_" + plot.substudy,
         .caption = fmt::format("sub-study {}: {} completed trial{}", plot.substudy, plot.boxes.back().budget,
                                plot.boxes.back().budget == 1 ? "" : "s"),
         .spec = BootstrapSpec(plot, data.spec.objective, sizes.normal)});
  }
  return section;
}

nlohmann::json ChartsJson(const std::vector<PageChart>& charts) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& chart : charts) {
    out.push_back({{"id", chart.id}, {"title", chart.caption}, {"spec", chart.spec}, {"wide", chart.wide}});
  }
  return out;
}

}  // namespace

namespace {

// Importance weighs a study's trials against each other: on the page of a search (ShowsImportance) with trials to
// compare, not on a trial's own page (the dashboard's, one trial's measurements), with the checklist, which reads it.
bool PageShowsImportance(const StudyData& data, PageParts parts) {
  return parts != PageParts::kRecords && data.spec.procedure.kind != "throughput" && ShowsImportance(data) &&
         data.trials.size() > 1;
}

std::vector<PageSection> Sections(const StudyData& data, const StudyPageOptions& options, PageParts parts,
                                  const HyperparameterImportance* importance) {
  const Charting sizes = ChartSizes(data);
  const bool records = parts != PageParts::kMeasurements;
  const bool measurements = parts != PageParts::kRecords;
  std::vector<PageSection> sections;
  // A throughput sweep measures speed: no section judges its batch sizes by validation quality.
  const bool judged = data.spec.procedure.kind != "throughput";
  if (records) {
    if (data.spec.replicas > 1 && judged) sections.push_back(VarianceSection(data, sizes));
    if (data.spec.procedure.ComparesWithParent()) sections.push_back(ParentSection(data, sizes));
    if (judged) {
      sections.push_back(IsolationSection(data, sizes));
      sections.push_back(AxisPlotSection(data, sizes));
      sections.push_back(InteractionSection(data, sizes));
    }
  }
  if (importance != nullptr) sections.push_back(ImportanceSection(data, *importance, sizes.normal, sizes.wide));
  // The curves of the best trials only, when there are too many to draw one line each.
  const StudyData shown =
      measurements ? SubsetOfTrials(data, CurveTrials(data, options.max_curve_trials)) : StudyData{};
  // The step budget reads the training split's evaluations, the throughput the training steps' times.
  if (measurements && data.spec.procedure.kind == "fit-steps") sections.push_back(StepBudgetSection(data, sizes));
  if (measurements && data.spec.procedure.kind == "throughput") sections.push_back(ThroughputSection(data, sizes));
  if (measurements && data.spec.procedure.kind == "instability") sections.push_back(ProbeSection(data, sizes));
  if (measurements && data.spec.procedure.kind == "warmup") sections.push_back(WarmupSection(data, sizes));
  if (measurements && data.spec.procedure.kind == "clipping") sections.push_back(ClippingSection(data, sizes));
  if (measurements) sections.push_back(CurvesSection(data, shown, sizes));
  if (records && judged) sections.push_back(BestStepSection(data, sizes));
  if (measurements) sections.push_back(GradientSection(data, shown, sizes));
  // A trade-off needs trials to compare: not on a trial's own page (the dashboard's, one trial's measurements).
  if (measurements && judged && data.trials.size() > 1) sections.push_back(ParetoSection(data, sizes.normal));
  if (records && judged) sections.push_back(BootstrapSection(data, options, sizes));
  if (records) sections.push_back(TimeSection(data, sizes));
  // Places on the whole page, in the order above, whichever parts were asked for.
  std::vector<std::string> order;
  if (data.spec.replicas > 1 && judged) order.emplace_back("variance");
  if (data.spec.procedure.ComparesWithParent()) order.emplace_back("parent");
  if (data.spec.procedure.kind == "fit-steps") order.emplace_back("fit-steps");
  if (data.spec.procedure.kind == "throughput") order.emplace_back("throughput");
  if (data.spec.procedure.kind == "instability") order.emplace_back("instability-probe");
  if (data.spec.procedure.kind == "warmup") order.emplace_back("warmup");
  if (data.spec.procedure.kind == "clipping") order.emplace_back("clipping");
  for (const char* id : {"isolation", "axis-plots", "interactions", "importance", "curves", "best-steps", "gradients",
                         "enough", "pareto", "time"}) {
    order.emplace_back(id);
  }
  for (auto& section : sections) {
    section.position = static_cast<int>(std::find(order.begin(), order.end(), section.id) - order.begin());
  }
  std::stable_sort(sections.begin(), sections.end(),
                   [](const PageSection& a, const PageSection& b) { return a.position < b.position; });
  return sections;
}

std::optional<HyperparameterImportance> PageImportance(const StudyData& data, const StudyPageOptions& options,
                                                       PageParts parts) {
  if (!PageShowsImportance(data, parts)) return std::nullopt;
  return AnalyzeImportance(data, options.importance);
}

}  // namespace

std::vector<PageSection> StudyPageSections(const StudyData& data, const StudyPageOptions& options, PageParts parts) {
  const std::optional<HyperparameterImportance> importance = PageImportance(data, options, parts);
  return Sections(data, options, parts, importance ? &*importance : nullptr);
}

StudyPage BuildStudyPage(const StudyData& data, const StudyPageOptions& options, PageParts parts) {
  const std::optional<HyperparameterImportance> importance = PageImportance(data, options, parts);
  StudyPage page{.sections = Sections(data, options, parts, importance ? &*importance : nullptr)};
  if (parts != PageParts::kRecords) page.diagnostics = importance ? Diagnose(data, *importance) : Diagnose(data);
  return page;
}

nlohmann::json PageSectionJson(const PageSection& section) {
  return {{"id", section.id},
          {"position", section.position},
          {"title", section.title},
          {"explanation", section.explanation},
          {"empty", section.empty_text},
          {"charts", ChartsJson(section.charts)},
          {"more_title", section.more_title},
          {"more_charts", ChartsJson(section.more_charts)},
          {"folded_title", section.folded_title},
          {"folded_charts", ChartsJson(section.folded_charts)}};
}

nlohmann::json FindingJson(const Diagnostic& finding) {
  return {{"id", finding.id},
          {"severity", SeverityName(finding.severity)},
          {"title", finding.title},
          {"detail", finding.detail},
          {"suggestion", finding.suggestion},
          {"section", finding.section},
          {"substudy", finding.substudy},
          {"param", finding.param_id},
          {"trials", finding.trials},
          {"expand_to", finding.expand_to ? nlohmann::json(*finding.expand_to) : nlohmann::json()},
          {"handled", finding.handled}};
}

}  // namespace dltune
