#include "dltune/study/study_spec.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <list>
#include <mutex>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "core/rng.h"
#include "core/strings.h"
#include "search/parse_sampler.h"
#include "space/parse_space.h"
#include "study/command_template.h"

namespace dltune {

std::string ScientificModeName(ScientificMode mode) { return mode == ScientificMode::kJoint ? "joint" : "separate"; }

namespace {

const std::vector<std::string> kTopLevelKeys = {
    "name",      "description", "goal",     "workload",  "command",          "max_train_steps",
    "objective", "trials",      "replicas", "seed",      "scientific_mode",  "sampler",
    "space",     "run_dir",     "training", "procedure", "evaluate_command", "resources"};

// The most replicas of a configuration a spec may ask for.
constexpr std::int64_t kMaxReplicas = 1000;

// Where the playbook says why a study never searches its step budget.
constexpr const char* kStepsSection =
    "the playbook's \"Determining the number of steps for each training run\": max_train_steps is fixed within a "
    "study, since tuning it as a hyperparameter makes trials incomparable; set it at the top level and compare "
    "budgets in separate studies";

std::string ParseName(const YamlNode& node) {
  static const std::regex kNamePattern(R"([A-Za-z0-9][A-Za-z0-9_.\-]{0,127})");
  std::string name = node.AsString();
  if (!std::regex_match(name, kNamePattern)) {
    throw node.Fail("must be 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit");
  }
  return name;
}

WorkloadSpec ParseWorkload(const YamlNode& node) {
  WorkloadSpec workload;
  workload.where = node.Location();
  if (node.IsScalar()) {
    workload.name = node.AsString();
  } else {
    node.ExpectMap({"name", "args"});
    const auto name = node.Find("name");
    if (!name) throw node.Fail("needs name: the workload to train, e.g. fashion_mnist_mlp");
    workload.name = name->AsString();
    if (const auto args = node.Find("args")) {
      if (!args->IsMap()) throw args->Fail("must map argument names to values");
      workload.args = args->AsJson();
    }
  }
  if (workload.name.empty()) throw node.Fail("needs a workload name");
  return workload;
}

// `objective: valid/loss` or `objective: {metric: valid/accuracy, direction: maximize}`.
Objective ParseObjective(const YamlNode& node) {
  const auto parse = [](const YamlNode& metric, Direction direction) {
    try {
      return Objective::Parse(metric.AsString(), direction);
    } catch (const SpecError&) {
      throw;
    } catch (const Error& e) {
      throw metric.Fail(e.what());
    }
  };
  if (node.IsScalar()) return parse(node, Direction::kMinimize);
  node.ExpectMap({"metric", "direction"});
  Direction direction = Direction::kMinimize;
  if (const auto given = node.Find("direction")) {
    try {
      direction = ParseDirection(given->AsString());
    } catch (const SpecError&) {
      throw;
    } catch (const Error& e) {
      throw given->Fail(e.what());
    }
  }
  if (const auto metric = node.Find("metric")) return parse(*metric, direction);
  Objective objective;
  objective.direction = direction;
  return objective;
}

// The `training:` mapping, key by key as TrainingSettingFields() describes them.
TrainingSettings ParseTraining(const YamlNode& node, std::int64_t max_train_steps) {
  std::vector<std::string> keys;
  for (const auto& field : TrainingSettingFields()) keys.emplace_back(field.key);
  node.ExpectMap(keys);
  TrainingSettings training;
  for (const auto& field : TrainingSettingFields()) {
    const auto value = node.Find(std::string(field.key));
    if (!value) continue;
    // A list or mapping is no setting's value (not even the empty text of a text setting's default).
    if (!value->IsScalar()) throw value->Fail("must be a single value, not a list or mapping");
    try {
      field.Set(training, value->AsValue(), max_train_steps);
    } catch (const SpecError&) {
      throw;
    } catch (const Error& e) {
      throw value->Fail(e.what());
    }
  }
  return training;
}

// A whole number in [low, high], or `auto` (nullopt).
std::optional<int> ParseCountOrAuto(const YamlNode& node, int low, int high) {
  if (node.IsScalar() && node.AsString() == "auto") return std::nullopt;
  const std::int64_t count = node.AsInt();
  if (count < low || count > high)
    throw node.Fail(fmt::format("must be auto or a whole number from {} to {}", low, high));
  return static_cast<int>(count);
}

// `resources: {gpus_per_trial: auto | N, trials_per_gpu: auto | N}`.
ResourceSpec ParseResources(const YamlNode& node) {
  node.ExpectMap({"gpus_per_trial", "trials_per_gpu"});
  ResourceSpec resources;
  resources.where = node.Location();
  if (const auto gpus = node.Find("gpus_per_trial"))
    resources.gpus_per_trial = ParseCountOrAuto(*gpus, 0, kMaxGpusPerTrial);
  if (const auto packing = node.Find("trials_per_gpu")) {
    resources.trials_per_gpu = ParseCountOrAuto(*packing, 1, kMaxTrialsPerGpu).value_or(0);
    if (resources.trials_per_gpu > 1 && resources.gpus_per_trial.value_or(1) != 1) {
      throw packing->Fail("shares a GPU between trials of one GPU each; set gpus_per_trial: 1 (or leave it auto)");
    }
  }
  return resources;
}

// Every placeholder of `command:` must name a param of the space or a built-in placeholder (or one of `extra`).
void CheckCommand(const YamlNode& node, const std::string& command, const SearchSpace& space,
                  const std::vector<std::string>& extra = {}) {
  if (command.empty()) throw node.Fail("must not be empty");
  std::vector<std::string> names = BuiltinPlaceholders();
  names.insert(names.end(), extra.begin(), extra.end());
  for (const auto& param : space.params()) {
    if (std::find(names.begin(), names.end(), param.name) == names.end()) names.push_back(param.name);
  }
  try {
    for (const auto& placeholder : CommandPlaceholders(command)) {
      if (std::find(names.begin(), names.end(), placeholder) == names.end()) {
        throw node.Fail(fmt::format("{{{}}} names no param of the space and no built-in placeholder{}", placeholder,
                                    DidYouMean(placeholder, names)));
      }
    }
  } catch (const SpecError&) {
    throw;
  } catch (const Error& e) {
    throw node.Fail(std::string(e.what()).substr(std::string("command: ").size()));
  }
}

void RefuseSearchedStepBudget(const SearchSpace& space) {
  for (const auto& param : space.params()) {
    if (param.id == "max_train_steps" || param.name == "max_train_steps") {
      throw SpecError(param.where, "space." + param.id,
                      std::string("cannot be a param of the space: ") + kStepsSection);
    }
  }
}

void CheckScientificParams(const StudySpec& spec, const YamlNode& space_node) {
  if (spec.scientific_mode != ScientificMode::kSeparate) return;
  for (const Param* param : spec.space->WithRole(Role::kScientific)) {
    if (!param->IsChoice()) {
      const auto node = space_node.Find(param->id);
      throw node->Fail(
          fmt::format("is a scientific {} range; scientific_mode: separate makes one sub-study per "
                      "scientific value, so give a list (values: [...]) or use scientific_mode: joint",
                      KindName(param->kind)));
    }
  }
}

// `procedure: {kind, parent, options, from_trials}`, as `dltune plan` writes it.
ProcedureSpec ParseProcedure(const YamlNode& node) {
  node.ExpectMap({"kind", "parent", "options", "from_trials"});
  ProcedureSpec procedure;
  procedure.where = node.Location();
  const auto kind = node.Find("kind");
  if (!kind) throw node.Fail("needs kind: what the study was planned as, e.g. retrain");
  procedure.kind = kind->AsString();
  const auto& kinds = ProcedureSpec::Kinds();
  if (std::find(kinds.begin(), kinds.end(), procedure.kind) == kinds.end()) {
    throw kind->Fail(fmt::format("must be {}, not '{}'{}", JoinAlternatives(kinds, false), procedure.kind,
                                 DidYouMean(procedure.kind, kinds)));
  }
  const auto parent = node.Find("parent");
  if (!parent) throw node.Fail("needs parent: the study this one was planned from");
  procedure.parent = parent->AsString();
  if (const auto options = node.Find("options")) {
    if (!options->IsMap()) throw options->Fail("must map option names to values");
    procedure.options = options->AsJson();
  }
  if (const auto from = node.Find("from_trials")) {
    if (!from->IsSequence()) throw from->Fail("must list {trial, seed} for each config of the list sampler");
    for (const YamlNode& entry : from->Elements()) {
      entry.ExpectMap({"trial", "seed"});
      const auto trial = entry.Find("trial");
      const auto seed = entry.Find("seed");
      if (!trial || !seed) throw entry.Fail("needs trial: and seed: (the parent trial and the seed it trained with)");
      const std::int64_t number = trial->AsInt();
      const std::int64_t value = seed->AsInt();
      if (number < 0) throw trial->Fail("must be >= 0");
      if (value < 0) throw seed->Fail("must be >= 0");
      procedure.from_trials.push_back({static_cast<std::uint64_t>(number), static_cast<std::uint64_t>(value)});
    }
  }
  return procedure;
}

}  // namespace

const std::vector<std::string>& EvaluatePlaceholders() {
  static const std::vector<std::string> kNames = {"checkpoint", "split"};
  return kNames;
}

bool ProcedureSpec::Measures() const {
  return kind == "throughput" || kind == "fit-steps" || kind == "instability" || kind == "warmup" || kind == "clipping";
}

const std::vector<std::string>& ProcedureSpec::Kinds() {
  static const std::vector<std::string> kKinds = {
      "retrain",     "round2", "fit-steps", "throughput",     "instability", "warmup", "apply-warmup",
      "apply-steps", "expand", "clipping",  "apply-clipping", "narrow-lr",   "fix"};
  return kKinds;
}

std::int64_t TrialMaxTrainSteps(const StudySpec& spec, const Assignment& params) {
  if (spec.procedure.kind != "warmup") return spec.max_train_steps;
  const auto warmup = params.find("warmup_steps");
  const auto steps = warmup == params.end() ? std::nullopt : NumericValue(warmup->second);
  if (!steps) return spec.max_train_steps;
  const double factor = spec.procedure.options.value("post_warmup_factor", 2.0);
  const auto budget = static_cast<std::int64_t>(std::llround(*steps * (1 + factor)));
  return std::clamp<std::int64_t>(budget, 1, spec.max_train_steps);
}

std::uint64_t TrialSeed(std::uint64_t study_seed, std::uint64_t trial_number) {
  // Below 2^63 so that every language reads it as a signed 64-bit integer.
  return MixSeed(study_seed, trial_number) >> 1;
}

std::uint64_t ReplicaSeed(std::uint64_t study_seed, std::uint64_t replica) {
  constexpr std::uint64_t kReplicaStream = 0x7265706c69636173;  // "replicas"
  return MixSeed(MixSeed(study_seed, kReplicaStream), replica) >> 1;
}

StudySpec ParseStudySpec(const std::string& text, const std::string& file_name) {
  const YamlNode root = YamlNode::Parse(text, file_name);
  if (root.IsNull())
    throw SpecError({file_name, 0, 0}, "",
                    "is empty; a study spec needs at least name, workload, max_train_steps and space");
  root.ExpectMap(kTopLevelKeys);

  StudySpec spec;
  spec.file = file_name;
  spec.text = text;
  auto required = [&](const std::string& key, const std::string& hint) {
    auto node = root.Find(key);
    if (!node) throw SpecError({file_name, 1, 1}, key, "is missing: " + hint);
    return *node;
  };

  spec.name = ParseName(required("name", "name the study, e.g. name: nesterov_vs_adam"));
  if (const auto description = root.Find("description")) spec.description = description->AsString();
  if (const auto goal = root.Find("goal")) spec.goal = goal->AsString();
  const auto workload = root.Find("workload");
  const auto command = root.Find("command");
  if (workload && command) {
    throw command->Fail("and workload: are both given; a study trains either a built-in workload or its own program");
  }
  if (command) {
    spec.command = command->AsString();
  } else if (workload) {
    spec.workload = ParseWorkload(*workload);
  }  // neither: the trials are trained by a program using the ask/tell API
  spec.run_dir = "runs/" + spec.name;
  if (const auto run_dir = root.Find("run_dir")) {
    spec.run_dir = run_dir->AsString();
    if (spec.run_dir.empty()) throw run_dir->Fail("must not be empty");
  }
  const YamlNode steps =
      required("max_train_steps", std::string("every trial trains for the same number of steps; ") + kStepsSection);
  spec.max_train_steps = steps.AsInt();
  if (spec.max_train_steps < 1) throw steps.Fail("must be at least 1");
  if (const auto training = root.Find("training")) spec.training = ParseTraining(*training, spec.max_train_steps);
  if (const auto objective = root.Find("objective")) spec.objective = ParseObjective(*objective);
  if (const auto resources = root.Find("resources")) spec.resources = ParseResources(*resources);
  if (const auto trials = root.Find("trials")) {
    const std::int64_t count = trials->AsInt();
    if (count < 1 || static_cast<std::uint64_t>(count) > kMaxStudyTrials) {
      throw trials->Fail(fmt::format("must be between 1 and {}", kMaxStudyTrials));
    }
    spec.trials = static_cast<std::uint64_t>(count);
    spec.trials_given = true;
  }
  if (const auto mode = root.Find("scientific_mode")) {
    const std::string text_mode = mode->AsString();
    if (text_mode == "joint") {
      spec.scientific_mode = ScientificMode::kJoint;
    } else if (text_mode != "separate") {
      throw mode->Fail(fmt::format("must be separate or joint, not '{}'{}", text_mode,
                                   DidYouMean(text_mode, {"separate", "joint"})));
    }
  }
  if (const auto seed = root.Find("seed")) {
    const std::int64_t value = seed->AsInt();
    if (value < 0) throw seed->Fail("must be >= 0");
    spec.seed = static_cast<std::uint64_t>(value);
  }
  if (const auto replicas = root.Find("replicas")) {
    const std::int64_t count = replicas->AsInt();
    if (count < 1 || count > kMaxReplicas) throw replicas->Fail(fmt::format("must be between 1 and {}", kMaxReplicas));
    spec.replicas = static_cast<std::uint64_t>(count);
  }
  if (const auto sampler = root.Find("sampler")) spec.sampler = ParseSamplerOptions(*sampler);
  if (spec.replicas > 1 && spec.sampler.name == "gp") {
    throw root.Find("replicas")
        ->Fail(
            "needs a sampler that plans its trials up front; gp chooses each trial from the results so far (retrain "
            "its "
            "best trials afterwards with dltune plan retrain)");
  }
  if (const auto procedure = root.Find("procedure")) {
    spec.procedure = ParseProcedure(*procedure);
    if (!spec.procedure.from_trials.empty() &&
        (spec.sampler.name != "list" || spec.procedure.from_trials.size() != spec.sampler.configs.size())) {
      throw procedure->Find("from_trials")
          ->Fail(fmt::format("lists {} parent trials; it needs one per config of the list sampler ({})",
                             spec.procedure.from_trials.size(),
                             spec.sampler.name == "list" ? std::to_string(spec.sampler.configs.size())
                                                         : "the sampler is " + spec.sampler.name));
    }
  }
  if (spec.sampler.name == "halton_algoperf" && spec.seed > UINT32_MAX) {
    throw root.Find("seed")->Fail("must be below 2^32 for halton_algoperf (numpy's seed range)");
  }

  const YamlNode space_node =
      required("space", "the hyperparameters, e.g. space: {learning_rate: {min: 1e-4, max: 1, scale: log}}");
  spec.space = std::make_shared<const SearchSpace>(ParseSearchSpace(space_node));
  spec.space_where = space_node.Location();
  RefuseSearchedStepBudget(*spec.space);
  if (command) CheckCommand(*command, spec.command, *spec.space);
  if (const auto evaluate = root.Find("evaluate_command")) {
    if (!command) {
      throw evaluate->Fail(
          "applies to a study with its own command: (a built-in workload's checkpoints are evaluated by the trainer)");
    }
    spec.evaluate_command = evaluate->AsString();
    CheckCommand(*evaluate, spec.evaluate_command, *spec.space, EvaluatePlaceholders());
  }
  CheckScientificParams(spec, space_node);

  // Samplers with their own trial counts must agree with an explicit `trials:`.
  const StudyPlan plan(spec);
  // Grid and list samplers have trial counts of their own (the grid's is the same in every sub-study).
  const std::size_t checked = spec.sampler.name == "list" ? plan.SubStudyCount() : 1;
  if (spec.trials_given && (spec.sampler.name == "grid" || spec.sampler.name == "list")) {
    for (std::size_t s = 0; s < checked; ++s) {
      const std::uint64_t count = plan.SubStudyTrialCount(s);
      if (count != spec.trials) {
        throw root.Find("trials")->Fail(
            fmt::format("is {} but the {} sampler makes {} trials for sub-study {}; "
                        "remove trials: to run them all",
                        spec.trials, spec.sampler.name, count, plan.SubStudyAt(s).label));
      }
    }
  }
  for (std::size_t s = 0; s < checked; ++s) {
    if (plan.SubStudyTrialCount(s) == 0) {
      throw SpecError(
          spec.sampler.where, "sampler",
          fmt::format("makes no trial for sub-study {}; list at least one config for it", plan.SubStudyAt(s).label));
    }
  }
  return spec;
}

StudySpec LoadStudySpec(const std::string& path) {
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (std::filesystem::is_directory(status)) {
    throw Error(fmt::format("{}: is a directory, not a study spec (a YAML file)", path));
  }
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    throw Error(
        fmt::format("{}: is not a regular file (a device, a pipe or a socket); a study spec is a YAML file", path));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read the study spec (no such file, or no permission)", path));
  std::string text;
  char chunk[1 << 16];
  while (text.size() <= kMaxSpecBytes && in.read(chunk, sizeof(chunk)).gcount() > 0) {
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  }
  if (text.size() > kMaxSpecBytes) {
    throw Error(fmt::format("{}: is larger than {} MiB; a study spec is never that large", path, kMaxSpecBytes >> 20));
  }
  return ParseStudySpec(text, path);
}

namespace {

// "729,000,000"; "more than 2^64" for a count that saturated.
std::string Grouped(std::uint64_t n) {
  if (n == UINT64_MAX) return "more than 2^64";
  const std::string digits = std::to_string(n);
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped += ',';
    grouped += digits[i];
  }
  return grouped;
}

// "30 x 30 x 30 (optimizer, ...)": the value counts of the scientific choice params.
std::string CombinationFactors(const SearchSpace& space) {
  std::string counts, names;
  for (const Param* param : space.WithRole(Role::kScientific)) {
    if (!param->IsChoice()) continue;
    counts += (counts.empty() ? "" : " x ") + std::to_string(param->values.size());
    names += (names.empty() ? "" : ", ") + param->id;
  }
  return fmt::format("{} ({})", counts, names);
}

// How many samplers of sub-studies a plan keeps made (their points, permutations and models).
constexpr std::size_t kCachedSamplers = 64;

}  // namespace

// Samplers made so far, most recently used last.
struct StudyPlan::SamplerCache {
  std::mutex mutex;
  std::list<std::pair<std::size_t, std::shared_ptr<const Sampler>>> entries;
};

StudyPlan::StudyPlan(const StudySpec& spec)
    : space_(spec.space),
      sampler_options_(spec.sampler),
      joint_(spec.scientific_mode == ScientificMode::kJoint),
      seed_(spec.seed),
      trials_(spec.trials),
      cache_(std::make_unique<SamplerCache>()) {
  const std::uint64_t combinations = ScientificCombinationCount(*space_);
  const auto too_large = [&](const std::string& what) { return SpecError(spec.space_where, "space", what); };
  if (joint_) {
    if (combinations > kMaxScientificCombinations) {
      throw too_large(fmt::format(
          "has {} combinations of scientific values ({}); a joint study deals each of them once per block of that "
          "many trials and can deal at most {}: compare fewer values",
          Grouped(combinations), CombinationFactors(*space_), Grouped(kMaxScientificCombinations)));
    }
  } else {
    if (combinations > kMaxStudyTrials) {
      throw too_large(fmt::format(
          "makes {} sub-studies, one per combination of scientific values ({}), and a study runs at most {} trials "
          "in all: compare fewer values, or split the comparison into several studies",
          Grouped(combinations), CombinationFactors(*space_), Grouped(kMaxStudyTrials)));
    }
    substudy_count_ = static_cast<std::size_t>(combinations);
  }
  if (sampler_options_.name == "list") {
    // Each sub-study has the listed configs that are its own: count them all, to interleave and to check them.
    for (std::size_t i = 0; i < substudy_count_; ++i) counts_.push_back(SamplerOf(i)->TrialCount());
    for (const std::uint64_t count : counts_) total_ += count;
  } else {
    const auto first = SamplerOf(0);
    uniform_count_ = first->TrialCount();
    uniform_planned_ = first->PlannedTrialCount();
    adaptive_ = uniform_planned_ < uniform_count_;
    total_ = uniform_count_ > kMaxStudyTrials ? UINT64_MAX : uniform_count_ * substudy_count_;
  }
  if (total_ > kMaxStudyTrials) {
    throw too_large(fmt::format("makes {} sub-stud{} of {} trials each: {} trials, and a study runs at most {}",
                                Grouped(substudy_count_), substudy_count_ == 1 ? "y" : "ies", Grouped(uniform_count_),
                                Grouped(total_), Grouped(kMaxStudyTrials)));
  }
  configurations_ = total_;
  replicas_ = spec.replicas;
  total_ = configurations_ * replicas_;
  if (total_ > kMaxStudyTrials) {
    throw too_large(fmt::format("makes {} configurations trained {} times each: {} trials, and a study runs at most {}",
                                Grouped(configurations_), replicas_, Grouped(total_), Grouped(kMaxStudyTrials)));
  }
  if (!counts_.empty()) {
    std::vector<std::uint64_t> distinct = counts_;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    std::uint64_t below = 0;
    for (const std::uint64_t level : distinct) {
      std::vector<std::size_t> active;
      for (std::size_t s = 0; s < counts_.size(); ++s) {
        if (counts_[s] > below) active.push_back(s);
      }
      levels_.emplace_back(level, std::move(active));
      below = level;
    }
  }
  if (!spec.procedure.from_trials.empty() && sampler_options_.name == "list") AssignParents(spec);
}

StudyPlan::~StudyPlan() = default;

void StudyPlan::AssignParents(const StudySpec& spec) {
  // Config i of the list goes to the sub-study whose scientific values it gives, keeping its order there (as the list
  // sampler places it): its parent trial follows it.
  parents_.assign(substudy_count_, {});
  for (std::size_t i = 0; i < spec.sampler.configs.size(); ++i) {
    const Assignment& values = spec.sampler.configs[i].values;
    for (std::size_t s = 0; s < substudy_count_; ++s) {
      const Assignment scientific = joint_ ? Assignment{} : ScientificCombination(*space_, s);
      const bool belongs = std::all_of(scientific.begin(), scientific.end(), [&](const auto& entry) {
        const auto it = values.find(entry.first);
        return it != values.end() && SameValue(it->second, entry.second);
      });
      if (!belongs) continue;
      parents_[s].push_back(spec.procedure.from_trials[i]);
      break;
    }
  }
}

SubStudy StudyPlan::SubStudyAt(std::size_t index) const {
  if (index >= substudy_count_) {
    throw Error(fmt::format("sub-study {} is beyond the study's {} sub-studies", index, substudy_count_));
  }
  SubStudy substudy{index, joint_ ? Assignment{} : ScientificCombination(*space_, index), ""};
  for (const auto& param : space_->params()) {
    const auto it = substudy.scientific.find(param.id);
    if (it == substudy.scientific.end()) continue;
    if (!substudy.label.empty()) substudy.label += ",";
    substudy.label += param.id + "=" + FormatValue(it->second);
  }
  if (substudy.label.empty()) substudy.label = "all";
  return substudy;
}

std::uint64_t StudyPlan::SubStudyTrialCount(std::size_t substudy) const {
  if (substudy >= substudy_count_) throw Error(fmt::format("no sub-study {}", substudy));
  return counts_.empty() ? uniform_count_ : counts_[substudy];
}

std::shared_ptr<const Sampler> StudyPlan::SamplerOf(std::size_t index) const {
  {
    const std::lock_guard<std::mutex> lock(cache_->mutex);
    auto& entries = cache_->entries;
    for (auto it = entries.begin(); it != entries.end(); ++it) {
      if (it->first != index) continue;
      entries.splice(entries.end(), entries, it);
      return entries.back().second;
    }
  }
  // Sub-studies share the seed: params they have in common get the same quasi-random points, so no scientific
  // value gets luckier nuisance samples than another.
  const SubStudy substudy = SubStudyAt(index);
  std::shared_ptr<const Sampler> sampler =
      MakeSampler(sampler_options_, SamplingTarget{space_.get(), substudy.scientific, joint_, seed_, trials_});
  const std::lock_guard<std::mutex> lock(cache_->mutex);
  cache_->entries.emplace_back(index, sampler);
  if (cache_->entries.size() > kCachedSamplers) cache_->entries.pop_front();
  return sampler;
}

std::pair<std::size_t, std::uint64_t> StudyPlan::SubStudyOf(std::uint64_t number) const {
  if (number >= total_) throw Error(fmt::format("trial {} is beyond the study's {} trials", number, total_));
  return SubStudyOfConfiguration(number % configurations_);
}

std::pair<std::size_t, std::uint64_t> StudyPlan::SubStudyOfConfiguration(std::uint64_t configuration) const {
  const std::uint64_t number = configuration;
  if (counts_.empty()) return {static_cast<std::size_t>(number % substudy_count_), number / substudy_count_};
  // Round-robin over the sub-studies that still have trials: between two distinct trial counts the set of such
  // sub-studies is constant, so walk those stretches instead of single rounds.
  std::uint64_t remaining = number;
  std::uint64_t round = 0;
  for (const auto& [level, active] : levels_) {
    const std::uint64_t stretch = (level - round) * active.size();
    if (remaining < stretch) return {active[remaining % active.size()], round + remaining / active.size()};
    remaining -= stretch;
    round = level;
  }
  throw Error(fmt::format("trial {} is beyond the study's {} trials", number, total_));
}

bool StudyPlan::IsPlanned(std::uint64_t number) const {
  const auto [substudy, index] = SubStudyOf(number);
  return index < (counts_.empty() ? uniform_planned_ : counts_[substudy]);
}

std::optional<ParentTrial> StudyPlan::ParentOf(std::uint64_t configuration) const {
  if (parents_.empty() || configuration >= configurations_) return std::nullopt;
  const auto [substudy, index] = SubStudyOfConfiguration(configuration);
  if (index >= parents_[substudy].size()) return std::nullopt;
  return parents_[substudy][index];
}

std::uint64_t StudyPlan::SeedOf(std::uint64_t number, std::uint64_t replica, std::size_t substudy,
                                std::uint64_t index) const {
  if (replica == 0 && !parents_.empty() && index < parents_[substudy].size()) return parents_[substudy][index].seed;
  return replicas_ == 1 ? TrialSeed(seed_, number) : ReplicaSeed(seed_, replica);
}

PlannedTrial StudyPlan::Placed(std::uint64_t number) const {
  const auto [substudy, index] = SubStudyOf(number);
  const std::uint64_t replica = number / configurations_;
  return {.number = number,
          .configuration = number % configurations_,
          .replica = replica,
          .substudy = substudy,
          .index = index,
          .seed = SeedOf(number, replica, substudy, index)};
}

PlannedTrial StudyPlan::Trial(std::uint64_t number) const {
  PlannedTrial trial = Placed(number);
  trial.params = SamplerOf(trial.substudy)->Suggest(trial.index);
  return trial;
}

PlannedTrial StudyPlan::TrialFromHistory(std::uint64_t number, std::span<const Observation> history) const {
  PlannedTrial trial = Placed(number);
  trial.params = SamplerOf(trial.substudy)->SuggestFromHistory(trial.index, history);
  return trial;
}

}  // namespace dltune
