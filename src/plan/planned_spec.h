// The parts every procedure's planning shares (src/plan/ only): reading the parent, choosing its best
// configurations, and writing the planned spec in the order people read a spec.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "dltune/analyze/analysis.h"
#include "space/yaml_writer.h"

namespace dltune {
struct PlannedStudy;  // dltune/plan/plan.h, which every caller of Finish includes
}  // namespace dltune

namespace dltune::plan_internal {

// A parent trial chosen to be trained again.
struct Chosen {
  TrialRecord trial;
  double value = 0;  // its best objective, or its configuration's mean over replicas
  int rank = 0;      // 1 = best of its sub-study
  int replicas = 1;  // how many replicas the value is the mean of
};

// The best `top` configurations of each sub-study, listed rank by rank (each sub-study's best, then each one's
// second...). A parent with replicas is ranked by its configurations' means, each represented by its median replica.
std::vector<Chosen> ChooseBest(const StudyData& parent, std::uint64_t top);
// The parent's records, checked to be something a procedure can start from (Error: unknown, or nothing completed).
// `with_measurements` for a plan that analyses the parent's curves.
StudyData LoadParent(Store& store, const std::string& name, bool with_measurements = false);
// Error unless the parent has a completed trial with an objective (what LoadParent checks).
void RequireCompletedTrial(const StudyData& parent);
// Every sub-study of a separate-mode parent needs a configuration (the list sampler gives each sub-study its own).
void RequireEverySubStudy(const StudyData& parent, const std::vector<Chosen>& chosen);
// `given`, or "<parent>-<suffix>", checked to name a study.
std::string PlannedName(const std::string& given, const std::string& parent, const std::string& suffix);
// The params of a trial that a list config gives: every param that varies (fixed ones come from the space).
YamlTree ConfigOf(const SearchSpace& space, const Assignment& params);
// A trial's params by the names training reads (a param's `name:`), in the order of the space; the first of two
// params sharing a name wins (only one exists in a trial).
std::vector<std::pair<std::string, Value>> ParamsByDisplayName(const SearchSpace& space, const Assignment& params);
// The space of one parent trial's configuration, every param fixed at its value (by the names training reads), at a
// constant learning rate: schedule constant, warmup_steps 0, no decay params. With `without_regularization`, weight
// decay, dropout and label smoothing are 0 too. Callers then set the params they sweep.
YamlTree ConstantScheduleSpace(const StudyData& parent, const TrialRecord& trial, bool without_regularization);
// The parent's best trial over all sub-studies.
Chosen BestOverall(const StudyData& parent);
// The configuration an instability is probed at: the best of the sub-study whose open `instability` (or mostly
// infeasible) finding names it, else the best overall.
Chosen BestWhereUnstable(const StudyData& parent);
// `sampler: {name: grid}`: every value of the space's swept param once.
YamlTree GridSampler();
// The parent's `training:` block (empty when it has none), to be changed by the plan.
YamlTree ParentTraining(const StudyData& parent);
// The learning rate of a trial (its `learning_rate` param, by the name training reads); Error when it has none.
double LearningRateOf(const StudyData& parent, const TrialRecord& trial);
// A spec file read as a parent: its record holds its name and text, nothing ran.
StudyData ParentFromSpecFile(const std::string& path);
// "0.0123": 6 significant digits.
std::string Num(double value);
// `text` wrapped at 100 columns for a comment, its paragraphs ("\n") kept.
std::string WrapComment(const std::string& text);

// A stability lineage's baseline (with its measurements) and what was learnt of its instability, from the baseline
// itself (its newest instability probe) or from its probe, warmup or clipping study.
struct StabilityContext {
  StudyData baseline;
  std::optional<double> unstable_learning_rate;  // the probe's smallest unstable rate (or the clipping study's rate)
  std::int64_t probe_steps = 0;                  // the probe's run length; 0 without a probe
};
StabilityContext StabilityContextOf(Store& store, const StudyData& study);

// `origin`'s spec as its author wrote it, renamed `name`, headed by `header` (a comment) and ending in a procedure
// block of `kind` naming `parent` and `options`: a study that tunes as its origin did, with what the caller then
// changes (apply-steps, expand, apply-clipping, narrow-lr).
YamlTree DerivedSpec(const StudyData& origin, const std::string& name, const std::string& header,
                     const std::string& kind, const std::string& parent, YamlTree options);

// The pieces of a planned spec; Write puts them together in the order people read a spec.
struct SpecParts {
  std::string header;  // the comment at the top
  std::string name, description, goal;
  std::int64_t max_train_steps = 0;
  std::uint64_t replicas = 1;
  YamlTree training;  // kNull: as the parent (copied), or replaced
  YamlTree sampler;   // kNull: a list sampler of `configs`
  YamlTree configs = YamlTree::Sequence();
  bool joint = false;  // leave out the parent's scientific_mode (a study without scientific params)
  YamlTree space;      // the parent's, possibly changed
  YamlTree procedure = YamlTree::Map();
};
std::string Write(const StudyData& parent, const SpecParts& parts);
// The procedure block: kind, parent, options, and the parent trial (with its seed) of each config (none when
// `chosen` is empty).
YamlTree ProcedureBlock(const std::string& kind, const StudyData& parent, YamlTree options,
                        const std::vector<Chosen>& chosen);
// "trial 12 of quickstart: #1 of optimizer=adam, valid/error_rate 0.1123".
std::string ChosenComment(const StudyData& parent, const Chosen& c);
// The spec must read back, and describe what was planned: a mistake here is dltune's.
PlannedStudy Finish(const std::string& name, std::string text);

}  // namespace dltune::plan_internal
