// Diagnostics from the training curves: overfitting, late noise, the step budget, a rising training loss, input
// waits and clipping.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/eval_schedule.h"
#include "diagnostic_checks.h"

namespace dltune::diagnostic_checks {
namespace {

using analysis_util::Num;
using analysis_util::Percent;

// "a; b; c", at most `limit` items, then "; and 4 more".
std::string JoinLines(const std::vector<std::string>& items, std::size_t limit = 5) {
  std::string text;
  const std::size_t shown = std::min(items.size(), limit);
  for (std::size_t i = 0; i < shown; ++i) text += (i > 0 ? "; " : "") + items[i];
  if (shown < items.size()) text += fmt::format("; and {} more", items.size() - shown);
  return text;
}

// Fires one diagnostic per sub-study for the best trials `flag` describes (it returns "" for a trial it passes).
template <typename Flag>
void PerSubStudy(const Context& context, std::vector<Diagnostic>& out, const Diagnostic& base, Flag flag,
                 const std::string& title, const std::string& lead) {
  for (const auto& group : context.ranked) {
    const std::string& label = group.front().trial->substudy_label;
    Diagnostic d = base;
    std::vector<std::string> evidence;
    for (const auto& ranked : context.Top(group)) {
      std::string found = flag(ranked);
      if (found.empty()) continue;
      d.trials.push_back(ranked.trial->number);
      evidence.push_back(std::move(found));
    }
    if (evidence.empty()) continue;
    d.substudy = context.SubStudyField(label);
    const std::string where = context.OfSubStudy(label);
    d.title = fmt::format(fmt::runtime(title), where);
    d.detail = fmt::format(fmt::runtime(lead), where) + " " + JoinLines(evidence) + ".";
    out.push_back(std::move(d));
  }
}

}  // namespace

void CheckOverfitting(const Context& context, std::vector<Diagnostic>& out) {
  constexpr double kWorse = 0.05;
  constexpr std::size_t kMinEvals = 3;
  const Direction direction = context.objective.direction;
  const Diagnostic base{
      .id = "overfitting",
      .severity = Severity::kWarning,
      .suggestion =
          "Re-run with additional regularization, or better tuned regularization params, before comparing the "
          "scientific values: dropout (the built-in workloads), label_smoothing and weight_decay (the trainer) are "
          "params to add to the space (e.g. label_smoothing: {min: 0.0, max: 0.2}; dltune show STUDY --spec writes "
          "the spec to start from). This may not apply when the scientific params are themselves regularization "
          "strengths. Retrospective checkpoint selection already uses the best step.",
      .section = kCurvesSection};
  PerSubStudy(
      context, out, base,
      [&](const analysis_util::RankedTrial& ranked) -> std::string {
        const auto series = analysis_util::ObjectiveSeries(context.data, ranked.trial->number, context.objective);
        if (series.size() < kMinEvals) return "";
        auto best = series.begin();
        double lo = series.front().value, hi = lo;
        for (auto it = series.begin(); it != series.end(); ++it) {
          if (IsBetter(it->value, best->value, direction)) best = it;
          lo = std::min(lo, it->value);
          hi = std::max(hi, it->value);
        }
        const CurvePoint& last = series.back();
        const double worse = direction == Direction::kMinimize ? last.value - best->value : best->value - last.value;
        if (!(hi > lo && worse > kWorse * (hi - lo))) return "";
        return fmt::format("trial {}: {} {} at step {}, {} at the last evaluation (step {}), worse by {} of its range",
                           ranked.trial->number, context.objective.Name(), Num(best->value), best->step,
                           Num(last.value), last.step, Percent(worse / (hi - lo)));
      },
      "Problematic overfitting in the best trials{}",
      "Among the best trials{}, the objective got worse after its best step by more than 5% of the range of its "
      "curve:");
}

void CheckLateVariance(const Context& context, std::vector<Diagnostic>& out) {
  constexpr double kLate = 0.75, kNoise = 0.05;
  constexpr std::size_t kMinEvals = 3;
  const double late = kLate * static_cast<double>(context.data.spec.max_train_steps);
  const Diagnostic base{
      .id = "late_variance",
      .severity = Severity::kWarning,
      .suggestion =
          "Each trial may end on a lucky or unlucky step, which blurs comparisons and makes the best trial hard to "
          "reproduce: increase the batch size (dltune plan throughput says which pay), evaluate more validation data "
          "(training.valid_sample_examples), decay the learning rate (schedule: linear or cosine), or average the "
          "weights (Polyak averaging: the param ema_decay, e.g. 0.999).",
      .section = kCurvesSection};
  PerSubStudy(
      context, out, base,
      [&](const analysis_util::RankedTrial& ranked) -> std::string {
        std::vector<double> values;
        for (const CurvePoint& p :
             analysis_util::ObjectiveSeries(context.data, ranked.trial->number, context.objective)) {
          if (static_cast<double>(p.step) > late) values.push_back(p.value);
        }
        if (values.size() < kMinEvals) return "";
        std::vector<double> diffs;
        for (std::size_t i = 1; i < values.size(); ++i) diffs.push_back(values[i] - values[i - 1]);
        const double mean_diff = std::accumulate(diffs.begin(), diffs.end(), 0.0) / static_cast<double>(diffs.size());
        double squares = 0;
        for (const double d : diffs) squares += (d - mean_diff) * (d - mean_diff);
        const double noise = std::sqrt(squares / static_cast<double>(diffs.size() - 1)) / std::sqrt(2.0);
        double level = 0;
        for (const double v : values) level += std::abs(v);
        level /= static_cast<double>(values.size());
        if (!(level > 0 && noise > kNoise * level)) return "";
        return fmt::format("trial {}: step-to-step noise {} on a level of {} ({}) over its last {} evaluations",
                           ranked.trial->number, Num(noise), Num(level), Percent(noise / level), values.size());
      },
      "High step-to-step variance late in training{}",
      "In the last 25% of training, the objective of the best trials{} varies from evaluation to evaluation by more "
      "than 5% of its level:");
}

void CheckComputeBound(const Context& context, std::vector<Diagnostic>& out) {
  constexpr double kLate = 0.75;
  constexpr std::size_t kMinTrials = 3;
  const std::int64_t max_steps = context.data.spec.max_train_steps;
  if (max_steps <= 0) return;
  std::vector<std::string> evidence;
  std::vector<std::uint64_t> trials;
  for (const auto& group : context.ranked) {
    for (const auto& ranked : context.Top(group)) {
      const auto step = BestStepOf(context.data, *ranked.trial);
      if (!step) continue;
      if (static_cast<double>(*step) <= kLate * static_cast<double>(max_steps)) return;
      trials.push_back(ranked.trial->number);
      evidence.push_back(fmt::format("trial {} at step {}", ranked.trial->number, *step));
    }
  }
  if (trials.size() < kMinTrials) return;
  out.push_back(
      {.id = "compute_bound",
       .severity = Severity::kInfo,
       .title = "The best trials are still improving at the end of training",
       .detail = fmt::format("The best steps of all the best trials ({} per sub-study) are in the last 25% of the {} "
                             "training steps: {}.",
                             3, max_steps, JoinLines(evidence)),
       .suggestion = fmt::format(
           "Train longer: raise max_train_steps (e.g. to {}) and re-tune the learning-rate decay schedule. If training "
           "is compute-bound, tune in rounds of increasing length instead (\"Deciding how long to train when "
           "training is compute-bound\").",
           2 * max_steps),
       .section = kStepsSection,
       .trials = trials});
}

void CheckStepsTooHigh(const Context& context, std::vector<Diagnostic>& out) {
  constexpr double kEarly = 0.1;
  constexpr std::size_t kMinTrials = 3;
  const std::int64_t max_steps = context.data.spec.max_train_steps;
  if (max_steps <= 0) return;
  const std::vector<BestStepPoint> steps = BestSteps(context.data);
  if (steps.size() < kMinTrials) return;
  if (!std::all_of(steps.begin(), steps.end(), [&](const BestStepPoint& p) { return p.fraction <= kEarly; })) return;
  const auto latest = std::max_element(steps.begin(), steps.end(), [](const BestStepPoint& a, const BestStepPoint& b) {
    return a.best_step < b.best_step;
  });
  Diagnostic d{.id = "steps_too_high",
               .severity = Severity::kWarning,
               .title = "Every trial reached its best objective in the first 10% of training",
               .detail = fmt::format("All {} completed trials have their best step in the first 10% of the {} training "
                                     "steps; the latest is trial {} at step {}.",
                                     steps.size(), max_steps, latest->trial, latest->best_step),
               .suggestion = fmt::format(
                   "max_train_steps is too high: lower it (e.g. to {}, twice the latest best step) and spend the "
                   "compute on more trials; when in doubt, err on the side of training longer, and evaluate often "
                   "enough to see where the best step lies.",
                   std::max<std::int64_t>(2 * latest->best_step, 1)),
               .section = kStepsSection};
  for (const BestStepPoint& p : steps) d.trials.push_back(p.trial);
  out.push_back(std::move(d));
}

void CheckTrainingLossRising(const Context& context, std::vector<Diagnostic>& out) {
  constexpr std::size_t kMinLosses = 10;
  constexpr double kRise = 0.1;
  std::size_t checked = 0;
  std::vector<std::uint64_t> flagged;
  std::vector<std::string> evidence;
  for (const TrialRecord& trial : context.data.trials) {
    if (trial.state != TrialState::kCompleted) continue;
    std::vector<CurvePoint> losses;
    for (const TrainMeasurement& m : analysis_util::TrainOf(context.data, trial.number)) {
      if (m.loss && std::isfinite(*m.loss)) losses.push_back({m.step, *m.loss});
    }
    if (losses.size() < kMinLosses) continue;
    ++checked;
    const std::size_t window = std::max<std::size_t>(losses.size() / 10, 1);
    std::vector<CurvePoint> smooth;  // moving average, at the step of each window's last point
    double sum = 0;
    for (std::size_t i = 0; i < losses.size(); ++i) {
      sum += losses[i].value;
      if (i >= window) sum -= losses[i - window].value;
      if (i + 1 >= window) smooth.push_back({losses[i].step, sum / static_cast<double>(window)});
    }
    const auto [lo, hi] = std::minmax_element(
        smooth.begin(), smooth.end(), [](const CurvePoint& a, const CurvePoint& b) { return a.value < b.value; });
    const CurvePoint& end = smooth.back();
    if (!(hi->value > lo->value && end.value - lo->value > kRise * (hi->value - lo->value))) continue;
    flagged.push_back(trial.number);
    evidence.push_back(fmt::format("trial {} fell to {} at step {} and ends at {} (step {})", trial.number,
                                   Num(lo->value), lo->step, Num(end.value), end.step));
  }
  if (flagged.empty()) return;
  const bool most = 2 * flagged.size() >= checked;
  out.push_back(
      {.id = "training_loss_rising",
       .severity = most ? Severity::kProblem : Severity::kWarning,
       .title =
           fmt::format("The training loss rises during training in {} of {} completed trials", flagged.size(), checked),
       .detail = fmt::format("Smoothed over a tenth of its steps, the training loss ends more than 10% of its range "
                             "above its minimum: {}.",
                             JoinLines(evidence)),
       .suggestion =
           "Training loss increasing during training usually indicates a bug in the training pipeline (data order or "
           "labels, the learning-rate schedule, the loss): check it before tuning further. If only trials with high "
           "learning rates show it, it is instability: dltune plan instability probes it, then warmup or gradient "
           "clipping (dltune plan warmup, dltune plan clipping).",
       .section = kCurvesSection,
       .trials = flagged});
}

void CheckInputBound(const Context& context, std::vector<Diagnostic>& out) {
  constexpr double kWait = 0.1;
  double wait = 0, step = 0;
  std::vector<std::pair<double, std::uint64_t>> per_trial;  // (wait share, trial)
  for (const TrialRecord& trial : context.data.trials) {
    double trial_wait = 0, trial_step = 0;
    for (const TrainMeasurement& m : analysis_util::TrainOf(context.data, trial.number)) {
      if (!m.step_time || !m.data_wait || !std::isfinite(*m.step_time) || !std::isfinite(*m.data_wait)) continue;
      if (*m.step_time < 0 || *m.data_wait < 0) continue;
      trial_wait += *m.data_wait;
      trial_step += *m.step_time;
    }
    wait += trial_wait;
    step += trial_step;
    if (trial_step > 0) per_trial.emplace_back(trial_wait / trial_step, trial.number);
  }
  if (!(step > 0 && wait > kWait * step)) return;
  std::stable_sort(per_trial.begin(), per_trial.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> worst;
  std::vector<std::uint64_t> trials;
  for (std::size_t i = 0; i < std::min<std::size_t>(per_trial.size(), 3); ++i) {
    worst.push_back(fmt::format("trial {}: {}", per_trial[i].second, Percent(per_trial[i].first)));
    trials.push_back(per_trial[i].second);
  }
  out.push_back(
      {.id = "input_bound",
       .severity = Severity::kWarning,
       .title = fmt::format("Training waits for input {} of the time", Percent(wait / step)),
       .detail = fmt::format("Over the {} trials with timings, {} of step time was spent waiting for input (most: "
                             "{}).",
                             per_trial.size(), Percent(wait / step), JoinLines(worst)),
       .suggestion = "The input pipeline limits training speed: profile it, prefetch batches, do expensive "
                     "preprocessing once offline, keep the data next to the training process, and look for "
                     "synchronization barriers that stall prefetching; with several trials per machine, run fewer at "
                     "once.",
       .section = kInputSection,
       .trials = trials});
}

void CheckAggressiveClipping(const Context& context, std::vector<Diagnostic>& out) {
  constexpr double kClipped = 0.5;
  std::optional<GradientNorms> norms;
  const Diagnostic base{.id = "aggressive_clipping", .severity = Severity::kWarning, .section = kClippingSection};
  const std::size_t before = out.size();
  PerSubStudy(
      context, out, base,
      [&](const analysis_util::RankedTrial& ranked) -> std::string {
        std::int64_t flagged = 0, clipped = 0;
        for (const TrainMeasurement& m : analysis_util::TrainOf(context.data, ranked.trial->number)) {
          if (!m.clipped) continue;
          ++flagged;
          clipped += *m.clipped ? 1 : 0;
        }
        if (flagged == 0) return "";
        const double share = static_cast<double>(clipped) / static_cast<double>(flagged);
        if (share <= kClipped) return "";
        return fmt::format("trial {} clipped {} of {} steps ({})", ranked.trial->number, clipped, flagged,
                           Percent(share));
      },
      "Extremely aggressive gradient clipping in the best trials{}",
      "More than 50% of the updates of the best trials{} were clipped:");
  for (std::size_t i = before; i < out.size(); ++i) {
    if (!norms) norms = GradientNormAnalysis(context.data);
    out[i].suggestion =
        "Clipping this often is in essence a strange way of reducing the learning rate: lower the learning rate "
        "instead, and keep clipping for outliers with a threshold just above the typical gradient norm" +
        (norms->p90 ? fmt::format(" (the 90th percentile of recorded norms is {})", Num(*norms->p90)) : std::string()) +
        ".";
  }
}

namespace {

// The lag (in evaluations) at which the series repeats most strongly, and that autocorrelation; lag 0 when it does
// not. Second differences take out a trend, however curved, and keep a wave; a wave is anti-correlated at half its
// period and correlated again at twice it, which a slow drift and noise are not.
std::pair<std::size_t, double> Period(const std::vector<double>& values) {
  std::vector<double> d;
  for (std::size_t i = 2; i < values.size(); ++i) d.push_back(values[i] - 2 * values[i - 1] + values[i - 2]);
  if (d.size() < 4) return {0, 0.0};
  const double mean = std::accumulate(d.begin(), d.end(), 0.0) / static_cast<double>(d.size());
  double variance = 0;
  for (double& x : d) {
    x -= mean;
    variance += x * x;
  }
  if (!(variance > 0)) return {0, 0.0};
  const auto r = [&](std::size_t lag) {
    double sum = 0;
    for (std::size_t i = lag; i < d.size(); ++i) sum += d[i] * d[i - lag];
    return sum / variance;
  };
  std::pair<std::size_t, double> best{0, 0.0};
  for (std::size_t lag = 2; 2 * lag <= d.size(); ++lag) {
    if (r((lag + 1) / 2) > -0.2) continue;                 // no trough at half the period
    if (2 * lag < d.size() && r(2 * lag) < 0.3) continue;  // no second repeat
    if (r(lag) > best.second) best = {lag, r(lag)};
  }
  return best;
}

}  // namespace

void CheckPeriodicity(const Context& context, std::vector<Diagnostic>& out) {
  constexpr std::size_t kMinEvals = 16;
  constexpr double kStrong = 0.5;
  const StudyData& data = context.data;
  // A period in evaluations is one in steps only when evaluations are evenly spaced.
  if (EvalSchedule::Parse(data.spec.training.eval_schedule).DenseEarly()) return;
  std::size_t checked = 0;
  std::vector<std::string> evidence;
  std::vector<std::uint64_t> trials;
  for (const TrialRecord& trial : data.trials) {
    if (trial.state != TrialState::kCompleted) continue;
    std::vector<double> values;
    for (const CurvePoint& p : analysis_util::ObjectiveSeries(data, trial.number, context.objective)) {
      values.push_back(p.value);
    }
    if (values.size() < kMinEvals) continue;
    ++checked;
    const auto [lag, strength] = Period(values);
    if (lag == 0 || strength < kStrong) continue;
    trials.push_back(trial.number);
    if (evidence.size() < 5) {
      evidence.push_back(
          fmt::format("trial {}: every {} evaluations (autocorrelation {})", trial.number, lag, Num(strength)));
    }
  }
  // A bug in the data pipeline shows in most trials, not in one.
  if (trials.empty() || 2 * trials.size() < checked) return;
  out.push_back(
      {.id = "periodic_validation",
       .severity = Severity::kWarning,
       .title = fmt::format("The {} of {} of {} trials rises and falls periodically", context.objective.Name(),
                            trials.size(), checked),
       .detail = fmt::format("The objective's ups and downs repeat: {}. The playbook: \"Periodicity in "
                             "valid/test metrics (when using a shuffled train/validation/test split) can indicate "
                             "implementation bugs\".",
                             fmt::join(evidence, "; ")),
       .suggestion = "check that the training data is shuffled every epoch and that no validation or test example is "
                     "also a training example (dltune space check reports examples shared by a built-in workload's "
                     "splits)",
       .section = kPeriodicSection,
       .trials = trials});
}

}  // namespace dltune::diagnostic_checks
