// dltune plan: retrain and round 2, written as specs from the parent's records.
#include "dltune/plan/plan.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "core/files.h"
#include "core/schedule.h"
#include "core/strings.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/trial_variance.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"
#include "space/yaml_writer.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"

namespace dltune::plan_internal {

std::vector<Chosen> ChooseBest(const StudyData& parent, std::uint64_t top) {
  std::vector<std::vector<Chosen>> by_substudy;
  const auto trial_of = [&](std::uint64_t number) -> const TrialRecord& {
    return *std::find_if(parent.trials.begin(), parent.trials.end(),
                         [&](const TrialRecord& t) { return t.number == number; });
  };
  if (parent.spec.replicas > 1) {
    const TrialVariance variance = AnalyzeTrialVariance(parent);
    std::map<std::string, std::vector<const ConfigurationReplicas*>> groups;
    for (const auto& c : variance.configurations) {
      if (c.median_trial) groups[c.substudy].push_back(&c);
    }
    for (auto& [label, group] : groups) {
      std::stable_sort(group.begin(), group.end(), [&](const auto* a, const auto* b) {
        return IsBetter(a->stats.mean, b->stats.mean, parent.spec.objective.direction);
      });
      std::vector<Chosen> chosen;
      for (std::size_t i = 0; i < group.size() && i < top; ++i) {
        chosen.push_back(
            {trial_of(*group[i]->median_trial), group[i]->stats.mean, static_cast<int>(i) + 1, group[i]->stats.n});
      }
      by_substudy.push_back(std::move(chosen));
    }
    std::sort(by_substudy.begin(), by_substudy.end(),
              [](const auto& a, const auto& b) { return a.front().trial.substudy < b.front().trial.substudy; });
  } else {
    std::map<std::size_t, std::vector<Chosen>> groups;
    for (const std::uint64_t number : TopTrials(parent, static_cast<int>(std::min<std::uint64_t>(top, 1000000)))) {
      const TrialRecord& trial = trial_of(number);
      auto& group = groups[trial.substudy];
      group.push_back({trial, *BestObjectiveOf(parent, trial), static_cast<int>(group.size()) + 1, 1});
    }
    for (auto& [substudy, group] : groups) by_substudy.push_back(std::move(group));
  }
  std::vector<Chosen> listed;
  for (std::size_t rank = 0;; ++rank) {
    bool any = false;
    for (const auto& group : by_substudy) {
      if (rank < group.size()) {
        listed.push_back(group[rank]);
        any = true;
      }
    }
    if (!any) break;
  }
  return listed;
}

StudyData LoadParent(Store& store, const std::string& name, bool with_measurements) {
  if (name.empty()) throw Error("--from needs the parent study's name (dltune studies lists them)");
  StudyData parent = LoadStudyData(store, name, with_measurements);
  RequireCompletedTrial(parent);
  return parent;
}

void RequireCompletedTrial(const StudyData& parent) {
  const std::string& name = parent.study.name;
  const bool any = std::any_of(parent.trials.begin(), parent.trials.end(), [&](const TrialRecord& t) {
    return t.state == TrialState::kCompleted && BestObjectiveOf(parent, t).has_value();
  });
  if (!any) {
    throw Error(fmt::format("study '{}' has no completed trial with an objective yet; run it first (dltune run {})",
                            name, SpecFileOf(parent.study)));
  }
}

void RequireEverySubStudy(const StudyData& parent, const std::vector<Chosen>& chosen) {
  const StudyPlan plan(parent.spec);
  std::set<std::size_t> covered;
  for (const Chosen& c : chosen) covered.insert(c.trial.substudy);
  for (std::size_t s = 0; s < plan.SubStudyCount(); ++s) {
    if (covered.count(s) == 0) {
      throw Error(
          fmt::format("sub-study {} of study '{}' has no completed trial to train again; run more of its "
                      "trials first (dltune run {} --retry-failed, or raise trials: and --extend)",
                      plan.SubStudyAt(s).label, parent.study.name, SpecFileOf(parent.study)));
    }
  }
}

std::string PlannedName(const std::string& given, const std::string& parent, const std::string& suffix) {
  std::string name = given.empty() ? parent + "-" + suffix : given;
  static const std::regex kNamePattern(R"([A-Za-z0-9][A-Za-z0-9_.\-]{0,127})");
  if (!std::regex_match(name, kNamePattern)) {
    throw Error(
        fmt::format("'{}' cannot name a study (1-128 letters, digits, '_', '.' or '-', starting with a "
                    "letter or digit){}",
                    name, given.empty() ? "; give one with --name" : ""));
  }
  return name;
}

YamlTree ConfigOf(const SearchSpace& space, const Assignment& params) {
  YamlTree config = YamlTree::Map(/*flow=*/true);
  for (const Param& param : space.params()) {
    const auto it = params.find(param.id);
    if (it != params.end() && param.Varies()) config.Set(param.id, YamlTree::Of(it->second));
  }
  return config;
}

std::vector<std::pair<std::string, Value>> ParamsByDisplayName(const SearchSpace& space, const Assignment& params) {
  std::vector<std::pair<std::string, Value>> by_name;
  for (const Param& param : space.params()) {
    const auto it = params.find(param.id);
    if (it == params.end()) continue;
    const bool seen = std::any_of(by_name.begin(), by_name.end(), [&](const auto& e) { return e.first == param.name; });
    if (!seen) by_name.emplace_back(param.name, it->second);
  }
  return by_name;
}

StudyData ParentFromSpecFile(const std::string& path) {
  StudyData parent;
  parent.spec = LoadStudySpec(path);
  parent.study.name = parent.spec.name;
  parent.study.spec_text = parent.spec.text;
  parent.study.spec_path = path;
  return parent;
}

std::string Num(double value) { return fmt::format("{:.6g}", value); }

YamlTree ConstantScheduleSpace(const StudyData& parent, const TrialRecord& trial, bool without_regularization) {
  static const std::set<std::string> kRegularization = {"weight_decay", "dropout", "label_smoothing"};
  YamlTree space = YamlTree::Map();
  for (const auto& [param_name, value] : ParamsByDisplayName(*parent.spec.space, trial.params)) {
    if (param_name == ScheduleParamNames::kDecaySteps || param_name == ScheduleParamNames::kFinalFraction) continue;
    Value fixed = value;
    std::string why;
    if (without_regularization && kRegularization.count(param_name) != 0) {
      fixed = NumericValue(value) ? Value(0.0) : value;
      why = "no regularization";
    } else if (param_name == ScheduleParamNames::kKind) {
      fixed = std::string("constant");
      why = "a constant learning rate";
    } else if (param_name == ScheduleParamNames::kWarmupSteps) {
      fixed = std::int64_t{0};
      why = "a constant learning rate";
    }
    YamlTree entry = YamlTree::Of(fixed);
    entry.comment = why;
    space.Set(param_name, entry);
  }
  return space;
}

Chosen BestOverall(const StudyData& parent) {
  const std::vector<Chosen> best = ChooseBest(parent, 1);
  return *std::min_element(best.begin(), best.end(), [&](const Chosen& a, const Chosen& b) {
    return IsBetter(a.value, b.value, parent.spec.objective.direction);
  });
}

Chosen BestWhereUnstable(const StudyData& parent) {
  for (const Diagnostic& d : Diagnose(parent)) {
    if ((d.id != "instability" && d.id != "infeasible_share") || !d.handled.empty() || d.trials.empty()) continue;
    const auto named = std::find_if(parent.trials.begin(), parent.trials.end(),
                                    [&](const TrialRecord& t) { return t.number == d.trials.back(); });
    if (named == parent.trials.end()) continue;
    for (const Chosen& best : ChooseBest(parent, 1)) {
      if (best.trial.substudy == named->substudy) return best;
    }
  }
  return BestOverall(parent);
}

YamlTree GridSampler() {
  YamlTree sampler = YamlTree::Map();
  sampler.Set("name", YamlTree::Of(std::string("grid")));
  return sampler;
}

YamlTree ParentTraining(const StudyData& parent) {
  YamlTree training = YamlTree::Map();
  if (const auto node = YamlNode::Parse(parent.study.spec_text, parent.study.name).Find("training")) {
    training = YamlTree::From(*node);
  }
  training.flow = false;
  return training;
}

double LearningRateOf(const StudyData& parent, const TrialRecord& trial) {
  for (const auto& [param_name, value] : ParamsByDisplayName(*parent.spec.space, trial.params)) {
    if (param_name != ScheduleParamNames::kLearningRate) continue;
    if (const auto number = NumericValue(value); number && *number > 0) return *number;
  }
  throw Error(fmt::format("trial {} of study '{}' has no positive learning_rate param to scale", trial.number,
                          parent.study.name));
}

std::string WrapComment(const std::string& text) {
  constexpr std::size_t kWidth = 98;
  std::string out, line;
  const auto flush = [&] {
    out += line + "\n";
    line.clear();
  };
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find_first_of(" \n", start), text.size());
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && line.size() + 1 + word.size() > kWidth) flush();
    line += (line.empty() ? "" : " ") + word;
    if (end < text.size() && text[end] == '\n') flush();
    start = end + 1;
  }
  if (!line.empty()) flush();
  if (!out.empty()) out.pop_back();
  return out;
}

std::string Write(const StudyData& parent, const SpecParts& parts) {
  const YamlNode source = YamlNode::Parse(parent.study.spec_text, parent.study.name + ".yaml");
  YamlTree root = YamlTree::Map();
  root.comment = WrapComment(parts.header);
  root.Set("name", YamlTree::Of(parts.name));
  root.Set("description", YamlTree::Of(parts.description));
  root.Set("goal", YamlTree::Of(parts.goal));
  for (const char* key : {"workload", "command", "run_dir"}) {
    if (const auto node = source.Find(key)) root.Set(key, YamlTree::From(*node));
  }
  root.Set("max_train_steps", YamlTree::Of(parts.max_train_steps));
  if (parts.training.kind != YamlTree::Kind::kNull) {
    root.Set("training", parts.training);
  } else if (const auto node = source.Find("training")) {
    root.Set("training", YamlTree::From(*node));
  }
  for (const char* key : {"objective", "scientific_mode"}) {
    if (const auto node = source.Find(key); node && !(parts.joint && std::string(key) == "scientific_mode")) {
      root.Set(key, YamlTree::From(*node));
    }
  }
  // The parent's scientific params, where its space is kept, belong to this study's configurations: one study of
  // them, not a sub-study per value that the configurations leave empty.
  const auto& params = parent.spec.space->params();
  if (parts.joint &&
      std::any_of(params.begin(), params.end(), [](const Param& param) { return param.role == Role::kScientific; })) {
    YamlTree& mode = root.Set("scientific_mode", YamlTree::Of(std::string("joint")));
    mode.comment = "the configurations below carry their scientific values";
  }
  root.Set("seed", YamlTree::Of(static_cast<std::int64_t>(parent.spec.seed)));
  if (parts.replicas > 1) {
    YamlTree& replicas = root.Set("replicas", YamlTree::Of(static_cast<std::int64_t>(parts.replicas)));
    replicas.comment =
        "each configuration is trained this many times; replica r of every configuration has the same seed";
  }
  if (parts.sampler.kind != YamlTree::Kind::kNull) {
    root.Set("sampler", parts.sampler);
  } else {
    YamlTree sampler = YamlTree::Map();
    sampler.Set("name", YamlTree::Of(std::string("list")));
    sampler.Set("configs", parts.configs);
    root.Set("sampler", sampler);
  }
  root.Set("space", parts.space);
  YamlTree& procedure = root.Set("procedure", parts.procedure);
  procedure.comment = "how this study was planned (dltune plan): it runs as any study; its report reads the parent";
  return ToYamlText(root);
}

YamlTree DerivedSpec(const StudyData& origin, const std::string& name, const std::string& header,
                     const std::string& kind, const std::string& parent, YamlTree options) {
  YamlTree spec = YamlTree::From(YamlNode::Parse(origin.study.spec_text, origin.study.name + ".yaml"));
  spec.comment = WrapComment(header);
  spec.Set("name", YamlTree::Of(name));
  YamlTree procedure = YamlTree::Map();
  procedure.Set("kind", YamlTree::Of(kind));
  procedure.Set("parent", YamlTree::Of(parent));
  options.flow = true;
  procedure.Set("options", options);
  YamlTree& block = spec.Set("procedure", procedure);
  block.comment = "how this study was planned (dltune plan): it runs as any study";
  return spec;
}

YamlTree ProcedureBlock(const std::string& kind, const StudyData& parent, YamlTree options,
                        const std::vector<Chosen>& chosen) {
  YamlTree procedure = YamlTree::Map();
  procedure.Set("kind", YamlTree::Of(kind));
  procedure.Set("parent", YamlTree::Of(parent.study.name));
  options.flow = true;
  procedure.Set("options", options);
  YamlTree from = YamlTree::Sequence();
  from.comment = "config i of the list is this trial of the parent; its replica 0 trains with the trial's seed";
  for (const Chosen& c : chosen) {
    YamlTree entry = YamlTree::Map(/*flow=*/true);
    entry.Set("trial", YamlTree::Of(static_cast<std::int64_t>(c.trial.number)));
    entry.Set("seed", YamlTree::Of(static_cast<std::int64_t>(c.trial.seed)));
    from.Append(entry);
  }
  if (!chosen.empty()) procedure.Set("from_trials", from);
  return procedure;
}

std::string ChosenComment(const StudyData& parent, const Chosen& c) {
  const std::string where = c.trial.substudy_label == "all" ? "" : " of " + c.trial.substudy_label;
  const std::string value =
      c.replicas > 1 ? fmt::format("mean {} over {} replicas", Num(c.value), c.replicas) : Num(c.value);
  return fmt::format("trial {} of {}: #{}{}, {} {}", c.trial.number, parent.study.name, c.rank, where,
                     parent.spec.objective.Name(), value);
}

PlannedStudy Finish(const std::string& name, std::string text) {
  const StudySpec spec = ParseStudySpec(text, name + ".yaml");
  const StudyPlan plan(spec);
  return {
      .name = name, .text = std::move(text), .configurations = plan.ConfigurationCount(), .trials = plan.TrialCount()};
}

}  // namespace dltune::plan_internal

namespace dltune {

using namespace plan_internal;

PlannedStudy PlanRetrain(Store& store, const RetrainRequest& request) {
  if (request.replicas < 2) {
    throw Error(
        fmt::format("--replicas must be 2 or more to measure the run-to-run variance, not {}", request.replicas));
  }
  if (request.replicas > 1000) throw Error(fmt::format("--replicas must be at most 1000, not {}", request.replicas));
  if (request.top < 1) throw Error("--top must be 1 or more");
  const StudyData parent = LoadParent(store, request.parent);
  const std::string name = PlannedName(request.name, parent.study.name, "retrain");
  const std::vector<Chosen> chosen = ChooseBest(parent, request.top);
  RequireEverySubStudy(parent, chosen);

  SpecParts parts;
  parts.name = name;
  const std::string which = request.top == 1 ? "the best configuration of each sub-study"
                                             : fmt::format("the best {} configurations of each sub-study", request.top);
  parts.header = fmt::format(
      "Planned by: dltune plan retrain --from {} --top {} --replicas {}{}\n"
      "Trains {} of study {} {} times, each time from another seed, to measure the run-to-run (trial) variance "
      "before adopting a change (the playbook's \"Determining whether to adopt a training pipeline change or "
      "hyperparameter configuration\"). Replica 0 of each reuses its parent trial's seed and reproduces it.",
      parent.study.name, request.top, request.replicas, request.name.empty() ? "" : " --name " + request.name, which,
      parent.study.name, request.replicas);
  parts.description = fmt::format("{} of {}, trained {} times each", which, parent.study.name, request.replicas);
  parts.description[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(parts.description[0])));
  parts.goal = "Is the difference between these configurations larger than the run-to-run variance of one?";
  parts.max_train_steps = parent.spec.max_train_steps;
  parts.replicas = request.replicas;
  for (const Chosen& c : chosen) {
    YamlTree config = ConfigOf(*parent.spec.space, c.trial.params);
    config.comment = ChosenComment(parent, c);
    parts.configs.Append(config);
  }
  parts.space = YamlTree::From(*YamlNode::Parse(parent.study.spec_text, name).Find("space"));
  YamlTree options = YamlTree::Map();
  options.Set("top", YamlTree::Of(static_cast<std::int64_t>(request.top)));
  options.Set("replicas", YamlTree::Of(static_cast<std::int64_t>(request.replicas)));
  parts.procedure = ProcedureBlock("retrain", parent, options, chosen);
  return Finish(name, Write(parent, parts));
}

std::int64_t Round2Steps(const std::string& steps, std::int64_t round1_steps) {
  static const std::regex kFactor(R"(([0-9]+(\.[0-9]+)?)x)");
  static const std::regex kCount(R"([0-9]+)");
  std::smatch match;
  std::int64_t result = 0;
  if (std::regex_match(steps, match, kFactor)) {
    const double factor = std::stod(match[1].str());
    const double total = std::round(factor * static_cast<double>(round1_steps));
    if (!(factor > 1.0) || total > 1e12) {
      throw Error(fmt::format("--steps {}: a round-2 factor must be above 1 (4x: four times round 1's {} steps)", steps,
                              round1_steps));
    }
    result = static_cast<std::int64_t>(total);
  } else if (std::regex_match(steps, kCount) && steps.size() <= 12) {
    result = std::stoll(steps);
  } else {
    throw Error(fmt::format("--steps must be a factor such as 4x or a number of steps, not '{}'", steps));
  }
  if (result <= round1_steps) {
    throw Error(
        fmt::format("--steps {} gives {} steps; round 2 trains longer than round 1's {}", steps, result, round1_steps));
  }
  return result;
}

PlannedStudy PlanRound2(Store& store, const Round2Request& request) {
  if (request.top < 1) throw Error("--top must be 1 or more");
  const StudyData parent = LoadParent(store, request.parent);
  const std::string name = PlannedName(request.name, parent.study.name, "round2");
  const std::int64_t round1 = parent.spec.max_train_steps;
  const std::int64_t round2 = Round2Steps(request.steps, round1);
  const std::vector<Chosen> chosen = ChooseBest(parent, request.top);
  RequireEverySubStudy(parent, chosen);
  const SearchSpace& space = *parent.spec.space;

  // Each configuration's schedule extended by the playbook's rule; only decay_steps can change (linear keeps its
  // decay's length, an explicit cosine decay grows with the run), and warmup stays the same number of steps.
  std::vector<std::int64_t> decay_steps;
  bool decay_changes = false;
  for (const Chosen& c : chosen) {
    std::map<std::string, Value> by_name;
    for (const auto& [id, value] : c.trial.params) {
      const Param* param = space.Find(id);
      by_name[param ? param->name : id] = value;
    }
    const ScheduleOptions before = ReadSchedule(HyperParams(parent.spec.workload.args, by_name), round1);
    ScheduleOptions after;
    try {
      after = ExtendForRound2(before, round2);
    } catch (const Error& e) {
      throw Error(fmt::format("trial {} of study '{}': {}", c.trial.number, parent.study.name, e.what()));
    }
    decay_steps.push_back(after.decay_steps);
    decay_changes = decay_changes || after.decay_steps != before.decay_steps;
  }

  YamlTree space_tree = YamlTree::From(*YamlNode::Parse(parent.study.spec_text, name).Find("space"));
  std::string decay_id;
  if (decay_changes) {
    // decay_steps becomes a param of the space, the list of the values the configurations need (or fixed at one).
    for (const Param& param : space.params()) {
      if (param.name == ScheduleParamNames::kDecaySteps) decay_id = param.id;
    }
    if (decay_id.empty()) decay_id = ScheduleParamNames::kDecaySteps;
    std::vector<std::int64_t> distinct = decay_steps;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    YamlTree definition = YamlTree::Map(/*flow=*/true);
    if (decay_id != ScheduleParamNames::kDecaySteps) {
      definition.Set("name", YamlTree::Of(std::string(ScheduleParamNames::kDecaySteps)));
    }
    if (distinct.size() == 1) {
      definition.Set("value", YamlTree::Of(distinct.front()));
    } else {
      YamlTree values = YamlTree::Sequence(/*flow=*/true);
      for (const std::int64_t d : distinct) values.Append(YamlTree::Of(d));
      definition.Set("values", values);
    }
    definition.comment = "round 2: each schedule's decay as the playbook's round-2 rule extends it";
    space_tree.Set(decay_id, definition);
  }

  SpecParts parts;
  parts.name = name;
  parts.header = fmt::format(
      "Planned by: dltune plan round2 --from {} --top {} --steps {}{}\n"
      "Round 2 of study {}: its best configurations trained for {} steps instead of {}, with the playbook's "
      "round-2 schedule (\"Deciding how long to train when training is compute-bound\", Round 2): the extra steps "
      "extend the time at a high learning rate; warmup keeps its length in steps.",
      parent.study.name, request.top, request.steps, request.name.empty() ? "" : " --name " + request.name,
      parent.study.name, round2, round1);
  parts.description = fmt::format("Round 2 of {}: its best {} configuration{} of each sub-study at {} steps",
                                  parent.study.name, request.top, request.top == 1 ? "" : "s", round2);
  parts.goal = "Do round 1's best configurations stay best when trained longer?";
  parts.max_train_steps = round2;
  // Step intervals set in round 1 grow with the run, so round 2 evaluates as often per run.
  if (const auto node = YamlNode::Parse(parent.study.spec_text, name).Find("training")) {
    parts.training = YamlTree::From(*node);
    const double ratio = static_cast<double>(round2) / static_cast<double>(round1);
    for (const char* key : {"eval_every_steps", "log_every_steps"}) {
      if (YamlTree* entry = parts.training.Find(key); entry && entry->kind == YamlTree::Kind::kScalar) {
        if (const auto* steps = std::get_if<std::int64_t>(&entry->scalar)) {
          entry->scalar = std::min<std::int64_t>(round2, std::llround(static_cast<double>(*steps) * ratio));
        }
      }
    }
  }
  for (std::size_t i = 0; i < chosen.size(); ++i) {
    YamlTree config = ConfigOf(space, chosen[i].trial.params);
    if (decay_changes) config.Set(decay_id, YamlTree::Of(decay_steps[i]));
    config.comment = ChosenComment(parent, chosen[i]);
    parts.configs.Append(config);
  }
  parts.space = space_tree;
  YamlTree options = YamlTree::Map();
  options.Set("top", YamlTree::Of(static_cast<std::int64_t>(request.top)));
  options.Set("steps", YamlTree::Of(request.steps));
  parts.procedure = ProcedureBlock("round2", parent, options, chosen);
  return Finish(name, Write(parent, parts));
}

bool WritePlannedSpec(const PlannedStudy& planned, const std::filesystem::path& path, bool replace) {
  std::error_code error;
  if (std::filesystem::exists(path, error)) {
    // A file that cannot be read differs from the planned spec.
    if (ReadFileIfReadable(path) == planned.text) return false;
    if (!replace) {
      throw Error(
          fmt::format("{} exists and differs from the planned spec (edited since it was planned, or another "
                      "plan); pass --force to replace it, or -o to write elsewhere",
                      path.string()));
    }
  }
  WriteFileAtomically(path, planned.text);
  return true;
}

}  // namespace dltune
