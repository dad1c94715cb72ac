// How every trial of a study trains, apart from its hyperparameters: the spec's `training:` block, the `dltune
// train` options, trial.json's "training" and the trainer's options are all this one struct, described once by
// TrainingSettingFields(). A new setting is a member here, its row in that table, and the trainer code that uses it:
// the spec parser, trial.json, the `dltune train` flags and the reproduction command follow from the table.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/value.h"

namespace dltune {

// A documented value struct; Validate() names a bad value.
struct TrainingSettings {
  std::int64_t eval_every_steps = 0;         // evaluate every this many steps, and at the last; 0: max_train_steps / 10
  std::int64_t log_every_steps = 0;          // training metrics leave the device this often; 0: at every evaluation
  std::string eval_schedule;                 // when to evaluate (EvalSchedule's text); "": every eval_every_steps
  std::int64_t eval_batch_size = 0;          // 0: twice the training batch size
  std::int64_t train_eval_examples = 10000;  // the fixed subset of training data evaluated for training error
  std::int64_t valid_sample_examples = 0;    // >0: periodic evaluations on a fixed sample of valid, the full split at
                                             // the end
  std::int64_t prediction_examples = 32;     // validation examples whose predictions are reported at every evaluation
  bool test_at_end = false;                  // also evaluate the test split after the last step
  double divergence_factor = 100.0;          // a training loss above this multiple of the first one is divergence
  int keep_best_checkpoints = 1;             // the best pool (retrospective optimal checkpoint selection)
  int keep_latest_checkpoints = 2;           // the latest pool (resuming after preemption)
  int threads = 0;                           // threads per trial; 0 ("auto"): the runner measures the layout
  std::string profile_steps;                 // "A:B": a profile trace of steps A to B (ProfileWindow); "": none
  double timeout_seconds = 0;  // >0: a trial process running longer than this is stopped and failed (runner)
  int processes = 1;           // data-parallel ranks that train each trial together (docs/data-parallel.md)
  double collective_timeout_seconds = 300;  // how long a rank waits for the others in a collective
  // Where the built-in trainer trains: "auto" (a CUDA device when the process sees one, else the CPU), "cpu" or
  // "cuda". Data-parallel ranks (processes > 1) train on the CPU: auto is the CPU there, and cuda an error.
  std::string device = "auto";
  // Trials of a sub-study trained together as one array model, at most this many in a group (docs/training.md,
  // "Fused trials"): "chosen" (the default, a spec that leaves it out: measured as "auto" where fusion can win and the
  // probe is cheap, PlanFusion in src/run/parallel_layout.h, else apart), "off", "auto" or a number of at least 2, as
  // text.
  std::string fuse = "chosen";
  // A trial or fused group training on CUDA captures its step once in a CUDA graph and replays it (docs/training.md,
  // "CUDA graphs"): "auto" (default: where a replay, timed against the step launched eagerly, is the faster), "true"
  // (wherever the step can be captured) or "false"; elsewhere it trains eagerly, bit for bit alike.
  std::string cuda_graph = "auto";

  // Throws Error naming the setting and the bad value; `max_train_steps` bounds the step intervals.
  void Validate(std::int64_t max_train_steps) const;
  // These settings with the derived ones filled in: eval_every_steps from max_train_steps, log_every_steps from it.
  TrainingSettings Resolved(std::int64_t max_train_steps) const;

  bool operator==(const TrainingSettings&) const = default;
};

// What one setting is, for everything that reads or writes settings by name.
struct TrainingSettingField {
  enum class Kind {
    kCount,     // a whole number
    kNumber,    // a real number
    kSwitch,    // true or false (a flag without a value on the command line)
    kDuration,  // seconds; in a spec also "90s", "45m", "2h", "1d"
    kText,      // a word of the setting's own grammar, checked by `check_text`
  };
  std::string_view key;   // in the spec's training: block and in trial.json's "training"
  std::string_view flag;  // the `dltune train` option; empty for a setting of the runner alone
  std::string_view help;  // one line
  Kind kind = Kind::kCount;
  double min = 0;  // the range a value must be in (kCount, kNumber, kDuration); min is excluded when min_exclusive
  double max = 0;
  bool min_exclusive = false;
  bool at_most_steps = false;  // also at most max_train_steps (a step interval)
  std::variant<std::int64_t TrainingSettings::*, int TrainingSettings::*, double TrainingSettings::*,
               bool TrainingSettings::*, std::string TrainingSettings::*>
      member;
  // kText: throws Error for a bad value; `max_train_steps` (0: unknown) bounds a text naming steps.
  void (*check_text)(const std::string& text, std::int64_t max_train_steps) = nullptr;
  bool auto_word = false;  // kCount: also the word "auto", held as 0

  Value Get(const TrainingSettings& settings) const;
  // Sets the value, checked: throws Error, with a message to follow the setting's name ("must be between 1 and
  // 3000"), when it is of the wrong kind or out of range. `max_train_steps` (0: unknown) bounds step intervals.
  void Set(TrainingSettings& settings, const Value& value, std::int64_t max_train_steps = 0) const;
};

// Every setting, in the order the docs list them.
const std::vector<TrainingSettingField>& TrainingSettingFields();

// trial.json's "training": every setting by key.
nlohmann::json TrainingSettingsToJson(const TrainingSettings& settings);
// The settings a "training" object holds (keys it lacks keep their defaults; unknown keys are ignored, so a newer
// writer's file still reads). Throws Error for a value of the wrong kind or out of range.
TrainingSettings TrainingSettingsFromJson(const nlohmann::json& json);

// `dltune train` options that reproduce `settings`: every setting that differs from its default and has a flag, as
// shell words ("--eval-every 500 --test").
std::string TrainingSettingFlags(const TrainingSettings& settings);

// `training.profile_steps`: the window of training steps a profile trace records. "A:B" is from step A to step B,
// steps counted as everywhere in dltune (step n: n updates done): the B - A training steps that metrics.jsonl
// numbers A+1 to B, each with its evaluation and checkpoint when it has them (Python's slice A:B of the 0-based
// steps). 0 <= A < B <= max_train_steps.
struct ProfileWindow {
  std::int64_t begin = 0;  // A: recording starts when this many steps are done
  std::int64_t end = 0;    // B: and stops when this many are

  // The window `text` names; nullopt for "" (no trace). Throws Error, with a message to follow the setting's name
  // ("must be A:B ..."), for anything else, and for a window ending after `max_train_steps` (when > 0).
  static std::optional<ProfileWindow> Parse(const std::string& text, std::int64_t max_train_steps = 0);
  std::int64_t steps() const { return end - begin; }
};

// The file the trainer writes a profile trace to: profile.trace.json in the directory that holds the checkpoint
// directory `checkpoint_dir` (a trial's directory, `dltune train`'s --out). docs/training.md describes its format.
std::filesystem::path ProfileTracePath(const std::filesystem::path& checkpoint_dir);

// A duration as a person writes it: a number of seconds, or a number with a unit ("90s", "45m", "2h", "1.5d").
// Throws Error for anything else.
double ParseDurationText(const std::string& text);

// The hyperparameters in which the trials of a fused group may differ (training.fuse; docs/training.md, "Fused
// trials"): the optimizer's kind and coefficients and the learning-rate schedule's, which the array optimizer takes
// per member. Trials that differ in any other param (the batch size, the model's) train apart.
const std::set<std::string>& FusibleHyperparameters();

}  // namespace dltune
