#include "analyze/time_split.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "store/trial_resources.h"

namespace dltune {
namespace {

double Get(const TimeSplit& split, const char* key) {
  const auto it = split.find(key);
  return it == split.end() ? 0.0 : it->second;
}

std::string Seconds(double seconds) {
  if (seconds >= 3600) return fmt::format("{:.1f} h", seconds / 3600);
  if (seconds >= 600) return fmt::format("{:.1f} min", seconds / 60);
  return fmt::format("{:.3g} s", seconds);
}

}  // namespace

const std::vector<TimePhase>& TimePhases() {
  static const std::vector<TimePhase> kPhases = {
      {"scheduling", "scheduling", true},       {"startup", "start-up", true},
      {"data_load", "data loading", true},      {"train", "training steps", true},
      {"data_wait", "waiting for data", false}, {"evaluation", "evaluation", true},
      {"checkpoint", "checkpoints", true},      {"other", "other", true},
      {"store", "store writes", false},
  };
  return kPhases;
}

double TotalSeconds(const TimeSplit& split) {
  double total = 0;
  for (const TimePhase& phase : TimePhases()) {
    if (phase.in_total) total += Get(split, phase.key);
  }
  return total;
}

TimeSplit SumTimeSplits(const std::vector<TrialRecord>& trials) {
  TimeSplit sum;
  for (const TrialRecord& trial : trials) {
    for (const auto& [phase, seconds] : trial.time_split) sum[phase] += seconds;
  }
  return sum;
}

std::string DescribeTimeSplit(const TimeSplit& split) {
  const double total = TotalSeconds(split);
  if (split.empty() || !(total > 0)) return "not recorded";
  std::string text = Seconds(total) + ":";
  bool first = true;
  for (const TimePhase& phase : TimePhases()) {
    if (!phase.in_total || split.count(phase.key) == 0) continue;
    const double seconds = Get(split, phase.key);
    text += fmt::format("{} {} {} ({:.0f}%", first ? "" : ",", phase.label, Seconds(seconds), 100 * seconds / total);
    if (std::string(phase.key) == "train" && Get(split, "data_wait") > 0) {
      text += ", of which waiting for data " + Seconds(Get(split, "data_wait"));
    }
    text += ")";
    first = false;
  }
  if (split.count("store") != 0) text += "; store writes " + Seconds(Get(split, "store")) + " alongside";
  return text;
}

std::string DescribeGpuUsage(const std::vector<TrialRecord>& trials) {
  int on_gpus = 0, most_at_once = 1;
  std::set<std::string> models;
  double peak = -1, utilization_time = 0, weighted_utilization = 0;
  for (const TrialRecord& trial : trials) {
    const auto usage = ParseGpuUsage(trial.resources);
    if (!usage) continue;
    ++on_gpus;
    models.insert(usage->model.empty() ? "GPU" : usage->model);
    most_at_once = std::max(most_at_once, usage->trials_at_once);
    if (usage->peak_memory_bytes) peak = std::max(peak, *usage->peak_memory_bytes);
    if (usage->mean_utilization_percent) {
      // A trial's mean counts by how long it trained; one with no recorded time counts once.
      const double seconds = std::max(Get(trial.time_split, "train"), 1e-9);
      weighted_utilization += *usage->mean_utilization_percent * seconds;
      utilization_time += seconds;
    }
  }
  if (on_gpus == 0) return "";
  std::string text = fmt::format("{} trial{} on GPUs ({})", on_gpus, on_gpus == 1 ? "" : "s", fmt::join(models, ", "));
  std::vector<std::string> use;
  if (utilization_time > 0) {
    use.push_back(
        fmt::format("mean utilization {:.0f}% (weighted by training time)", weighted_utilization / utilization_time));
  }
  if (peak >= 0) use.push_back(fmt::format("peak memory up to {:.1f} GiB", peak / (1ULL << 30)));
  if (most_at_once > 1) use.push_back(fmt::format("up to {} trials at once on a GPU", most_at_once));
  if (!use.empty()) text += fmt::format(": {}", fmt::join(use, ", "));
  return text;
}

}  // namespace dltune
