#include "dltune/study/study_spec.h"

#include <algorithm>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "dltune/core/strings.h"
#include "dltune/study/command_template.h"

namespace dltune {

std::string ScientificModeName(ScientificMode mode) { return mode == ScientificMode::kJoint ? "joint" : "separate"; }
std::string DirectionName(Direction direction) { return direction == Direction::kMaximize ? "maximize" : "minimize"; }

namespace {

const std::vector<std::string> kTopLevelKeys = {
    "name", "description",     "workload", "command", "max_train_steps", "objective", "trials",
    "seed", "scientific_mode", "sampler",  "space",   "run_dir",         "training"};
constexpr std::uint64_t kMaxTrials = 1000000;

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

Objective ParseObjective(const YamlNode& node) {
  Objective objective;
  if (node.IsScalar()) {
    objective.metric = node.AsString();
    if (objective.metric.empty()) throw node.Fail("must name a metric, e.g. valid/error_rate");
    return objective;
  }
  node.ExpectMap({"metric", "direction"});
  if (const auto metric = node.Find("metric")) {
    objective.metric = metric->AsString();
    if (objective.metric.empty()) throw metric->Fail("must name a metric, e.g. valid/error_rate");
  }
  if (const auto direction = node.Find("direction")) {
    const std::string text = direction->AsString();
    if (text == "maximize") {
      objective.direction = Direction::kMaximize;
    } else if (text != "minimize") {
      throw direction->Fail(
          fmt::format("must be minimize or maximize, not '{}'{}", text, DidYouMean(text, {"minimize", "maximize"})));
    }
  }
  return objective;
}

TrainingSettings ParseTraining(const YamlNode& node, std::int64_t max_train_steps) {
  node.ExpectMap({"eval_every_steps", "threads", "keep_best_checkpoints", "keep_latest_checkpoints", "test_at_end",
                  "valid_sample_examples", "divergence_factor"});
  TrainingSettings training;
  auto whole = [&](const char* key, std::int64_t min, std::int64_t max, auto& field) {
    const auto value = node.Find(key);
    if (!value) return;
    const std::int64_t number = value->AsInt();
    if (number < min || number > max) throw value->Fail(fmt::format("must be between {} and {}", min, max));
    field = static_cast<std::remove_reference_t<decltype(field)>>(number);
  };
  whole("eval_every_steps", 1, max_train_steps, training.eval_every_steps);
  whole("threads", 1, 1024, training.threads);
  whole("keep_best_checkpoints", 0, 1000, training.keep_best_checkpoints);
  whole("keep_latest_checkpoints", 1, 1000, training.keep_latest_checkpoints);
  whole("valid_sample_examples", 0, INT64_MAX, training.valid_sample_examples);
  if (const auto test = node.Find("test_at_end")) training.test_at_end = test->AsBool();
  if (const auto factor = node.Find("divergence_factor")) {
    training.divergence_factor = factor->AsDouble();
    if (!(training.divergence_factor > 1)) throw factor->Fail("must be a number above 1");
  }
  return training;
}

// Every placeholder of `command:` must name a param of the space or a built-in placeholder.
void CheckCommand(const YamlNode& node, const std::string& command, const SearchSpace& space) {
  if (command.empty()) throw node.Fail("must not be empty");
  std::vector<std::string> names = BuiltinPlaceholders();
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

}  // namespace

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
  if (const auto trials = root.Find("trials")) {
    const std::int64_t count = trials->AsInt();
    if (count < 1 || static_cast<std::uint64_t>(count) > kMaxTrials) {
      throw trials->Fail(fmt::format("must be between 1 and {}", kMaxTrials));
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
  if (const auto sampler = root.Find("sampler")) spec.sampler = ParseSamplerOptions(*sampler);
  if (spec.sampler.name == "halton_algoperf" && spec.seed > UINT32_MAX) {
    throw root.Find("seed")->Fail("must be below 2^32 for halton_algoperf (numpy's seed range)");
  }

  const YamlNode space_node =
      required("space", "the hyperparameters, e.g. space: {learning_rate: {min: 1e-4, max: 1, scale: log}}");
  spec.space = std::make_shared<const SearchSpace>(ParseSearchSpace(space_node));
  RefuseSearchedStepBudget(*spec.space);
  if (command) CheckCommand(*command, spec.command, *spec.space);
  CheckScientificParams(spec, space_node);

  // Samplers with their own trial counts must agree with an explicit `trials:`.
  const StudyPlan plan(spec);
  if (spec.trials_given && (spec.sampler.name == "grid" || spec.sampler.name == "list")) {
    for (const auto& substudy : plan.substudies()) {
      const std::uint64_t count = plan.SubStudyTrialCount(substudy.index);
      if (count != spec.trials) {
        throw root.Find("trials")->Fail(
            fmt::format("is {} but the {} sampler makes {} trials for sub-study {}; "
                        "remove trials: to run them all",
                        spec.trials, spec.sampler.name, count, substudy.label));
      }
    }
  }
  for (const auto& substudy : plan.substudies()) {
    if (plan.SubStudyTrialCount(substudy.index) == 0) {
      throw SpecError(spec.sampler.where, "sampler",
                      fmt::format("makes no trial for sub-study {}; list at least one config for it", substudy.label));
    }
  }
  return spec;
}

StudySpec LoadStudySpec(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read the study spec (no such file, or no permission)", path));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseStudySpec(text.str(), path);
}

StudyPlan::StudyPlan(const StudySpec& spec) : space_(spec.space) {
  const bool joint = spec.scientific_mode == ScientificMode::kJoint;
  std::vector<Assignment> combinations = joint ? std::vector<Assignment>{{}} : ScientificCombinations(*space_);
  for (std::size_t i = 0; i < combinations.size(); ++i) {
    SubStudy substudy{i, combinations[i], ""};
    for (const auto& param : space_->params()) {
      const auto it = substudy.scientific.find(param.id);
      if (it == substudy.scientific.end()) continue;
      if (!substudy.label.empty()) substudy.label += ",";
      substudy.label += param.id + "=" + FormatValue(it->second);
    }
    if (substudy.label.empty()) substudy.label = "all";
    // Sub-studies share the seed: params they have in common get the same quasi-random points, so no scientific
    // value gets luckier nuisance samples than another.
    SamplingTarget target{space_.get(), substudy.scientific, joint, spec.seed, spec.trials};
    samplers_.push_back(MakeSampler(spec.sampler, target));
    total_ += samplers_.back()->TrialCount();
    substudies_.push_back(std::move(substudy));
  }
}

std::pair<std::size_t, std::uint64_t> StudyPlan::SubStudyOf(std::uint64_t number) const {
  // Round-robin over the sub-studies that still have trials: between two distinct trial counts the set of such
  // sub-studies is constant, so walk those stretches instead of single rounds.
  std::vector<std::uint64_t> counts;
  for (const auto& sampler : samplers_) counts.push_back(sampler->TrialCount());
  std::vector<std::uint64_t> levels = counts;
  std::sort(levels.begin(), levels.end());
  levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
  std::uint64_t remaining = number;
  std::uint64_t round = 0;
  for (const std::uint64_t level : levels) {
    std::vector<std::size_t> active;
    for (std::size_t s = 0; s < counts.size(); ++s) {
      if (counts[s] > round) active.push_back(s);
    }
    const std::uint64_t stretch = (level - round) * active.size();
    if (remaining < stretch) return {active[remaining % active.size()], round + remaining / active.size()};
    remaining -= stretch;
    round = level;
  }
  throw Error(fmt::format("trial {} is beyond the study's {} trials", number, total_));
}

bool StudyPlan::IsPlanned(std::uint64_t number) const {
  const auto [substudy, index] = SubStudyOf(number);
  return index < samplers_[substudy]->PlannedTrialCount();
}

bool StudyPlan::IsAdaptive() const {
  return std::any_of(samplers_.begin(), samplers_.end(),
                     [](const auto& sampler) { return sampler->PlannedTrialCount() < sampler->TrialCount(); });
}

PlannedTrial StudyPlan::Trial(std::uint64_t number) const {
  const auto [substudy, index] = SubStudyOf(number);
  return {number, substudy, index, samplers_[substudy]->Suggest(index)};
}

PlannedTrial StudyPlan::TrialFromHistory(std::uint64_t number, std::span<const Observation> history) const {
  const auto [substudy, index] = SubStudyOf(number);
  return {number, substudy, index, samplers_[substudy]->SuggestFromHistory(index, history)};
}

}  // namespace dltune
