// What dltune_bench_runner's quickstart runs share (runner_bench.cc on the CPU, runner_gpu.cc on a GPU): timing a
// shell command, the peer's Python, and what a dltune run of a study recorded in its SQLite store.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "machine_limit.h"

namespace dltune::bench {

// Runs a shell command; returns its wall time in seconds, or a negative number when it failed.
double Timed(const std::string& command);

// The Python that runs the peers: $DLTUNE_PYTHON, else /usr/bin/python3 (Debian's, with torch and Optuna), else
// python3.
std::string Python();

// The best objective value of each sub-study of `study_name` in the SQLite store `db`, by the sub-study's value
// ("nesterov", "adam" for the quickstart); empty when the study is not there.
std::map<std::string, double> BestPerSubstudy(const std::filesystem::path& db, const std::string& study_name);

// What dltune's run of a study did and where its trials' time went, from its store.
struct StudyRecordSummary {
  int trials = 0;
  MlpWork work;                         // steps trained (each trial's last step) and evaluated examples
  std::map<std::string, double> phase;  // trials.time_split summed over the trials
  double trials_seconds = 0;            // from the first trial's start to the last one's end: the run after start-up
  double trial_seconds_summed = 0;      // each trial's start to its end, summed: over trials_seconds, trials at once
};

StudyRecordSummary ReadStudy(const std::filesystem::path& db, const std::string& study_name);

// dltune_bench_runner --device cuda (runner_gpu.cc): the quickstart on one GPU, in `dir`, fused in groups of `fuse`;
// with `peers`, against Optuna + PyTorch there, its n_jobs=1 run with `serial_peer_trials` trials per optimizer (16:
// the whole study); with `eager`, again with every step launched eagerly. Returns the exit status.
int GpuQuickstart(const std::filesystem::path& dir, int fuse, bool peers, bool eager, int serial_peer_trials);

}  // namespace dltune::bench
