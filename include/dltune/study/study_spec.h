// A study as its spec describes it, and the trials it would run.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/objective.h"
#include "dltune/core/training_settings.h"
#include "dltune/search/sampler.h"
#include "dltune/space/search_space.h"

namespace dltune {

// One sub-study per scientific combination (the playbook's simplest design), or one study sampling the scientific
// params together with the nuisance ones.
enum class ScientificMode { kSeparate, kJoint };

// What each trial trains: a registered workload and its fixed arguments (not hyperparameters).
struct WorkloadSpec {
  std::string name;
  nlohmann::json args = nlohmann::json::object();
  SourceLocation where;  // the workload: key, for errors about it
};

// Where a listed config of a planned study comes from: a trial of the parent study, and the seed it trained with.
struct ParentTrial {
  std::uint64_t trial = 0;
  std::uint64_t seed = 0;
};

// A study planned from another by `dltune plan KIND --from PARENT` (the spec's `procedure:` block): what it was
// planned as, from which study, with which options. The runner runs it as any study; the analyses read it.
struct ProcedureSpec {
  std::string kind;                                   // "retrain", "round2"; "" for a study written by hand
  std::string parent;                                 // the parent study's name
  nlohmann::json options = nlohmann::json::object();  // the options `dltune plan` was given
  // Aligned with sampler.configs: the parent trial each config was taken from; replica 0 of the config trains with
  // that trial's seed, so it reproduces the trial. Empty when the configs are not parent trials.
  std::vector<ParentTrial> from_trials;
  SourceLocation where;

  bool empty() const { return kind.empty(); }
  // Its configurations are parent trials trained again (retrain, round 2, a warmup applied), so their rankings can be
  // compared with the parent's; a measurement (a probe, a warmup or clipping sweep) reuses one parent trial's seed for
  // every config instead.
  bool ComparesWithParent() const { return !from_trials.empty() && !Measures(); }
  // It measures something for the studies after it (a throughput or fit-steps sweep, an instability probe, a warmup
  // or clipping study): its trials are probes, never a configuration to adopt, decide on or launch.
  bool Measures() const;
  // The procedure kinds `dltune plan` makes.
  static const std::vector<std::string>& Kinds();
};

// A parsed, validated study spec. Its trials are trained by a built-in workload, by its own `command`, or — when it
// names neither — by a program using the ask/tell API (dltune/run/study_session.h). Plain value type; see
// docs/study-spec.md for every key and its default.
// `resources:`: the GPUs each trial takes (docs/parallel-layout.md, "GPUs").
struct ResourceSpec {
  // GPUs each process of a trial gets (a data-parallel trial's ranks one set each); nullopt: auto, which is 1 for a
  // command: study when the worker has GPUs and 0 otherwise (the built-in trainer trains on the CPU).
  std::optional<int> gpus_per_trial;
  // Trials sharing one GPU when gpus_per_trial is 1; 0: auto, packing by measurement.
  int trials_per_gpu = 0;
  SourceLocation where;  // of `resources:`, for errors about it
};
inline constexpr int kMaxGpusPerTrial = 64;
inline constexpr int kMaxTrialsPerGpu = 64;

struct StudySpec {
  std::string name;
  std::string description;
  // The round's goal, as the playbook asks each round to have one ("which scientific hyperparameter's effect do we
  // want to learn?"): free text shown in the tracking record; "" when the spec has none.
  std::string goal;
  WorkloadSpec workload;  // what each trial trains; empty name when `command` is given, or neither (ask/tell)
  std::string command;    // the trial program of a study without a built-in workload (docs/trial-protocol.md)
  // How that program evaluates a stored checkpoint on a split (dltune launch, dltune evaluate): a command template
  // with the trial's placeholders and {checkpoint}, {split}; "" when it has none.
  std::string evaluate_command;
  std::string run_dir;               // where trial directories go: `run_dir:`, default "runs/<name>"
  TrainingSettings training;         // the `training:` mapping: how each trial trains (dltune/core/training_settings.h)
  ResourceSpec resources;            // the `resources:` mapping: GPUs per trial and trials per GPU
  std::int64_t max_train_steps = 0;  // the same for every trial; never searched within a study
  Objective objective;
  std::uint64_t trials = 20;  // configurations per sub-study (separate) or in all (joint)
  bool trials_given = false;  // whether the spec set `trials:` itself
  // Times each configuration is trained, each time with another seed (the playbook's trial variance): replica r of
  // every configuration has the same seed, so configurations are compared on the same seeds.
  std::uint64_t replicas = 1;
  std::uint64_t seed = 0;
  ScientificMode scientific_mode = ScientificMode::kSeparate;
  SamplerOptions sampler;
  ProcedureSpec procedure;                   // `procedure:`; empty for a study written by hand
  std::shared_ptr<const SearchSpace> space;  // shared so plans and samplers can point into it
  SourceLocation space_where;                // where `space:` is, for errors about the space as a whole
  std::string file;                          // where it was read from
  std::string text;                          // its text, exactly as read
};

std::string ScientificModeName(ScientificMode mode);

// The placeholders an evaluate_command has besides a trial command's: {checkpoint} (the checkpoint's path) and
// {split}.
const std::vector<std::string>& EvaluatePlaceholders();

// Parses and validates a spec. Throws SpecError ("file:line:column: key message") for every mistake.
StudySpec ParseStudySpec(const std::string& text, const std::string& file_name);
// The largest spec file LoadStudySpec reads.
inline constexpr std::size_t kMaxSpecBytes = std::size_t{16} << 20;
// Reads and parses a spec file. Throws Error when it cannot be read, is not a regular file, or is larger than
// kMaxSpecBytes.
StudySpec LoadStudySpec(const std::string& path);

// One sub-study: the scientific values it holds fixed ("optimizer=adam"); the whole study in joint mode.
struct SubStudy {
  std::size_t index = 0;
  Assignment scientific;
  std::string label;  // "optimizer=adam", or "all" when there is a single sub-study
};

// One trial the study will run: replica `replica` of configuration `configuration`.
struct PlannedTrial {
  std::uint64_t number = 0;         // 0-based number within the study
  std::uint64_t configuration = 0;  // the params' number: what a study without replicas calls its trial number
  std::uint64_t replica = 0;        // 0 to replicas - 1
  std::size_t substudy = 0;         // index into StudyPlan::substudies()
  std::uint64_t index = 0;          // the configuration's index within its sub-study (the sampler's trial index)
  std::uint64_t seed = 0;           // the trial's seed (TrialSeed, ReplicaSeed or the parent trial's)
  Assignment params;
};

// A trial's seed in a study without replicas: a pure function of the study's seed and the trial number, below 2^63.
std::uint64_t TrialSeed(std::uint64_t study_seed, std::uint64_t trial_number);
// Replica `replica`'s seed in a study with replicas, the same for every configuration; from a stream of its own, so
// it is never the seed of a trial of a study without replicas made from the same seed.
std::uint64_t ReplicaSeed(std::uint64_t study_seed, std::uint64_t replica);

// The steps a trial with `params` trains: the spec's max_train_steps, but in a warmup study (procedure kind
// "warmup", dltune plan warmup) the playbook's warmup_steps + post_warmup_steps, post_warmup_steps being
// procedure.options.post_warmup_factor (default 2) times warmup_steps, at most max_train_steps.
std::int64_t TrialMaxTrainSteps(const StudySpec& spec, const Assignment& params);

// The most trials a study has (all sub-studies together).
inline constexpr std::uint64_t kMaxStudyTrials = 1000000;

// The trials of a study, made by its sampler. Configurations of the sub-studies are interleaved (0 of each, then 1
// of each, ...) so a study stopped early has compared its scientific values on equal budgets; with replicas, trial
// number n is replica n / C of configuration n % C (C configurations), so every configuration has its replica r
// before any has its replica r + 1. Lazy: sub-studies and
// their samplers are made when a trial of theirs is asked for (a few are kept), so a plan's size does not grow with
// the study's. Immutable (apart from that cache) and thread-safe; keeps the spec's space alive.
class StudyPlan {
 public:
  // Throws SpecError when the sampler does not fit the study (see MakeSampler), or when the study would have more
  // than kMaxStudyTrials trials (or a joint study more than kMaxScientificCombinations scientific combinations).
  explicit StudyPlan(const StudySpec& spec);
  ~StudyPlan();
  StudyPlan(const StudyPlan&) = delete;
  StudyPlan& operator=(const StudyPlan&) = delete;

  std::size_t SubStudyCount() const { return substudy_count_; }
  // Configurations (sets of params) in all sub-studies; each is trained Replicas() times.
  std::uint64_t ConfigurationCount() const { return configurations_; }
  std::uint64_t Replicas() const { return replicas_; }
  // Sub-study `index` (< SubStudyCount()).
  SubStudy SubStudyAt(std::size_t index) const;
  // Configurations times replicas.
  std::uint64_t TrialCount() const { return total_; }
  // The sub-study's configurations.
  std::uint64_t SubStudyTrialCount(std::size_t substudy) const;
  // Whether trial `number`'s params are known up front. An adaptive sampler (gp) chooses the others from the
  // results so far, when a worker asks for them (TrialFromHistory).
  bool IsPlanned(std::uint64_t number) const;
  // Whether some trial is not planned.
  bool IsAdaptive() const { return adaptive_; }
  // Trial `number` (< TrialCount(); IsPlanned(number), else Error).
  PlannedTrial Trial(std::uint64_t number) const;
  // Trial `number` (< TrialCount()) given its sub-study's history (see Sampler::SuggestFromHistory); the sub-study
  // is SubStudyOf(number). Planned trials ignore the history.
  PlannedTrial TrialFromHistory(std::uint64_t number, std::span<const Observation> history) const;
  // The sub-study trial `number` belongs to, and its configuration's index there.
  std::pair<std::size_t, std::uint64_t> SubStudyOf(std::uint64_t number) const;
  // The parent trial configuration `configuration` was taken from (the spec's procedure.from_trials); nullopt for a
  // study whose configs are not parent trials.
  std::optional<ParentTrial> ParentOf(std::uint64_t configuration) const;

 private:
  // SubStudyOf for configuration `configuration`.
  std::pair<std::size_t, std::uint64_t> SubStudyOfConfiguration(std::uint64_t configuration) const;
  // Trial `number` without its params: where it is in the plan, and its seed.
  PlannedTrial Placed(std::uint64_t number) const;
  // The seed of trial `number`: replica `replica` of the configuration that is index `index` of `substudy`.
  std::uint64_t SeedOf(std::uint64_t number, std::uint64_t replica, std::size_t substudy, std::uint64_t index) const;
  // Fills parents_ from the spec's procedure.from_trials.
  void AssignParents(const StudySpec& spec);
  struct SamplerCache;
  // The sampler of sub-study `index`, made on first use.
  std::shared_ptr<const Sampler> SamplerOf(std::size_t index) const;

  std::shared_ptr<const SearchSpace> space_;
  SamplerOptions sampler_options_;
  bool joint_ = false;
  std::uint64_t seed_ = 0;
  std::uint64_t trials_ = 0;
  std::size_t substudy_count_ = 1;
  // Trial counts of the sub-studies when they differ (the list sampler); else every sub-study has uniform_count_.
  std::vector<std::uint64_t> counts_;
  std::uint64_t uniform_count_ = 0;
  std::uint64_t uniform_planned_ = 0;
  // Non-uniform counts: the distinct counts ascending, each with the sub-studies that have more trials than the
  // level below it (SubStudyOf walks these stretches).
  std::vector<std::pair<std::uint64_t, std::vector<std::size_t>>> levels_;
  bool adaptive_ = false;
  std::uint64_t configurations_ = 0;
  std::uint64_t replicas_ = 1;
  std::uint64_t total_ = 0;
  // The parent trials of the configs by sub-study and index within it, when the configs are parent trials.
  std::vector<std::vector<ParentTrial>> parents_;
  std::unique_ptr<SamplerCache> cache_;
};

}  // namespace dltune
