// Where a study's time went: each trial's TimeSplit (dltune/store/store.h) summed and described, for `dltune show`,
// the report and the dashboard. Pure functions of the trials' records.
#pragma once

#include <string>
#include <vector>

#include "dltune/store/store.h"

namespace dltune {

// A phase of a trial's time, in the order a trial goes through them.
struct TimePhase {
  const char* key;    // TimeSplit's key
  const char* label;  // as people read it: "start-up", "training steps", ...
  bool in_total;      // part of the trial's wall time (store writes overlap the process and data_wait is inside train)
};
const std::vector<TimePhase>& TimePhases();

// The sum of the phases that make up a trial's wall time (scheduling through other).
double TotalSeconds(const TimeSplit& split);
// Every trial's split added phase by phase.
TimeSplit SumTimeSplits(const std::vector<TrialRecord>& trials);
// "7.9 s: start-up 2.1 s (27%), data loading 0.4 s (5%), training steps 4.5 s (57%, of which waiting for data
// 0.1 s), ...; store writes 0.05 s alongside"; "not recorded" for an empty split.
std::string DescribeTimeSplit(const TimeSplit& split);

// The GPUs the trials used, from their resources records: "12 trials on GPUs (NVIDIA H100 80GB HBM3): mean
// utilization 37% (weighted by training time), peak memory up to 1.2 GiB, up to 8 trials at once on a GPU"; "" when
// none used one.
std::string DescribeGpuUsage(const std::vector<TrialRecord>& trials);

}  // namespace dltune
