// Training curves and best steps: what "Examining the training curves" and "Determining the number of steps for each
// training run" look at.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "analysis_util.h"
#include "dltune/analyze/analysis.h"

namespace dltune {
namespace {

using analysis_util::IndexAtStep;
using analysis_util::Thin;

TrainingCurve MakeCurve(const TrialRecord& trial, std::string series, CurveSource source,
                        const std::vector<CurvePoint>& points, std::size_t max_points, bool highlighted,
                        std::optional<std::int64_t> best_step) {
  std::vector<std::size_t> keep;
  if (best_step) {
    if (const auto index = IndexAtStep(points, *best_step)) keep.push_back(*index);
  }
  return {.trial = trial.number,
          .substudy = trial.substudy_label,
          .state = trial.state,
          .series = std::move(series),
          .source = source,
          .points = Thin(points, max_points, keep),
          .highlighted = highlighted,
          .best_step = best_step};
}

}  // namespace

std::vector<TrainingCurve> TrainingCurves(const StudyData& data, int highlight, std::size_t max_points) {
  const std::vector<std::uint64_t> top = TopTrials(data, highlight);
  const std::set<std::uint64_t> highlighted(top.begin(), top.end());
  std::vector<TrainingCurve> curves;
  for (const TrialRecord& trial : data.trials) {
    const bool is_top = highlighted.contains(trial.number);
    const std::optional<std::int64_t> best_step = BestStepOf(data, trial);

    std::vector<CurvePoint> loss, rate;
    for (const TrainMeasurement& m : analysis_util::TrainOf(data, trial.number)) {
      if (m.loss && std::isfinite(*m.loss)) loss.push_back({m.step, *m.loss});
      if (m.learning_rate && std::isfinite(*m.learning_rate)) rate.push_back({m.step, *m.learning_rate});
    }
    for (auto* points : {&loss, &rate}) {
      std::stable_sort(points->begin(), points->end(),
                       [](const CurvePoint& a, const CurvePoint& b) { return a.step < b.step; });
    }
    if (!loss.empty()) {
      curves.push_back(
          MakeCurve(trial, "train/loss", CurveSource::kTrainingSteps, loss, max_points, is_top, best_step));
    }
    // The schedule as training applied it, step by step: warmup, decay, a round-2 extension.
    if (!rate.empty()) {
      curves.push_back(
          MakeCurve(trial, "train/learning_rate", CurveSource::kTrainingSteps, rate, max_points, is_top, best_step));
    }

    std::map<std::string, std::vector<CurvePoint>> series;
    if (const auto evals = data.evals.find(trial.number); evals != data.evals.end()) {
      for (const EvalMeasurement& eval : evals->second) {
        if (std::isfinite(eval.value)) series[eval.split + "/" + eval.metric].push_back({eval.step, eval.value});
      }
    }
    for (auto& [name, points] : series) {
      std::stable_sort(points.begin(), points.end(),
                       [](const CurvePoint& a, const CurvePoint& b) { return a.step < b.step; });
      curves.push_back(MakeCurve(trial, name, CurveSource::kEvaluation, points, max_points, is_top, best_step));
    }
  }
  return curves;
}

std::vector<BestStepPoint> BestSteps(const StudyData& data) {
  std::vector<BestStepPoint> points;
  const double max_steps = static_cast<double>(data.spec.max_train_steps);
  for (const TrialRecord& trial : data.trials) {
    if (trial.state != TrialState::kCompleted) continue;
    const auto step = BestStepOf(data, trial);
    if (!step) continue;
    points.push_back({.trial = trial.number,
                      .substudy = trial.substudy_label,
                      .best_step = *step,
                      .fraction = max_steps > 0 ? static_cast<double>(*step) / max_steps : 0.0,
                      .objective = BestObjectiveOf(data, trial)});
  }
  return points;
}

}  // namespace dltune
