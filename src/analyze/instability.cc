#include "dltune/analyze/instability.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analysis_util.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

using analysis_util::Num;

// The median of values[begin, end) (the mean of the two middle values of an even count, as Quantile's 0.5), by
// selection: linear in the window, which slides over every step of a run.
double MedianOf(const std::vector<double>& values, std::size_t begin, std::size_t end, std::vector<double>& scratch) {
  scratch.assign(values.begin() + static_cast<std::ptrdiff_t>(begin),
                 values.begin() + static_cast<std::ptrdiff_t>(end));
  const auto middle = scratch.begin() + static_cast<std::ptrdiff_t>(scratch.size() / 2);
  std::nth_element(scratch.begin(), middle, scratch.end());
  if (scratch.size() % 2 == 1) return *middle;
  return (*std::max_element(scratch.begin(), middle) + *middle) / 2;
}

// The largest gradient norm against the median of the window before it.
void FindGradientSpike(const std::vector<LossStep>& steps, std::size_t window, StabilityVerdict& verdict) {
  std::vector<double> norms;
  std::vector<std::int64_t> at;
  for (const LossStep& s : steps) {
    if (s.grad_norm && std::isfinite(*s.grad_norm)) {
      norms.push_back(*s.grad_norm);
      at.push_back(s.step);
    }
  }
  std::vector<double> scratch;
  for (std::size_t i = window; i < norms.size(); ++i) {
    const double before = MedianOf(norms, i - window, i, scratch);
    if (!(before > 0)) continue;
    const double jump = norms[i] / before;
    if (jump >= kGradientSpike && jump > verdict.spike) {
      verdict.spike = jump;
      verdict.spike_step = at[i];
    }
  }
}

std::string SpikeText(const StabilityVerdict& verdict) {
  if (!verdict.spike_step) return "";
  return fmt::format("; the gradient norm jumped {}x at step {}", Num(verdict.spike), *verdict.spike_step);
}

}  // namespace

std::string_view StabilityText(Stability stability) {
  switch (stability) {
    case Stability::kStable: return "stable";
    case Stability::kEarly: return "early instability";
    case Stability::kMidTraining: return "sudden mid-training instability";
    case Stability::kRecovered: return "recovered";
    case Stability::kDiverged: return "diverged";
  }
  return "stable";
}

StabilityVerdict ClassifyStability(const std::vector<LossStep>& steps, std::int64_t planned_steps,
                                   bool stopped_as_diverged) {
  StabilityVerdict verdict;
  const auto blown = std::find_if(steps.begin(), steps.end(), [](const LossStep& s) { return !std::isfinite(s.loss); });
  std::vector<double> losses;
  std::vector<std::int64_t> at;
  for (auto it = steps.begin(); it != blown; ++it) {
    losses.push_back(it->loss);
    at.push_back(it->step);
  }
  const std::size_t window = std::max<std::size_t>(20, losses.size() / 25);
  FindGradientSpike(steps, window, verdict);
  if (blown != steps.end() || stopped_as_diverged) {
    verdict.kind = Stability::kDiverged;
    verdict.rise_step = blown != steps.end() ? blown->step : (at.empty() ? 0 : at.back());
    verdict.evidence = blown != steps.end()
                           ? fmt::format("the training loss is {} at step {}", blown->loss, blown->step)
                           : fmt::format("stopped as diverged after step {}", *verdict.rise_step);
    verdict.evidence += SpikeText(verdict);
    return verdict;
  }
  if (losses.size() < 10) {
    verdict.evidence = fmt::format("only {} steps: too few to see a rise", losses.size());
    return verdict;
  }
  // smooth[i]: the median of the `window` losses up to step i.
  std::vector<double> smooth(losses.size());
  std::vector<double> scratch;
  for (std::size_t i = 0; i < losses.size(); ++i) {
    smooth[i] = MedianOf(losses, i + 1 >= window ? i + 1 - window : 0, i + 1, scratch);
  }
  const double start = smooth[std::min(window, smooth.size()) - 1];
  double best = smooth.front();
  std::optional<std::size_t> rise_at;
  double best_before = 0;
  for (std::size_t i = 0; i < smooth.size(); ++i) {
    const bool rising = smooth[i] > best * (1 + kLossRise) && smooth[i] - best > kRiseOfProgress * (start - best);
    if (rising && !rise_at) {
      rise_at = i;
      best_before = best;
    }
    best = std::min(best, smooth[i]);
  }
  const double end = smooth.back();
  if (end > start * (1 + kLossRise)) {
    verdict.kind = Stability::kDiverged;
    verdict.rise_step = rise_at ? at[*rise_at] : at.front();
    verdict.evidence = fmt::format("the training loss ended at {}, above its start {}", Num(end), Num(start));
    verdict.evidence += SpikeText(verdict);
    return verdict;
  }
  if (!rise_at) {
    verdict.evidence = fmt::format("the training loss fell from {} to {} without rising", Num(start), Num(end));
    verdict.evidence += SpikeText(verdict);
    return verdict;
  }
  verdict.rise_step = at[*rise_at];
  double peak = 0;
  for (std::size_t i = *rise_at; i < smooth.size(); ++i) {
    peak = std::max(peak, smooth[i]);
    if (!verdict.recovered_step && smooth[i] <= best_before * (1 + kRecoveryMargin)) verdict.recovered_step = at[i];
  }
  // Recovered only when it ends there too: a run that touches its old best once and stays stuck is not.
  if (end > best_before * (1 + kRecoveryMargin)) verdict.recovered_step.reset();
  verdict.rise = peak / best_before - 1;
  const bool early = static_cast<double>(*verdict.rise_step) <= kEarlyFraction * static_cast<double>(planned_steps);
  verdict.kind = verdict.recovered_step ? Stability::kRecovered : early ? Stability::kEarly : Stability::kMidTraining;
  verdict.evidence = fmt::format("the training loss rose from {} to {} (+{}) from step {}", Num(best_before), Num(peak),
                                 analysis_util::Percent(*verdict.rise), *verdict.rise_step);
  verdict.evidence += verdict.recovered_step ? fmt::format(", back by step {}", *verdict.recovered_step)
                                             : fmt::format(", and ended at {}", Num(end));
  verdict.evidence += SpikeText(verdict);
  return verdict;
}

std::vector<LossStep> LossStepsOf(const StudyData& data, std::uint64_t trial) {
  std::vector<LossStep> steps;
  for (const TrainMeasurement& m : analysis_util::TrainOf(data, trial)) {
    // A NaN loss is stored as no value: a step without one blew up.
    steps.push_back({m.step, m.loss.value_or(std::nan("")), m.grad_norm});
  }
  std::sort(steps.begin(), steps.end(), [](const LossStep& a, const LossStep& b) { return a.step < b.step; });
  return steps;
}

namespace {

// A trial that ended with its steps measured: completed, or infeasible (diverged).
bool Judged(TrialState state) { return state == TrialState::kCompleted || state == TrialState::kInfeasible; }

bool StoppedAsDiverged(const TrialRecord& trial) {
  return trial.state == TrialState::kInfeasible && trial.reason.find("diverged") != std::string::npos;
}

double OptionNumber(const StudyData& data, const char* key) {
  const auto& options = data.spec.procedure.options;
  const auto it = options.find(key);
  if (it == options.end() || !it->is_number()) {
    throw Error(fmt::format("study {} records no {} in its procedure block: it was not planned by dltune plan {}",
                            data.study.name, key, data.spec.procedure.kind.empty() ? "…" : data.spec.procedure.kind));
  }
  return it->get<double>();
}

std::optional<double> ParamNumber(const TrialRecord& trial, const char* name) {
  const auto it = trial.params.find(name);
  return it == trial.params.end() ? std::nullopt : NumericValue(it->second);
}

}  // namespace

InstabilityProbe AnalyzeInstabilityProbe(const StudyData& data) {
  InstabilityProbe probe;
  probe.base_learning_rate = OptionNumber(data, "learning_rate");
  probe.finished = true;
  for (const TrialRecord& trial : data.trials) {
    const auto rate = ParamNumber(trial, "learning_rate");
    if (!rate) continue;
    ProbeRow row{.trial = trial.number,
                 .learning_rate = *rate,
                 .multiplier = *rate / probe.base_learning_rate,
                 .state = trial.state};
    if (Judged(trial.state)) {
      row.verdict =
          ClassifyStability(LossStepsOf(data, trial.number), data.spec.max_train_steps, StoppedAsDiverged(trial));
    } else if (trial.state != TrialState::kFailed) {
      probe.finished = false;
    }
    probe.rows.push_back(row);
  }
  std::sort(probe.rows.begin(), probe.rows.end(),
            [](const ProbeRow& a, const ProbeRow& b) { return a.learning_rate < b.learning_rate; });
  for (const ProbeRow& row : probe.rows) {
    if (row.verdict && row.verdict->kind != Stability::kStable) {
      probe.unstable_learning_rate = row.learning_rate;
      break;
    }
  }
  return probe;
}

WarmupStudy AnalyzeWarmup(const StudyData& data) {
  WarmupStudy study;
  study.learning_rate = OptionNumber(data, "learning_rate");
  study.unstable_learning_rate = OptionNumber(data, "unstable_learning_rate");
  study.baseline_steps = static_cast<std::int64_t>(OptionNumber(data, "baseline_steps"));
  study.finished = true;
  for (const TrialRecord& trial : data.trials) {
    const auto warmup = ParamNumber(trial, "warmup_steps");
    if (!warmup) continue;
    WarmupRow row{.trial = trial.number,
                  .warmup_steps = std::llround(*warmup),
                  .steps = TrialMaxTrainSteps(data.spec, trial.params),
                  .state = trial.state,
                  .best_objective = BestObjectiveOf(data, trial)};
    if (Judged(trial.state)) {
      row.verdict = ClassifyStability(LossStepsOf(data, trial.number), row.steps, StoppedAsDiverged(trial));
    } else if (trial.state != TrialState::kFailed) {
      study.finished = false;
    }
    study.rows.push_back(row);
  }
  std::sort(study.rows.begin(), study.rows.end(),
            [](const WarmupRow& a, const WarmupRow& b) { return a.warmup_steps < b.warmup_steps; });
  // The shortest warmup from which on every judged run was stable.
  for (auto it = study.rows.rbegin(); it != study.rows.rend(); ++it) {
    if (!it->verdict) continue;
    if (it->verdict->kind != Stability::kStable) break;
    study.shortest_stable = it->warmup_steps;
  }
  return study;
}

ClippingStudy AnalyzeClipping(const StudyData& data) {
  ClippingStudy study;
  study.learning_rate = OptionNumber(data, "learning_rate");
  study.percentile_90 = OptionNumber(data, "percentile_90");
  study.baseline = data.spec.procedure.options.value("baseline", std::string());
  study.finished = true;
  for (const TrialRecord& trial : data.trials) {
    const auto threshold = ParamNumber(trial, "grad_clip_norm");
    if (!threshold) continue;
    ClippingRow row{.trial = trial.number, .threshold = *threshold, .state = trial.state};
    if (Judged(trial.state)) {
      row.verdict =
          ClassifyStability(LossStepsOf(data, trial.number), data.spec.max_train_steps, StoppedAsDiverged(trial));
    } else if (trial.state != TrialState::kFailed) {
      study.finished = false;
    }
    std::size_t recorded = 0, clipped = 0;
    for (const TrainMeasurement& m : analysis_util::TrainOf(data, trial.number)) {
      if (!m.clipped) continue;
      ++recorded;
      clipped += *m.clipped ? 1 : 0;
    }
    if (recorded > 0) row.clipped_share = static_cast<double>(clipped) / static_cast<double>(recorded);
    study.rows.push_back(row);
  }
  std::sort(study.rows.begin(), study.rows.end(),
            [](const ClippingRow& a, const ClippingRow& b) { return a.threshold < b.threshold; });
  for (const ClippingRow& row : study.rows) {
    const bool stable = row.verdict && row.verdict->kind == Stability::kStable;
    if (row.threshold > 0 && stable && row.clipped_share.value_or(0.0) <= kAggressiveClippedShare) {
      study.recommended = row.threshold;  // rows go up: the last such is the gentlest
    }
  }
  return study;
}

}  // namespace dltune
