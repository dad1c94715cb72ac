#include "training_rules.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace dltune {

std::optional<std::string> Divergence(std::optional<double>& first_loss, double loss, std::int64_t step,
                                      double factor) {
  if (!first_loss) first_loss = loss;
  if (!std::isfinite(loss)) return fmt::format("diverged: training loss is {} at step {}", loss, step);
  if (loss > factor * std::max(*first_loss, 1e-12)) {
    return fmt::format("diverged: training loss {:.4g} at step {} is more than {}x the initial loss {:.4g}", loss, step,
                       factor, *first_loss);
  }
  return std::nullopt;
}

void ShareIntervalTime(std::vector<StepMetrics>& steps, double seconds, double data_wait, std::int64_t batch_size) {
  const auto count = static_cast<double>(steps.size());
  for (StepMetrics& m : steps) {
    m.step_time = seconds / count;
    m.data_wait = data_wait / count;
    m.examples_per_second = m.step_time > 0 ? static_cast<double>(batch_size) / m.step_time : 0;
  }
}

void AddMetricsFromSums(const std::string& split, const SplitSums& sums, std::vector<EvalMetric>& metrics) {
  const double loss = sums.loss / sums.weight;
  const double accuracy = sums.correct / sums.weight;
  const auto examples = static_cast<std::int64_t>(std::llround(sums.weight));
  metrics.push_back({split, "loss", loss, examples});
  metrics.push_back({split, "error_rate", 1.0 - accuracy, examples});
  metrics.push_back({split, "accuracy", accuracy, examples});
  for (std::size_t k = 0; k < sums.class_correct.size(); ++k) {
    metrics.push_back({split, fmt::format("correct_class_{}", k), sums.class_correct[k], examples});
  }
}

std::vector<std::string> SplitsToEvaluate(const TrainingSettings& settings, bool last) {
  std::vector<std::string> splits = {"train"};
  const bool sampled = settings.valid_sample_examples > 0;
  if (sampled) splits.emplace_back("valid_sample");
  if (!sampled || last) splits.emplace_back("valid");
  if (last && settings.test_at_end) splits.emplace_back("test");
  return splits;
}

std::optional<double> ObjectiveValue(const Objective& objective, const std::vector<EvalMetric>& metrics) {
  for (const std::string& split : {objective.split, objective.split + "_sample"}) {
    for (const EvalMetric& m : metrics) {
      if (m.split == split && m.metric == objective.metric) return m.value;
    }
  }
  return std::nullopt;
}

void BestObjective::Record(std::int64_t at, std::optional<double> objective, Direction direction) {
  if (!objective) return;
  last = objective;
  if ((!value || IsBetter(*objective, *value, direction)) && std::isfinite(*objective)) {
    value = objective;
    step = at;
  }
}

}  // namespace dltune
