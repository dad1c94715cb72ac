// Diagnostics about the search space: boundaries, infeasible trials, instability at high learning rates.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "core/strings.h"
#include "diagnostic_checks.h"

namespace dltune::diagnostic_checks {
namespace {

using analysis_util::Num;
using analysis_util::Percent;
using analysis_util::RankedTrial;
using analysis_util::TrialList;
using analysis_util::UnitPosition;

// The numeric value of `param` in `trial`, if it has one.
std::optional<double> ValueIn(const TrialRecord& trial, const Param& param) {
  const auto it = trial.params.find(param.id);
  if (it == trial.params.end()) return std::nullopt;
  return NumericValue(it->second);
}

// Range params that are searched (nuisance, or scientific in joint mode: separate mode has only scientific lists).
std::vector<const Param*> SearchedRanges(const StudyData& data) {
  std::vector<const Param*> ranges;
  if (!data.spec.space) return ranges;
  for (const Param& param : data.spec.space->params()) {
    if (param.Varies() && analysis_util::IsRange(param)) ranges.push_back(&param);
  }
  return ranges;
}

std::string Join(const std::vector<std::string>& items) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += i + 1 == items.size() ? " and " : ", ";
    text += items[i];
  }
  return text;
}

std::string RangeText(const Param& param) {
  return fmt::format("{}range [{}, {}]", param.scale == Scale::kLog ? "log " : "", Num(param.min), Num(param.max));
}

// A bound beyond the current one: a decade for log ranges, half the width for linear ones (integers rounded).
double ExpandedBound(const Param& param, bool upper) {
  double bound;
  if (param.scale == Scale::kLog) {
    bound = upper ? param.max * 10 : param.min / 10;
  } else {
    const double half = (param.max - param.min) / 2;
    bound = upper ? param.max + half : param.min - half;
    if (!upper && param.min > 0) bound = std::max(bound, 0.0);  // a positive range rarely makes sense below 0
  }
  if (param.kind == ParamKind::kInt) bound = upper ? std::ceil(bound) : std::floor(bound);
  if (param.kind == ParamKind::kInt && param.scale == Scale::kLog) bound = std::max(bound, 1.0);
  // Fractions the training reads as such end at 1 (a momentum of 1 never forgets, a dropout of 1 drops everything).
  static const std::set<std::string> kFractions = {"momentum", "dropout",        "label_smoothing", "beta1",
                                                   "beta2",    "final_fraction", "ema_decay"};
  if (upper && kFractions.count(param.name) != 0) bound = std::min(bound, 0.999);
  return bound;
}

// The trials of each sub-study, by sub-study index.
std::map<std::size_t, std::vector<const TrialRecord*>> BySubStudy(const StudyData& data) {
  std::map<std::size_t, std::vector<const TrialRecord*>> groups;
  for (const TrialRecord& trial : data.trials) groups[trial.substudy].push_back(&trial);
  return groups;
}

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return analysis_util::Quantile(values, 0.5);
}

}  // namespace

void CheckBoundary(const Context& context, std::vector<Diagnostic>& out) {
  constexpr std::size_t kMinTrials = 5, kBest = 3;
  constexpr double kEdge = 0.1;
  for (const auto& group : context.ranked) {
    const std::string& label = group.front().trial->substudy_label;
    for (const Param* param : SearchedRanges(context.data)) {
      std::vector<std::pair<const RankedTrial*, double>> with;  // best first
      for (const RankedTrial& ranked : group) {
        if (const auto value = ValueIn(*ranked.trial, *param)) with.emplace_back(&ranked, *value);
      }
      if (with.size() < kMinTrials) continue;
      const auto top = std::vector(with.begin(), with.begin() + kBest);
      const bool upper = std::all_of(top.begin(), top.end(),
                                     [&](const auto& t) { return UnitPosition(*param, t.second) >= 1 - kEdge; });
      const bool lower =
          std::all_of(top.begin(), top.end(), [&](const auto& t) { return UnitPosition(*param, t.second) <= kEdge; });
      if (!upper && !lower) continue;
      Diagnostic d{.id = "boundary",
                   .severity = Severity::kWarning,
                   .section = kBoundarySection,
                   .substudy = context.SubStudyField(label),
                   .param_id = param->id};
      std::vector<std::string> objectives, values;
      for (const auto& [ranked, value] : top) {
        d.trials.push_back(ranked->trial->number);
        objectives.push_back(Num(ranked->objective));
        values.push_back(Num(value));
      }
      const std::string where = context.single_substudy ? "" : " of " + label;
      const char* side = upper ? "upper" : "lower";
      d.title = fmt::format("The best trials{} are at the {} edge of {}", where, side, param->id);
      d.detail = fmt::format(
          "The {} best of the {} completed trials{} that have {} (trials {}: {} {}) have {} {}, all in the {} 10% of "
          "its {}.",
          kBest, with.size(), where, param->id, TrialList(d.trials), context.objective.Name(), Join(objectives),
          param->id, Join(values), upper ? "top" : "bottom", RangeText(*param));
      const std::string why = fmt::format("the best {} trials{} are in its {} 10%, so better points may lie beyond it",
                                          kBest, where, upper ? "top" : "bottom");
      if (!upper && param->scale == Scale::kLinear && param->min == 0) {
        d.suggestion = fmt::format(
            "If {} can be negative, lower its min below 0 and run the study again; if 0 is its natural limit, the "
            "best trials prefer none of it: consider fixing it at 0 ({}).",
            param->id, why);
      } else if (const double bound = ExpandedBound(*param, upper); bound == (upper ? param->max : param->min)) {
        d.suggestion =
            fmt::format("{} is at its natural limit {}: {} — consider fixing it there.", param->id, Num(bound), why);
      } else {
        d.expand_to = bound;
        d.suggestion = fmt::format("{} {}'s {} {} {} (e.g. to {}) and run the study again (dltune plan expand): {}.",
                                   upper ? "Raise" : "Lower", param->id, upper ? "max" : "min",
                                   upper ? "above" : "below", Num(upper ? param->max : param->min), Num(bound), why);
      }
      out.push_back(std::move(d));
    }
  }
}

void CheckInfeasibleShare(const Context& context, std::vector<Diagnostic>& out) {
  constexpr std::size_t kMinFinished = 5;
  constexpr double kWarning = 0.2, kProblem = 0.5, kMinShift = 0.3;
  for (const auto& [index, trials] : BySubStudy(context.data)) {
    std::vector<const TrialRecord*> infeasible, completed;
    std::size_t finished = 0;
    for (const TrialRecord* trial : trials) {
      if (!IsFinished(trial->state)) continue;
      ++finished;
      if (trial->state == TrialState::kInfeasible) infeasible.push_back(trial);
      if (trial->state == TrialState::kCompleted) completed.push_back(trial);
    }
    if (finished < kMinFinished) continue;
    const double share = static_cast<double>(infeasible.size()) / static_cast<double>(finished);
    if (share <= kWarning) continue;
    const std::string& label = trials.front()->substudy_label;
    const std::string where = context.OfSubStudy(label);
    Diagnostic d{.id = "infeasible_share",
                 .severity = share > kProblem ? Severity::kProblem : Severity::kWarning,
                 .section = kInsightSection,
                 .substudy = context.SubStudyField(label)};
    for (const TrialRecord* trial : infeasible) d.trials.push_back(trial->number);
    d.title = fmt::format("{} of the finished trials{} are infeasible", Percent(share), where);

    std::map<std::string, int> reasons;
    for (const TrialRecord* trial : infeasible) {
      std::string reason = trial->reason.empty() ? "no reason given" : trial->reason;
      if (reason.size() > 80) reason = reason.substr(0, 77) + "...";
      ++reasons[reason];
    }
    std::vector<std::pair<std::string, int>> by_count(reasons.begin(), reasons.end());
    std::stable_sort(by_count.begin(), by_count.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    std::vector<std::string> reason_texts;
    for (std::size_t i = 0; i < std::min<std::size_t>(by_count.size(), 3); ++i) {
      reason_texts.push_back(fmt::format("'{}' x{}", by_count[i].first, by_count[i].second));
    }
    d.detail = fmt::format("{} of the {} finished trials{} are infeasible ({}): trials {}; reasons: {}.",
                           infeasible.size(), finished, where, Percent(share), TrialList(d.trials), Join(reason_texts));

    // The range param along which infeasible trials differ most from completed ones.
    const Param* shifted = nullptr;
    double best_shift = kMinShift;
    double infeasible_median = 0, completed_median = 0;
    for (const Param* param : SearchedRanges(context.data)) {
      std::vector<double> bad, good;
      for (const TrialRecord* trial : infeasible) {
        if (const auto v = ValueIn(*trial, *param)) bad.push_back(*v);
      }
      for (const TrialRecord* trial : completed) {
        if (const auto v = ValueIn(*trial, *param)) good.push_back(*v);
      }
      if (bad.empty() || good.empty()) continue;
      const double bad_median = Median(bad), good_median = Median(good);
      const double shift = std::abs(UnitPosition(*param, bad_median) - UnitPosition(*param, good_median));
      if (shift >= best_shift) {
        best_shift = shift;
        shifted = param;
        infeasible_median = bad_median;
        completed_median = good_median;
      }
    }
    d.suggestion =
        "Adjust the search space to avoid sampling infeasible points (sometimes this needs reparameterizing it)";
    if (shifted) {
      const bool higher = infeasible_median > completed_median;
      d.param_id = shifted->id;
      d.detail += fmt::format(" Infeasible trials have {} {} than completed ones (median {} vs {}).",
                              higher ? "higher" : "lower", shifted->id, Num(infeasible_median), Num(completed_median));
      d.suggestion += fmt::format(": narrow {}'s range away from its {} end, where the infeasible trials lie",
                                  shifted->id, higher ? "upper" : "lower");
    }
    d.suggestion +=
        ". A large share can also indicate a bug in the training code: read the reasons and the trials' logs.";
    out.push_back(std::move(d));
  }
}

void CheckInstability(const Context& context, std::vector<Diagnostic>& out) {
  constexpr double kConcentration = 0.8, kNear = 0.2;
  constexpr std::size_t kMinInfeasible = 2;
  std::optional<GradientNorms> norms;  // computed when first needed, for the clipping suggestion
  const auto groups = BySubStudy(context.data);
  for (const auto& group : context.ranked) {
    const std::size_t index = group.front().trial->substudy;
    const std::string& label = group.front().trial->substudy_label;
    for (const Param* param : SearchedRanges(context.data)) {
      if (!analysis_util::IsLearningRate(*param)) continue;
      struct Point {
        double value;
        bool infeasible;
        std::uint64_t trial;
      };
      std::vector<Point> points;
      for (const TrialRecord* trial : groups.at(index)) {
        const auto value = ValueIn(*trial, *param);
        if (!value) continue;
        if (trial->state == TrialState::kInfeasible) {
          points.push_back({*value, true, trial->number});
        } else if (trial->state == TrialState::kCompleted && BestObjectiveOf(context.data, *trial)) {
          points.push_back({*value, false, trial->number});
        }
      }
      std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.value < b.value; });
      // The lowest infeasible value t with >= 80% infeasible at or above it (at least 2 of them).
      std::optional<std::size_t> threshold;
      for (std::size_t i = 0; i < points.size() && !threshold; ++i) {
        if (!points[i].infeasible) continue;
        std::size_t at_or_above = 0, bad = 0;
        for (const Point& p : points) {
          if (p.value >= points[i].value) {
            ++at_or_above;
            bad += p.infeasible ? 1 : 0;
          }
        }
        if (bad >= kMinInfeasible && static_cast<double>(bad) >= kConcentration * static_cast<double>(at_or_above)) {
          threshold = i;
        }
      }
      if (!threshold) continue;
      const double t = points[*threshold].value;
      const auto best = std::find_if(group.begin(), group.end(),
                                     [&](const RankedTrial& r) { return ValueIn(*r.trial, *param).has_value(); });
      if (best == group.end()) continue;
      const double b = *ValueIn(*best->trial, *param);
      const double distance = UnitPosition(*param, t) - UnitPosition(*param, b);
      if (!(b < t && distance <= kNear)) continue;

      Diagnostic d{.id = "instability",
                   .severity = Severity::kProblem,
                   .section = kWarmupSection,
                   .substudy = context.SubStudyField(label),
                   .param_id = param->id};
      std::size_t at_or_above = 0;
      std::vector<std::uint64_t> bad;
      for (const Point& p : points) {
        if (p.value < t) continue;
        ++at_or_above;
        if (p.infeasible) bad.push_back(p.trial);
      }
      std::sort(bad.begin(), bad.end());
      d.trials = bad;
      d.trials.push_back(best->trial->number);
      const std::string where = context.OfSubStudy(label);
      d.title = fmt::format("The best {}{} is at the edge of instability", param->id, where);
      d.detail = fmt::format(
          "{} of the {} finished trials{} with {} >= {} are infeasible (trials {}); the best trial, {} ({} {}), has {} "
          "{}, {} of the {}range below that threshold.",
          bad.size(), at_or_above, where, param->id, Num(t), TrialList(bad), best->trial->number,
          context.objective.Name(), Num(best->objective), param->id, Num(b), Percent(distance),
          param->scale == Scale::kLog ? "log " : "");
      if (!norms) norms = GradientNormAnalysis(context.data);
      const std::string clip =
          norms->p90 ? fmt::format(" (the 90th percentile of gradient norms is {})", Num(*norms->p90)) : "";
      d.suggestion = fmt::format(
          "Instability may be keeping better learning rates out of reach. Probe it (dltune plan instability --from "
          "{}: the best configuration at 2x, 5x and 10x its learning rate); then learning-rate warmup (dltune plan "
          "warmup: a base learning rate 10x the unstable one, warmup_steps up to 10% of max_train_steps) or gradient "
          "clipping (dltune plan clipping: around the 90th percentile of the gradient norms{}); lower the learning "
          "rate only as a last resort (dltune plan narrow-lr).",
          ShellQuote(context.data.study.name), clip);
      out.push_back(std::move(d));
    }
  }
}

}  // namespace dltune::diagnostic_checks
