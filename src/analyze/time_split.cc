#include "analyze/time_split.h"

#include <fmt/format.h>

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

}  // namespace dltune
