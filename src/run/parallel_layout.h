// How a study uses this machine: how many trials run at once and how many threads each trains with. Chosen by
// measurement for a built-in workload whose spec leaves training.threads to auto, from the machine's cores and the
// model's own speed at each layout; `--parallel` and training.threads override (docs/parallel-layout.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/run/run_types.h"
#include "dltune/study/study_spec.h"
#include "trial/trial_server.h"

namespace dltune {

// One candidate layout as the probe measured it: `trials` probe processes at once, `threads` threads each, and the
// training steps per second of one of them (their mean).
struct LayoutMeasurement {
  int trials = 1;
  int threads = 1;
  double steps_per_second = 0;
};

// The layouts worth measuring on `cores` cores: 1, 2, 4, ... threads per trial and `cores` itself, each with as
// many trials at once as fit (cores / threads).
std::vector<LayoutMeasurement> LayoutCandidates(int cores);

// The measured layout that trains `trials_to_run` trials soonest: rounds of trials (trials_to_run / trials, rounded
// up) times one trial's time at its measured speed. Layouts within 3% of the soonest count as equal, and the one
// with fewer threads per trial is taken (independent trials do not wait for each other's threads). `measurements`
// must not be empty and their speeds must be positive.
ParallelLayout PickMeasuredLayout(const std::vector<LayoutMeasurement>& measurements, std::uint64_t trials_to_run);

// A study shorter than this many training steps in all is not worth a probe: one thread per trial.
inline constexpr std::uint64_t kLayoutProbeMinSteps = 20000;

struct LayoutRequest {
  int parallel = 0;                                  // --parallel; 0 when not given
  int cores = 0;                                     // 0: AvailableCores()
  std::uint64_t trials_to_run = 0;                   // trials of the study not yet ended
  std::filesystem::path dltune_executable;           // runs the probe (`dltune probe-speed`)
  std::filesystem::path cache_file;                  // empty: LayoutCacheFile()
  double probe_seconds = 0.5;                        // training time of each candidate (over its two measurements)
  std::function<void(const std::string&)> progress;  // told what is being measured; may be empty
  // Forks the probe processes warm (LibTorch loaded, data decoded once for all of them and the trials after);
  // null: each probe process is started by exec.
  TrialServer* trial_server = nullptr;
  // The study's trials train on GPUs: how many run at once is the GPU packing's, not the CPU's to measure.
  bool trials_on_gpus = false;
  // The GPUs' models and driver (GpuPlacement::Models), which a fusion measurement is kept for; empty without GPUs.
  std::string gpu_models;
};

// The layout of `spec`'s trials: training.threads and --parallel when given (the other derived from the cores),
// for a data-parallel study (training.processes > 1) --parallel's processes, or the cores, in whole trials of one
// thread per rank unless training.threads says otherwise,
// one thread per trial for a command: study, one whose trials train on GPUs or a short one, and otherwise the
// measured layout. A measurement is
// cached per machine (CPU, cores, BLAS kernels) and workload (name, arguments, the first trial's params) in the cache
// file. A probe that fails falls back to one thread per trial and says why in `basis`; never throws for it.
ParallelLayout ChooseParallelLayout(const StudySpec& spec, const LayoutRequest& request);

// training.fuse: auto, one candidate as the probe measured it: fused groups of `members` trials (1: each trial
// alone), and each member's training steps per second.
struct FusionMeasurement {
  std::size_t members = 1;
  double steps_per_second = 0;
};

// A group must train this much faster per member than a trial alone to be chosen: a group's members also wait for
// each other (the last group of a sub-study may be short, a stopped one resumes whole).
inline constexpr double kFusionMargin = 1.1;

// The group size whose members train the most steps per second, when that beats the trial alone (members 1, which
// `measured` must hold) by kFusionMargin; 0 (train apart) otherwise.
std::size_t PickFusion(const std::vector<FusionMeasurement>& measured);

// What training.fuse: auto chose for a study, and why (for the user).
struct FusionChoice {
  std::size_t members = 0;  // the most trials a group takes; 0: apart
  std::string basis;
};

// The probe processes ChooseFusion runs at once: as many as `layout` runs trials on the CPU, where they share the
// cores as the trials will; one where the trials train on GPUs, whose packing is measured apart (every probe process
// would start a CUDA context on the same GPU).
int FusionProbeProcesses(const LayoutRequest& request, const ParallelLayout& layout);

// training.fuse: auto: measures the study's first trial alone and in fused groups of 2, 4, 8 and 16 (no more than
// the trials left), FusionProbeProcesses at once, with `layout`'s threads each, and picks with PickFusion. A study
// whose trials cannot train fused, a short one (as ChooseParallelLayout's) or a probe that fails train apart, the basis
// saying why; never throws for it.
FusionChoice ChooseFusion(const StudySpec& spec, const LayoutRequest& request, const ParallelLayout& layout);

// What a fusion probe costs, in training steps of the study's trial: each of its measurements trains for a quarter of
// a second (LayoutRequest::probe_seconds over its two rounds), about 250 steps at the 1000 steps/s of the machine
// kLayoutProbeMinSteps was set on (docs/parallel-layout.md: 717 and 903 steps/s per trial on 2 cores).
inline constexpr std::uint64_t kFusionProbeStepsPerMeasurement = 250;

// The most of a study's training steps the default's fusion probe may cost: what ChooseParallelLayout accepts, its
// cheapest probe (2 candidates on 2 cores, measured twice: 4 × 250 steps) being 5% of kLayoutProbeMinSteps.
inline constexpr double kFusionProbeShare = 0.05;

// The training steps ChooseFusion's probe costs with `trials_to_run` trials left: its candidates (alone, and groups of
// 2, 4, 8 and 16 no larger than the trials left), each measured twice, kFusionProbeStepsPerMeasurement each time.
std::uint64_t FusionProbeSteps(std::uint64_t trials_to_run);

// Whether the runner measures fusion (ChooseFusion) before a study's trials start. What it chose is then printed
// and kept in the study's decision log; a study not measured says nothing.
struct FusionPlan {
  bool probe = false;  // ChooseFusion chooses the groups
  std::string why;     // for the default (training.fuse left out): why it is measured, or why not
};

// training.fuse auto: always measured (ChooseFusion says itself why a short study is not); off or a number: never
// (the spec decided). Left out ("chosen"): measured only where fusion can win and the probe is cheap next to the
// study: its trials train on CUDA (`on_cuda`; on the CPU a group does the same arithmetic and gained 0.86x to 1.02x,
// docs/performance.md), at least 2 trials are left, FusionProbeSteps is at most kFusionProbeShare of their steps
// (`trials_to_run` × max_train_steps) and the workload offers fusion (one process per trial: `fusible`, asked last,
// as it may load the trainer). Otherwise they train apart without a word, as with off.
FusionPlan PlanFusion(const StudySpec& spec, bool on_cuda, std::uint64_t trials_to_run,
                      const std::function<bool(const StudySpec&)>& fusible);

// Whether `spec`'s trials can train fused: a built-in workload that offers it, one process per trial.
bool FusibleStudy(const StudySpec& spec);

// Where measured layouts are kept: parallel-layouts.json in MachineCacheDirectory() ($DLTUNE_CACHE_DIR, else
// $XDG_CACHE_HOME/dltune, else ~/.cache/dltune).
std::filesystem::path LayoutCacheFile();

// The study's first trial as its trial.json describes it to a built-in trial (what the layout probe trains). Throws
// Error when the first trial is not planned ahead (a sampler that proposes trials one at a time).
nlohmann::json FirstTrialDescription(const StudySpec& spec);

}  // namespace dltune
