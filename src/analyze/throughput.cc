#include "dltune/analyze/throughput.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "analysis_util.h"
#include "core/strings.h"

namespace dltune {

namespace {

// One trial's measurement of its batch size.
struct Run {
  int steps = 0;
  double median = 0, spread = 0, total = 0, waiting = 0;
};

std::optional<Run> Measure(const StudyData& data, std::uint64_t trial) {
  std::vector<const TrainMeasurement*> steps;
  for (const TrainMeasurement& m : analysis_util::TrainOf(data, trial)) {
    if (m.step_time && *m.step_time > 0) steps.push_back(&m);
  }
  const std::size_t warmup = std::max<std::size_t>(1, steps.size() / 5);
  if (steps.size() <= warmup) return std::nullopt;
  Run run;
  std::vector<double> times;
  for (std::size_t i = warmup; i < steps.size(); ++i) {
    times.push_back(*steps[i]->step_time);
    run.total += *steps[i]->step_time;
    run.waiting += steps[i]->data_wait.value_or(0.0);
  }
  std::sort(times.begin(), times.end());
  run.steps = static_cast<int>(times.size());
  run.median = analysis_util::Quantile(times, 0.5);
  run.spread = (analysis_util::Quantile(times, 0.75) - analysis_util::Quantile(times, 0.25)) / run.median;
  return run;
}

bool OutOfMemory(const TrialRecord& trial) {
  return trial.state == TrialState::kInfeasible &&
         (trial.reason.rfind("out of memory", 0) == 0 || trial.reason.find("ran out of memory") != std::string::npos);
}

}  // namespace

Throughput AnalyzeThroughput(const StudyData& data) {
  Throughput result;
  std::map<std::int64_t, std::vector<Run>> runs;
  std::map<std::int64_t, ThroughputRow> by_size;
  for (const TrialRecord& trial : data.trials) {
    const auto batch = trial.params.find("batch_size");
    const auto value = batch == trial.params.end() ? std::nullopt : NumericValue(batch->second);
    if (!value) continue;
    const std::int64_t size = std::llround(*value);
    ThroughputRow& row = by_size[size];
    if (row.trials.empty()) {
      row = {.trial = trial.number, .batch_size = size, .state = trial.state, .reason = trial.reason};
    }
    row.trials.push_back(trial.number);
    if (OutOfMemory(trial) && !row.out_of_memory) {
      row.out_of_memory = true;
      row.state = trial.state;
      row.reason = trial.reason;
    }
    if (const auto run = Measure(data, trial.number)) runs[size].push_back(*run);
  }
  for (auto& [size, row] : by_size) {
    const auto found = runs.find(size);
    if (found != runs.end()) {
      std::vector<double> medians;
      double total = 0, waiting = 0;
      for (const Run& run : found->second) {
        medians.push_back(run.median);
        row.measured_steps += run.steps;
        row.spread = std::max(row.spread.value_or(0.0), run.spread);
        total += run.total;
        waiting += run.waiting;
      }
      std::sort(medians.begin(), medians.end());
      row.repeats = static_cast<int>(medians.size());
      row.step_time = analysis_util::Quantile(medians, 0.5);
      if (medians.size() >= 2) row.repeat_spread = (medians.back() - medians.front()) / *row.step_time;
      row.examples_per_second = static_cast<double>(row.batch_size) / *row.step_time;
      row.data_wait_share = waiting / total;
    }
    result.rows.push_back(row);
  }
  std::stable_sort(result.rows.begin(), result.rows.end(),
                   [](const ThroughputRow& a, const ThroughputRow& b) { return a.batch_size < b.batch_size; });
  const ThroughputRow* previous = nullptr;
  bool perfect = true, worth = true;
  for (ThroughputRow& row : result.rows) {
    if (row.out_of_memory && !result.first_out_of_memory) result.first_out_of_memory = row.batch_size;
    if (!row.examples_per_second) continue;
    if (previous != nullptr) {
      row.efficiency = (*row.examples_per_second / *previous->examples_per_second) /
                       (static_cast<double>(row.batch_size) / static_cast<double>(previous->batch_size));
      perfect = perfect && *row.efficiency >= kPerfectScaling;
      worth = worth && *row.efficiency >= kWorthScaling;
    }
    if (result.untrustworthy.empty() && row.repeat_spread && *row.repeat_spread > kRepeatSpread &&
        *row.repeat_spread * *row.step_time > kNoisySpreadFloor) {
      result.untrustworthy = fmt::format(
          "at batch size {} the {} measurements' median step times differ by {:.0f}% of their median ({} s): the "
          "machine's speed changed while it measured",
          row.batch_size, row.repeats, 100 * *row.repeat_spread, *row.step_time);
    }
    if (result.untrustworthy.empty() && row.spread && *row.spread > kNoisySpread &&
        *row.spread * *row.step_time > kNoisySpreadFloor) {
      result.untrustworthy = fmt::format(
          "at batch size {} the middle half of the step times spans {:.0f}% of their median ({} s): the machine was "
          "busy while it measured",
          row.batch_size, 100 * *row.spread, *row.step_time);
    }
    if (result.untrustworthy.empty() && row.efficiency && *row.efficiency > kImpossibleEfficiency) {
      result.untrustworthy = fmt::format(
          "doubling to batch size {} made each example {:.3g} times cheaper than perfect scaling allows: a speed "
          "cannot double more than the batch does, so the measurements are off (a busy machine)",
          row.batch_size, *row.efficiency);
    }
    if (perfect) result.perfect_until = row.batch_size;
    if (worth) {
      result.worth_using = row.batch_size;
      result.input_bound = row.data_wait_share.value_or(0.0) > kInputBoundShare;
    }
    previous = &row;
  }
  if (!result.untrustworthy.empty()) {  // a verdict only when the measurements allow one
    result.perfect_until.reset();
    result.worth_using.reset();
    result.input_bound = false;
  }
  return result;
}

std::int64_t ThroughputAttempt(const StudyData& sweep) {
  const auto& options = sweep.spec.procedure.options;
  const auto it = options.find("attempt");
  return it != options.end() && it->is_number_integer() ? std::max<std::int64_t>(1, it->get<std::int64_t>()) : 1;
}

std::string MeasureThroughputAgainCommand(const StudyData& sweep, std::int64_t steps) {
  const auto& options = sweep.spec.procedure.options;
  const std::string name =
      fmt::format("{}-throughput-{}", NameBefore(sweep.study.name, "-throughput"), ThroughputAttempt(sweep) + 1);
  const std::string file = ShellQuote(name + ".yaml");
  return fmt::format(
      "dltune plan throughput --from {} --batch-sizes {} --steps {} --repeats {} --name {} -o {} && dltune run {}",
      ShellQuote(sweep.spec.procedure.parent), options.value("batch_sizes", std::string("16:1024")),
      steps > 0 ? steps : options.value("steps", sweep.spec.max_train_steps),
      options.value("repeats", static_cast<std::int64_t>(sweep.spec.replicas)), name, file, file);
}

}  // namespace dltune
