// Everything a trial process gets before it starts (docs/trial-protocol.md, "Starting a trial"): its directory,
// params.json, trial.json, environment and command line; and how a person reproduces a trial.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "dltune/run/study_session.h"
#include "gpu/nvml.h"
#include "trial/trial_process.h"

namespace dltune {

struct PreparedTrial {
  std::filesystem::path trial_dir;  // absolute
  bool resuming = false;            // it ran before (its trial.json existed)
  TrialCommand command;
};

// What every trial process gets in its environment besides its own variables (DLTUNE_*, its threads, its GPUs): the
// OpenMP wait policy and the Python client on PYTHONPATH, and for the built-in trainer (`builtin`) its faster BLAS
// kernels and cuBLAS's deterministic workspace. A layout probe's process gets the built-in trainer's, so that the
// trial server that forks the probes forks the study's trials too (its load environment is the same).
std::map<std::string, std::string> SharedTrialEnvironment(bool builtin);

// The variables of a trial's process (docs/trial-protocol.md, "Environment"), each set only when given.
struct TrialVariables {
  bool builtin = false;                         // SharedTrialEnvironment(builtin)
  std::filesystem::path trial_dir;              // DLTUNE_TRIAL_DIR, and DLTUNE_PARAMS and DLTUNE_TRIAL in it
  std::filesystem::path trial_json;             // DLTUNE_TRIAL elsewhere than in trial_dir (a layout probe's)
  std::optional<std::uint64_t> seed;            // DLTUNE_SEED
  std::optional<std::int64_t> max_train_steps;  // DLTUNE_MAX_TRAIN_STEPS
  std::optional<int> threads;                   // DLTUNE_THREADS and the libraries' thread counts
};
// The one builder of a trial process's environment: a trial's own, its checkpoint's evaluation's and a layout
// probe's, which each add what only they have.
std::map<std::string, std::string> TrialEnvironment(const TrialVariables& variables);

// Throws SpecError, at the spec's workload: key, when the spec names a workload this program does not know (a
// workload of your own is known to the program that registers it: examples/custom_workload).
void CheckWorkloadKnown(const StudySpec& spec);

// Throws Error unless a worker of this program can train `spec`'s trials: it names a workload this program knows
// (CheckWorkloadKnown) or a command:, and a built-in trainer asked for training.device: cuda has a LibTorch with CUDA.
// A study with neither workload: nor command: is an ask/tell study, trained by its own program.
void CheckWorkerCanTrain(const StudySpec& spec);
// Whether a worker of this program can train the recorded study's trials (CheckWorkerCanTrain).
bool WorkerCanTrain(const StudyRecord& study);

// For a spec whose trials are a built-in (registered) workload's: reads the params of its first planned trials as
// the trainer and the workload would, and throws SpecError, at the spec's workload: key, naming each problem a trial
// would fail with before training (a param nobody reads, a value refused, one needed and missing).
void CheckWorkloadReadsParams(const StudySpec& spec, const StudyPlan& plan);

// Throws SpecError (at run_dir, or the spec's file) when the spec's run_dir cannot hold trial directories: it is a
// file, or cannot be made or written by this process. Makes it when missing.
void CheckRunDirUsable(const StudySpec& spec);

// What `dltune run` checks before it creates a study, so that a mistake costs no study and no failed trials: the
// workload is known, its arguments and the first planned trials' params are what it reads and its model fits in memory
// (CheckWorkloadReadsParams), and the run_dir is usable (CheckRunDirUsable). `dltune space check` checks the same
// but the run_dir.
void CheckSpecBeforeCreating(const StudySpec& spec);

// The values of a `command:` template's placeholders for a trial (docs/trial-protocol.md, "Placeholders"): its params
// by name and the built-in ones.
std::map<std::string, std::string> Placeholders(const StudySpec& spec, const TrialRecord& trial,
                                                const std::map<std::string, Value>& params,
                                                const std::filesystem::path& trial_dir);

// The threads trial `number` trains with: the spec's training.threads, or when that is auto the parallel layout's
// choice its trial.json records (1 before it has one).
int TrialThreads(const StudySpec& spec, const StudyRecord& study, std::uint64_t number);

// trial.json's content (see docs/trial-protocol.md) for `trial` of `study`, whose params by name are `params`: the
// spec's training with its derived settings worked out, training with `threads` threads (a trial's: TrialThreads).
nlohmann::json TrialDescription(const StudySpec& spec, const StudyRecord& study, const TrialRecord& trial,
                                const std::map<std::string, Value>& params, int threads, bool resuming);

// Writes `description` (TrialDescription's) to `trial_dir`/trial.json: whole, but not synced to disk, as every attempt
// of a trial writes it again. Throws IoError.
void WriteTrialDescription(const std::filesystem::path& trial_dir, const nlohmann::json& description);

// Creates the trial's directory and files and the command that runs it: `dltune_executable run-trial` for a
// built-in workload, the rendered `command:` otherwise. The study directory gets a study.json naming its study; one
// naming another study is refused. Throws Error when a file cannot be written or a placeholder has no value in this
// trial. A spec that leaves training.threads to auto gives the trial `auto_threads` threads, or on resuming the
// threads it started with. `gpus`: the trial's GPUs (GpuPlacement::VisibleTo), named in CUDA_VISIBLE_DEVICES by
// UUID and in trial.json's "gpus" (an empty list hides the machine's GPUs from it); nullopt leaves the environment's
// CUDA_VISIBLE_DEVICES alone (a machine without GPUs).
PreparedTrial PrepareTrial(const StudySpec& spec, const StudyRecord& study, const ActiveTrial& trial,
                           const std::filesystem::path& dltune_executable, int auto_threads = 1,
                           const std::optional<std::vector<GpuDevice>>& gpus = std::nullopt);

// A command that trains the trial again on its own: `dltune train ...` with its params and seed for a built-in
// workload; the program with its environment otherwise.
std::string ReproduceCommand(const StudySpec& spec, const StudyRecord& study, const TrialRecord& trial);

}  // namespace dltune
