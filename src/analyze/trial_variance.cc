// Trial variance over replicas, and a planned study ranked against its parent.
#include "dltune/analyze/trial_variance.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "analysis_util.h"
#include "core/strings.h"
#include "store/recorded_spec.h"

namespace dltune {
namespace {

using analysis_util::Num;

// "optimizer=adam,num_layers=2": the trial's scientific values in spec order; "" without scientific params.
std::string ScientificLabel(const StudyData& data, const Assignment& params) {
  std::string label;
  if (!data.spec.space) return label;
  for (const Param* param : data.spec.space->WithRole(Role::kScientific)) {
    const auto it = params.find(param->id);
    if (it == params.end()) continue;
    if (!label.empty()) label += ",";
    label += param->id + "=" + FormatValue(it->second);
  }
  return label;
}

std::string LabelOf(const ConfigurationReplicas& c) {
  return c.scientific.empty() ? fmt::format("configuration {}", c.configuration)
                              : fmt::format("{} (configuration {})", c.scientific, c.configuration);
}

// The replica whose value is the median (see ConfigurationReplicas::median_trial).
std::optional<std::uint64_t> MedianTrial(const ConfigurationReplicas& c) {
  if (c.values.empty()) return std::nullopt;
  return c.completed[MedianIndex(c.values, c.stats.mean)];
}

// Which mean is better by the objective's direction (ties: the lower configuration number).
bool BetterMean(const ConfigurationReplicas& a, const ConfigurationReplicas& b, Direction direction) {
  if (a.stats.mean != b.stats.mean) return IsBetter(a.stats.mean, b.stats.mean, direction);
  return a.configuration < b.configuration;
}

ReplicaComparison Compare(const StudyData& data, const ConfigurationReplicas& better,
                          const ConfigurationReplicas& other, double confidence) {
  const Direction direction = data.spec.objective.direction;
  const auto oriented = [&](double b, double o) { return direction == Direction::kMinimize ? o - b : b - o; };
  ReplicaComparison comparison{
      .better = better.configuration,
      .other = other.configuration,
      .better_label =
          better.scientific.empty() ? fmt::format("configuration {}", better.configuration) : better.scientific,
      .other_label =
          other.scientific.empty() ? fmt::format("configuration {}", other.configuration) : other.scientific};
  // Replica r of both: the same seed, so their difference leaves out what the seed alone does to both.
  std::map<std::uint64_t, double> other_by_replica;
  for (std::size_t i = 0; i < other.completed.size(); ++i) {
    for (const TrialRecord& trial : data.trials) {
      if (trial.number == other.completed[i]) other_by_replica[trial.replica] = other.values[i];
    }
  }
  std::vector<double> advantages;
  for (std::size_t i = 0; i < better.completed.size(); ++i) {
    for (const TrialRecord& trial : data.trials) {
      if (trial.number != better.completed[i]) continue;
      const auto it = other_by_replica.find(trial.replica);
      if (it != other_by_replica.end()) advantages.push_back(oriented(better.values[i], it->second));
    }
  }
  comparison.advantage = SummarizeMean(advantages, confidence);
  comparison.within_noise = !comparison.advantage.low || *comparison.advantage.low <= 0.0;
  if (better.parent_value && other.parent_value) {
    comparison.parent_gap = oriented(*better.parent_value, *other.parent_value);
  }
  return comparison;
}

// The parent study's trial each configuration was taken from (the spec's procedure), by configuration.
std::map<std::uint64_t, const TrialRecord*> ParentTrialsByConfiguration(const StudyData& data) {
  std::map<std::uint64_t, const TrialRecord*> by_configuration;
  if (data.parent_trials.empty() || !data.spec.space) return by_configuration;
  const StudyPlan plan(data.spec);
  for (std::uint64_t c = 0; c < plan.ConfigurationCount(); ++c) {
    const auto parent = plan.ParentOf(c);
    if (!parent) continue;
    for (const TrialRecord& record : data.parent_trials) {
      if (record.number == parent->trial) by_configuration[c] = &record;
    }
  }
  return by_configuration;
}

}  // namespace

TrialVariance AnalyzeTrialVariance(const StudyData& data, double confidence) {
  TrialVariance result;
  result.replicas = data.spec.replicas;
  std::map<std::uint64_t, ConfigurationReplicas> by_configuration;
  for (const TrialRecord& trial : data.trials) {
    auto [it, added] = by_configuration.try_emplace(trial.configuration);
    ConfigurationReplicas& c = it->second;
    if (added) {
      c.configuration = trial.configuration;
      c.substudy = trial.substudy_label;
      c.scientific = ScientificLabel(data, trial.params);
      c.params = trial.params;
    }
    c.trials.push_back(trial.number);
    if (trial.state != TrialState::kCompleted) continue;
    if (const auto value = BestObjectiveOf(data, trial)) {
      c.completed.push_back(trial.number);
      c.values.push_back(*value);
    }
  }
  const auto parents = ParentTrialsByConfiguration(data);
  double pooled_squares = 0;
  double pooled_dof = 0;
  for (auto& [configuration, c] : by_configuration) {
    c.stats = SummarizeMean(c.values, confidence);
    c.median_trial = MedianTrial(c);
    if (const auto parent = parents.find(configuration); parent != parents.end()) {
      c.parent_trial = parent->second->number;
      c.parent_value = parent->second->best_value;
    }
    if (c.stats.sd) {
      pooled_squares += (c.stats.n - 1) * *c.stats.sd * *c.stats.sd;
      pooled_dof += c.stats.n - 1;
    }
    result.configurations.push_back(c);
  }
  if (pooled_dof > 0) result.pooled_sd = std::sqrt(pooled_squares / pooled_dof);

  const Direction direction = data.spec.objective.direction;
  const ConfigurationReplicas* best = nullptr;
  std::map<std::string, const ConfigurationReplicas*> best_by_label;
  for (const ConfigurationReplicas& c : result.configurations) {
    if (c.values.empty()) continue;
    if (best == nullptr || BetterMean(c, *best, direction)) best = &c;
    auto& label_best = best_by_label[c.scientific];
    if (label_best == nullptr || BetterMean(c, *label_best, direction)) label_best = &c;
  }
  if (best == nullptr) return result;
  result.best_configuration = best->configuration;
  if (best_by_label.size() > 1) {
    std::vector<const ConfigurationReplicas*> leaders;
    leaders.reserve(best_by_label.size());
    for (const auto& [label, leader] : best_by_label) leaders.push_back(leader);
    std::sort(leaders.begin(), leaders.end(),
              [](const auto* a, const auto* b) { return a->configuration < b->configuration; });
    for (std::size_t i = 0; i < leaders.size(); ++i) {
      for (std::size_t j = i + 1; j < leaders.size(); ++j) {
        const bool i_better = BetterMean(*leaders[i], *leaders[j], direction);
        result.comparisons.push_back(
            Compare(data, i_better ? *leaders[i] : *leaders[j], i_better ? *leaders[j] : *leaders[i], confidence));
      }
    }
  } else {
    for (const ConfigurationReplicas& c : result.configurations) {
      if (c.configuration != best->configuration && !c.values.empty()) {
        result.comparisons.push_back(Compare(data, *best, c, confidence));
      }
    }
  }
  return result;
}

RoundComparison CompareWithParent(const StudyData& data) {
  RoundComparison result;
  const TrialVariance variance = AnalyzeTrialVariance(data);
  for (const ConfigurationReplicas& c : variance.configurations) {
    if (!c.parent_trial || !c.parent_value || c.values.empty()) continue;
    result.rows.push_back({.configuration = c.configuration,
                           .parent_trial = *c.parent_trial,
                           .label = LabelOf(c),
                           .parent_value = *c.parent_value,
                           .value = c.stats.mean});
  }
  if (result.rows.empty()) return result;
  const Direction direction = data.spec.objective.direction;
  const auto rank = [&](auto value_of, auto set_rank) {
    std::vector<std::size_t> order(result.rows.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return IsBetter(value_of(result.rows[a]), value_of(result.rows[b]), direction);
    });
    for (std::size_t r = 0; r < order.size(); ++r) set_rank(result.rows[order[r]], static_cast<int>(r) + 1);
    return result.rows[order.front()].configuration;
  };
  result.parent_winner =
      rank([](const RoundRow& row) { return row.parent_value; }, [](RoundRow& row, int r) { row.parent_rank = r; });
  result.winner = rank([](const RoundRow& row) { return row.value; }, [](RoundRow& row, int r) { row.rank = r; });
  result.winner_changed = result.parent_winner != result.winner;
  std::vector<double> parent_values, values;
  for (const RoundRow& row : result.rows) {
    parent_values.push_back(row.parent_value);
    values.push_back(row.value);
  }
  result.rank_correlation = SpearmanCorrelation(parent_values, values);
  return result;
}

namespace {

ComparedStudy Summarize(const StudyData& data, std::uint64_t budget, int resamples, std::uint64_t seed) {
  ComparedStudy study{.name = data.study.name};
  std::vector<double> values;
  for (const TrialRecord& trial : data.trials) {
    if (trial.state != TrialState::kCompleted) continue;
    const auto value = BestObjectiveOf(data, trial);
    if (!value) continue;
    values.push_back(*value);
    if (!study.best || IsBetter(*value, *study.best, data.spec.objective.direction)) {
      study.best = value;
      study.best_trial = trial.number;
    }
  }
  study.completed = static_cast<int>(values.size());
  study.at_equal_budget = BestOfBudget(values, budget, data.spec.objective.direction, resamples, seed);
  if (data.spec.replicas > 1) {
    const TrialVariance variance = AnalyzeTrialVariance(data);
    for (const ConfigurationReplicas& c : variance.configurations) {
      if (variance.best_configuration && c.configuration == *variance.best_configuration) {
        study.best_mean = c.stats;
        study.best_mean_label = LabelOf(c);
      }
    }
  }
  return study;
}

std::uint64_t CompletedCount(const StudyData& data) {
  std::uint64_t count = 0;
  for (const TrialRecord& trial : data.trials) {
    if (trial.state == TrialState::kCompleted && BestObjectiveOf(data, trial)) ++count;
  }
  return count;
}

}  // namespace

StudyComparison CompareStudies(const StudyData& a, const StudyData& b, int resamples, std::uint64_t seed) {
  if (a.spec.objective != b.spec.objective) {
    throw Error(fmt::format("study '{}' measures {} and study '{}' {}: they cannot be compared", a.study.name,
                            a.spec.objective.Describe(), b.study.name, b.spec.objective.Describe()));
  }
  StudyComparison comparison;
  comparison.objective = a.spec.objective;
  comparison.budget = std::max<std::uint64_t>(1, std::min(CompletedCount(a), CompletedCount(b)));
  comparison.a = Summarize(a, comparison.budget, resamples, seed);
  comparison.b = Summarize(b, comparison.budget, resamples, seed);
  // What a study is, whatever planned it: a measurement, configurations chosen beforehand (the list sampler: a
  // retrain, a round 2), or a search of its space (an apply-steps or apply-clipping study is one too).
  const auto kind = [](const StudyData& d) -> std::string {
    if (d.spec.procedure.Measures()) {
      const std::string& what = d.spec.procedure.kind;
      return (what.find_first_of("aeiou") == 0 ? "an " : "a ") + what + " measurement";
    }
    if (d.spec.sampler.name == "list") return "a study of configurations chosen beforehand";
    return "a search";
  };
  if (comparison.a.completed == 0 || comparison.b.completed == 0) {
    comparison.no_verdict =
        fmt::format("study '{}' has no completed trial", comparison.a.completed == 0 ? a.study.name : b.study.name);
  } else if (a.spec.max_train_steps != b.spec.max_train_steps) {
    comparison.no_verdict = fmt::format(
        "they train for different budgets ({} trains {} steps, {} {}): the longer may win by its steps alone; compare "
        "configurations at equal steps instead (a round 2's report sets each against its round-1 trial)",
        a.study.name, a.spec.max_train_steps, b.study.name, b.spec.max_train_steps);
  } else if (kind(a) != kind(b)) {
    comparison.no_verdict = fmt::format(
        "{} is {} and {} is {}: only a search is a search of its own, so their best results at equal budget do not "
        "tell which approach is better",
        a.study.name, kind(a), b.study.name, kind(b));
  } else if (comparison.a.best_mean || comparison.b.best_mean) {
    if (!comparison.a.best_mean || !comparison.b.best_mean || !comparison.a.best_mean->low ||
        !comparison.b.best_mean->low) {
      comparison.no_verdict =
          "only one of them has replicas: a mean with its interval against single runs tells nothing of the noise";
    } else {
      const MeanInterval& x = *comparison.a.best_mean;
      const MeanInterval& y = *comparison.b.best_mean;
      comparison.by_means = true;
      comparison.better = IsBetter(y.mean, x.mean, comparison.objective.direction) ? b.study.name : a.study.name;
      comparison.overlap = *x.low <= *y.high && *y.low <= *x.high;
    }
  } else {
    const BootstrapBox& x = comparison.a.at_equal_budget;
    const BootstrapBox& y = comparison.b.at_equal_budget;
    comparison.better =
        IsBetter(y.median, x.median, comparison.objective.direction) ? comparison.b.name : comparison.a.name;
    comparison.overlap = x.q1 <= y.q3 && y.q1 <= x.q3;
  }
  return comparison;
}

std::string ReplicaValueText(const MeanInterval& stats) {
  if (stats.n <= 1 || !stats.HalfWidth()) return fmt::format("{:.6g} (single run, variance unknown)", stats.mean);
  return fmt::format("mean {:.6g} ± {} (95% CI, {} replicas)", stats.mean, Num(*stats.HalfWidth()), stats.n);
}

std::string MoreReplicasCommand(const StudyData& retrain) {
  const std::string spec_file = ShellQuote(SpecFileOf(retrain.study));
  return fmt::format(
      "dltune plan retrain --from {} --top {} --replicas {} --name {} -o {} --force && dltune run {} --extend",
      ShellQuote(retrain.spec.procedure.parent), retrain.spec.procedure.options.value("top", 1),
      2 * retrain.spec.replicas, ShellQuote(retrain.study.name), spec_file, spec_file);
}

}  // namespace dltune
