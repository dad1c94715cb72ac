// The playbook's batch-size sweep ("Determining the feasible batch sizes and estimating training throughput",
// "Choosing the batch size to minimize training time"): time per step and examples per second at each batch size of a
// study planned by `dltune plan throughput`, how well throughput scales with each doubling, and where it stops paying.
// Pure function of a study's records.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"

namespace dltune {

// A doubling of the batch size scales perfectly from this efficiency on, and is still worth using from the other.
inline constexpr double kPerfectScaling = 0.9;
inline constexpr double kWorthScaling = 0.6;  // throughput at least 1.2 times the smaller batch size's
// Input-bound: waiting for data takes more than this share of step time.
inline constexpr double kInputBoundShare = 0.1;
// Measurements too noisy to judge: the middle half of a batch size's step times spans more than this share of their
// median (a busy machine makes them bimodal: 0.4 ms and 60 ms).
inline constexpr double kNoisySpread = 0.5;
// ... unless that middle half spans less than this many seconds: a quiet machine's timer and scheduler jitter (tens of
// microseconds) is a large share of a step of a fraction of a millisecond, and the median of the steps is still good.
inline constexpr double kNoisySpreadFloor = 2e-4;
// Repeated measurements of a batch size (the sweep runs in rounds) whose medians differ by more than this share of
// their median (and by more than kNoisySpreadFloor) say the machine's speed changed while it measured.
inline constexpr double kRepeatSpread = 0.25;
// A doubling cannot make each example cheaper than perfect scaling: an efficiency above this is a measurement error.
inline constexpr double kImpossibleEfficiency = 1.1;
// The report gives the time each batch size takes for this many training examples: what decides training time.
inline constexpr double kTimedExamples = 1e6;

// One batch size, over every trial that measured it (the sweep's repeats: replicas of the configuration).
struct ThroughputRow {
  std::uint64_t trial = 0;            // its first trial
  std::vector<std::uint64_t> trials;  // all of them, first to last
  std::int64_t batch_size = 0;
  TrialState state = TrialState::kPending;    // the first trial's
  std::string reason;                         // why it is infeasible (out of memory, not run)
  bool out_of_memory = false;                 // it ran out of memory, or was not run because a smaller one did
  int repeats = 0;                            // trials that measured steps
  int measured_steps = 0;                     // training steps after the warm-up ones, over all of them
  std::optional<double> step_time;            // median over the repeats of each one's median seconds per step
  std::optional<double> examples_per_second;  // batch_size / step_time
  std::optional<double> data_wait_share;      // waiting for input / step time, summed over them
  std::optional<double> spread;  // the largest over the repeats of (third quartile - first quartile) / median
  // (largest - smallest) / median of the repeats' medians; none with fewer than 2 repeats.
  std::optional<double> repeat_spread;
  // Examples per second against the previous (smaller) measured batch size, divided by the batch sizes' ratio:
  // 1 = perfect scaling (twice the batch, twice the examples per second), 0.5 = no gain at all.
  std::optional<double> efficiency;
};

struct Throughput {
  std::vector<ThroughputRow> rows;  // by batch size
  // The largest batch size up to which every step scaled perfectly (efficiency >= kPerfectScaling); "perfect scaling
  // ends" after it.
  std::optional<std::int64_t> perfect_until;
  // The largest batch size up to which every step still paid (efficiency >= kWorthScaling): beyond it, a larger batch
  // trains barely faster, so it is the largest worth using to minimize training time.
  std::optional<std::int64_t> worth_using;
  std::optional<std::int64_t> first_out_of_memory;  // the smallest batch size that ran out of memory
  bool input_bound = false;                         // the data wait share at worth_using is above kInputBoundShare
  // Why the measurements cannot be trusted (a batch size's step times spread past kNoisySpread, an efficiency above
  // kImpossibleEfficiency); then no batch size is recommended (perfect_until and worth_using stay empty). "" when
  // they can.
  std::string untrustworthy;
};

// Measured steps: all but the first fifth (at least 1) of each trial's recorded training steps with a step_time,
// which hold allocation and start-up. Trials of one batch size are its repeats. Trials without a batch_size param
// are left out.
Throughput AnalyzeThroughput(const StudyData& data);

// Which measurement of the project's throughput a sweep is: 1 for the first, 2 for the one planned after it from the
// same spec or study (`dltune plan throughput` records it as procedure.options.attempt).
std::int64_t ThroughputAttempt(const StudyData& sweep);

// The command that measures a sweep's throughput again, as a new sweep beside it (the next attempt, named
// <project>-throughput-<attempt>): the same parent, batch sizes and repeats, `steps` steps per batch size (0: the
// sweep's own).
std::string MeasureThroughputAgainCommand(const StudyData& sweep, std::int64_t steps = 0);

}  // namespace dltune
