// dltune plan instability, warmup and apply-warmup: the playbook's "Identifying unstable workloads" and "How to apply
// learning rate warmup", one study each.
#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/eval_schedule.h"
#include "core/schedule.h"
#include "dltune/analyze/instability.h"
#include "dltune/plan/plan.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"

namespace dltune {

using namespace plan_internal;

namespace {

// The playbook's post_warmup_steps = 2 × warmup_steps.
constexpr double kPostWarmupFactor = 2.0;

// The dense evaluations and per-step training metrics the stability classifier reads, on smaller evaluation sets
// (a probe evaluates often).
YamlTree DenseTraining(const StudyData& source, const std::string& eval_schedule) {
  YamlTree training = ParentTraining(source);
  training.Erase("eval_every_steps");
  YamlTree& schedule = training.Set("eval_schedule", YamlTree::Of(eval_schedule));
  schedule.comment = "evaluations dense early: early instability shows in the first steps";
  YamlTree& log = training.Set("log_every_steps", YamlTree::Of(std::int64_t{1}));
  log.comment = "every step's loss and gradient norm: the stability classifier reads them";
  training.Set("train_eval_examples", YamlTree::Of(std::int64_t{2000}));
  YamlTree& sample = training.Set("valid_sample_examples", YamlTree::Of(std::int64_t{2000}));
  sample.comment = "evaluations during training on a sample of validation, the full split at the end";
  return training;
}

// One list config per value of `param`, all from the same parent trial (so all with its seed).
void ListOver(SpecParts& parts, const std::string& param, const std::vector<YamlTree>& values,
              const std::vector<std::string>& comments) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    YamlTree config = YamlTree::Map(/*flow=*/true);
    config.Set(param, values[i]);
    config.comment = comments[i];
    parts.configs.Append(config);
  }
}

const TrialRecord& TrialNumbered(const StudyData& data, std::uint64_t number) {
  const auto it =
      std::find_if(data.trials.begin(), data.trials.end(), [&](const TrialRecord& t) { return t.number == number; });
  if (it == data.trials.end()) {
    throw Error(fmt::format("study '{}' has no trial {}", data.study.name, number));
  }
  return *it;
}

}  // namespace

StabilityContext plan_internal::StabilityContextOf(Store& store, const StudyData& study) {
  StabilityContext context;
  const auto& options = study.spec.procedure.options;
  const auto probe_of = [&](const StudyData& probe) {
    context.unstable_learning_rate = AnalyzeInstabilityProbe(probe).unstable_learning_rate;
    context.probe_steps = probe.spec.max_train_steps;
  };
  const std::string& kind = study.spec.procedure.kind;
  if (kind == "instability") {
    context.baseline = LoadParent(store, study.spec.procedure.parent, /*with_measurements=*/true);
    probe_of(study);
  } else if (kind == "warmup" || kind == "clipping") {
    context.baseline =
        LoadParent(store, options.value("baseline", study.spec.procedure.parent), /*with_measurements=*/true);
    context.unstable_learning_rate = options.value(kind == "warmup" ? "unstable_learning_rate" : "learning_rate", 0.0);
    context.probe_steps = kind == "clipping" ? study.spec.max_train_steps : 0;
    if (const auto parent = kind == "warmup" ? FindParentStudy(store, study.study) : std::nullopt) {
      const StudyData probe = LoadStudyData(store, parent->name, /*with_measurements=*/false);
      if (probe.spec.procedure.kind == "instability") context.probe_steps = probe.spec.max_train_steps;
    }
  } else {
    context.baseline = LoadParent(store, study.study.name, /*with_measurements=*/true);
    for (const StudyRecord& other : store.ListStudies()) {  // the newest probe planned from it
      if (!IsParentOf(study.study, other)) continue;
      if (RecordedSpec(other).procedure.kind == "instability") {
        probe_of(LoadStudyData(store, other.name));
      }
    }
  }
  return context;
}

std::vector<std::int64_t> DefaultWarmupSteps(std::int64_t max_train_steps) {
  const std::int64_t tenth = std::max<std::int64_t>(1, max_train_steps / 10);
  std::vector<std::int64_t> steps;
  for (std::int64_t w = 10; w < tenth; w *= 10) steps.push_back(w);
  steps.push_back(tenth);
  return steps;
}

PlannedStudy PlanInstability(Store& store, const InstabilityRequest& request) {
  std::vector<double> multipliers = request.multipliers;
  std::sort(multipliers.begin(), multipliers.end());
  multipliers.erase(std::unique(multipliers.begin(), multipliers.end()), multipliers.end());
  if (multipliers.empty() || !(multipliers.front() > 0) || !std::isfinite(multipliers.back())) {
    throw Error("--multipliers must be positive numbers, such as 2,5,10 (times the best learning rate)");
  }
  const EvalSchedule schedule = EvalSchedule::Parse(request.eval_schedule);
  const StudyData parent = LoadParent(store, request.parent);
  const std::string name = PlannedName(request.name, parent.study.name, "instability");
  const std::int64_t steps =
      request.steps > 0 ? request.steps : std::min<std::int64_t>(500, parent.spec.max_train_steps);
  if (steps < 10) throw Error(fmt::format("--steps must be at least 10, not {}", steps));
  const Chosen best = BestWhereUnstable(parent);
  const double rate = LearningRateOf(parent, best.trial);

  SpecParts parts;
  parts.name = name;
  std::string listed;
  for (const double m : multipliers) listed += (listed.empty() ? "" : ",") + Num(m);
  parts.header = fmt::format(
      "Planned by: dltune plan instability --from {} --multipliers {} --steps {}{}\n"
      "The playbook's \"Identifying unstable workloads\": the best configuration of study {} (trial {}, learning "
      "rate {}) at {} times its learning rate, constant, for an abbreviated run of {} steps evaluated {} and with "
      "every step's loss and gradient norm kept. Each run is classified as stable, early instability, sudden "
      "mid-training instability, recovered or diverged; the smallest learning rate that is not stable is the "
      "unstable_base_learning_rate the warmup study starts from.",
      parent.study.name, listed, steps, request.name.empty() ? "" : " --name " + request.name, parent.study.name,
      best.trial.number, Num(rate), listed, steps, schedule.Text());
  parts.description =
      fmt::format("Instability probe of {}'s best configuration at {}x its learning rate", parent.study.name, listed);
  parts.goal = "At which learning rate does training become unstable, and how?";
  parts.max_train_steps = steps;
  parts.training = DenseTraining(parent, schedule.Text());
  parts.joint = true;
  parts.space = ConstantScheduleSpace(parent, best.trial, /*without_regularization=*/false);
  YamlTree rates = YamlTree::Sequence(/*flow=*/true);
  std::vector<YamlTree> values;
  std::vector<std::string> comments;
  for (const double m : multipliers) {
    values.push_back(YamlTree::Of(m * rate));
    rates.Append(values.back());
    comments.push_back(fmt::format("{}x", Num(m)));
  }
  YamlTree lr_param = YamlTree::Map(/*flow=*/true);
  lr_param.Set("values", rates);
  lr_param.comment = fmt::format("{}x the best learning rate {}", listed, Num(rate));
  parts.space.Set(ScheduleParamNames::kLearningRate, lr_param);
  ListOver(parts, ScheduleParamNames::kLearningRate, values, comments);
  YamlTree options = YamlTree::Map();
  options.Set("learning_rate", YamlTree::Of(rate));
  YamlTree listed_multipliers = YamlTree::Sequence(/*flow=*/true);
  for (const double m : multipliers) listed_multipliers.Append(YamlTree::Of(m));
  options.Set("multipliers", listed_multipliers);
  options.Set("steps", YamlTree::Of(steps));
  options.Set("eval_schedule", YamlTree::Of(schedule.Text()));
  parts.procedure = ProcedureBlock("instability", parent, options, std::vector<Chosen>(multipliers.size(), best));
  return Finish(name, Write(parent, parts));
}

PlannedStudy PlanWarmup(Store& store, const WarmupRequest& request) {
  if (!(request.factor > 1) || !std::isfinite(request.factor)) {
    throw Error(fmt::format("--factor must be above 1 (the playbook's default is 10), not {}", request.factor));
  }
  if (request.unstable_learning_rate < 0 || !std::isfinite(request.unstable_learning_rate)) {
    throw Error("--unstable-lr must be a positive learning rate");
  }
  if (request.parent.empty()) throw Error("--from needs the parent study's name (dltune studies lists them)");
  // A probe whose every run diverged has no completed trial and is still a parent: only a baseline needs one.
  const StudyData parent = LoadStudyData(store, request.parent, /*with_measurements=*/true);
  if (parent.spec.procedure.kind != "instability") RequireCompletedTrial(parent);
  const std::string name = PlannedName(request.name, parent.study.name, "warmup");
  // The baseline, its configuration and the unstable learning rate: from the probe, or the study and --unstable-lr.
  double unstable = request.unstable_learning_rate;
  StudyData baseline;
  Chosen from;  // the parent trial whose seed every warmup trial trains with
  TrialRecord configuration;
  if (parent.spec.procedure.kind == "instability") {
    const InstabilityProbe probe = AnalyzeInstabilityProbe(parent);
    if (unstable == 0) {
      if (!probe.finished) {
        throw Error(fmt::format("instability probe '{}' has trials still to run: finish it (dltune run) first",
                                parent.study.name));
      }
      if (!probe.unstable_learning_rate) {
        throw Error(
            fmt::format("instability probe '{}' trained stably at every learning rate it tried: instability "
                        "is not what limits the learning rate, so warmup is not needed (or pass "
                        "--unstable-lr to plan one anyway)",
                        parent.study.name));
      }
      unstable = *probe.unstable_learning_rate;
    }
    baseline = LoadParent(store, parent.spec.procedure.parent);
    configuration = TrialNumbered(baseline, parent.spec.procedure.from_trials.at(0).trial);
    const auto row = std::find_if(probe.rows.begin(), probe.rows.end(),
                                  [&](const ProbeRow& r) { return r.learning_rate == unstable; });
    from = {TrialNumbered(parent, row != probe.rows.end() ? row->trial : probe.rows.front().trial), 0, 1, 1};
  } else {
    if (unstable == 0) {
      throw Error(
          fmt::format("study '{}' is not an instability probe: plan one first (dltune plan instability --from "
                      "{}), or pass --unstable-lr with the learning rate at which it becomes unstable",
                      parent.study.name, parent.study.name));
    }
    baseline = parent;
    from = BestWhereUnstable(parent);
    configuration = from.trial;
  }
  std::vector<std::int64_t> warmups = request.warmup_steps;
  if (warmups.empty()) warmups = DefaultWarmupSteps(baseline.spec.max_train_steps);
  std::sort(warmups.begin(), warmups.end());
  warmups.erase(std::unique(warmups.begin(), warmups.end()), warmups.end());
  if (warmups.front() < 1) throw Error("--warmup-steps must be 1 or more each");
  // The playbook: warmup of at most a tenth of max_train_steps ("How to apply learning rate warmup").
  if (const std::int64_t cap = std::max<std::int64_t>(1, baseline.spec.max_train_steps / 10); warmups.back() > cap) {
    throw Error(fmt::format(
        "--warmup-steps {} is longer than a tenth of the baseline's max_train_steps ({} of {}): the playbook warms "
        "up over at most 10% of training; past it the schedule, not the stability, changes. If no warmup up to {} "
        "trains stably, tune below the unstable learning rate, or clip gradients",
        warmups.back(), cap, baseline.spec.max_train_steps, cap));
  }
  const double rate = request.factor * unstable;
  const auto budget = static_cast<std::int64_t>(static_cast<double>(warmups.back()) * (1 + kPostWarmupFactor));

  SpecParts parts;
  parts.name = name;
  std::string listed;
  for (const std::int64_t w : warmups) listed += (listed.empty() ? "" : ",") + std::to_string(w);
  parts.header = fmt::format(
      "Planned by: dltune plan warmup --from {}{}{}{}\n"
      "The playbook's \"How to apply learning rate warmup\": the best configuration of study {} (trial {}) at a base "
      "learning rate of {} ({} times the unstable learning rate {}), warming up from 0 over {} steps, then training "
      "twice the warmup's length at the base rate (post_warmup_steps = 2 x warmup_steps: each trial's own budget, "
      "warmup_steps x 3). The shortest warmup that trains stably is the one to prepend to the baseline (dltune plan "
      "apply-warmup).",
      parent.study.name, request.unstable_learning_rate > 0 ? " --unstable-lr " + Num(unstable) : "",
      request.factor != 10 ? " --factor " + Num(request.factor) : "",
      request.name.empty() ? "" : " --name " + request.name, baseline.study.name, configuration.number, Num(rate),
      Num(request.factor), Num(unstable), listed);
  parts.description = fmt::format("Warmup study of {}: warmup_steps {} at {}x the unstable learning rate",
                                  baseline.study.name, listed, Num(request.factor));
  parts.goal = fmt::format("What is the shortest warmup that trains stably at a learning rate of {}?", Num(rate));
  parts.max_train_steps = budget;
  parts.training = DenseTraining(baseline, "log:30");
  parts.joint = true;
  parts.space = ConstantScheduleSpace(baseline, configuration, /*without_regularization=*/false);
  YamlTree& lr = parts.space.Set(ScheduleParamNames::kLearningRate, YamlTree::Of(rate));
  lr.comment = fmt::format("{}x the unstable learning rate {}", Num(request.factor), Num(unstable));
  YamlTree steps = YamlTree::Sequence(/*flow=*/true);
  std::vector<YamlTree> values;
  std::vector<std::string> comments;
  for (const std::int64_t w : warmups) {
    values.push_back(YamlTree::Of(w));
    steps.Append(values.back());
    comments.push_back(
        fmt::format("{} steps in all", static_cast<std::int64_t>(static_cast<double>(w) * (1 + kPostWarmupFactor))));
  }
  YamlTree warmup_param = YamlTree::Map(/*flow=*/true);
  warmup_param.Set("values", steps);
  warmup_param.comment = "orders of magnitude up to a tenth of the baseline's max_train_steps";
  parts.space.Set(ScheduleParamNames::kWarmupSteps, warmup_param);
  if (parts.space.Find(ScheduleParamNames::kKind) == nullptr) {
    YamlTree& kind = parts.space.Set(ScheduleParamNames::kKind, YamlTree::Of(std::string("constant")));
    kind.comment = "ramp from 0 over warmup_steps, then constant";
  }
  ListOver(parts, ScheduleParamNames::kWarmupSteps, values, comments);
  YamlTree options = YamlTree::Map();
  options.Set("baseline", YamlTree::Of(baseline.study.name));
  options.Set("baseline_trial", YamlTree::Of(static_cast<std::int64_t>(configuration.number)));
  options.Set("baseline_steps", YamlTree::Of(baseline.spec.max_train_steps));
  options.Set("unstable_learning_rate", YamlTree::Of(unstable));
  if (request.unstable_learning_rate > 0) options.Set("unstable_given", YamlTree::Of(true));
  options.Set("factor", YamlTree::Of(request.factor));
  options.Set("learning_rate", YamlTree::Of(rate));
  options.Set("post_warmup_factor", YamlTree::Of(kPostWarmupFactor));
  parts.procedure = ProcedureBlock("warmup", parent, options, std::vector<Chosen>(warmups.size(), from));
  return Finish(name, Write(parent, parts));
}

PlannedStudy PlanApplyWarmup(Store& store, const ApplyWarmupRequest& request) {
  if (request.replicas < 1 || request.replicas > 1000) throw Error("--replicas must be between 1 and 1000");
  if (request.parent.empty()) throw Error("--from needs the warmup study's name (dltune studies lists them)");
  // Not LoadParent: a warmup study whose every run diverged has no completed trial, and still says so.
  const StudyData warmup = LoadStudyData(store, request.parent, /*with_measurements=*/true);
  if (warmup.spec.procedure.kind != "warmup") {
    throw Error(
        fmt::format("study '{}' is not a warmup study (dltune plan warmup): apply-warmup reads the warmup "
                    "length from one",
                    warmup.study.name));
  }
  const WarmupStudy study = AnalyzeWarmup(warmup);
  std::int64_t length = request.warmup_steps;
  if (length == 0) {
    if (!study.finished) {
      throw Error(
          fmt::format("warmup study '{}' has trials still to run: finish it (dltune run) first", warmup.study.name));
    }
    if (!study.shortest_stable) {
      throw Error(
          fmt::format("no warmup of study '{}' trained stably at {}: try longer warmups (dltune plan warmup "
                      "--warmup-steps), a smaller --factor, or gradient clipping; or pass --warmup-steps",
                      warmup.study.name, Num(study.learning_rate)));
    }
    length = *study.shortest_stable;
  }
  if (length < 1) throw Error("--warmup-steps must be 1 or more");
  // A warmup given by hand is said to be so, with what the study found (never "found stable" when it was not).
  const bool chosen_by_hand = request.warmup_steps > 0;
  const std::string found = !study.finished         ? fmt::format(" (study {} has not finished)", warmup.study.name)
                            : study.shortest_stable ? fmt::format(" (study {} found {} the shortest stable)",
                                                                  warmup.study.name, *study.shortest_stable)
                                                    : fmt::format(" (study {} found none stable)", warmup.study.name);
  const std::string baseline_name = warmup.spec.procedure.options.value("baseline", std::string());
  const StudyData baseline = LoadParent(store, baseline_name);
  const auto trial_number = warmup.spec.procedure.options.value("baseline_trial", std::int64_t{-1});
  const TrialRecord& trial = TrialNumbered(baseline, static_cast<std::uint64_t>(trial_number));
  const std::string name = PlannedName(request.name, baseline.study.name, fmt::format("warmup{}", length));

  // The baseline's schedule with the warmup in front: its own warmup W0 replaced, the rest the same length.
  std::map<std::string, Value> by_name;
  for (const auto& [param_name, value] : ParamsByDisplayName(*baseline.spec.space, trial.params)) {
    by_name[param_name] = value;
  }
  const ScheduleOptions before =
      ReadSchedule(HyperParams(baseline.spec.workload.args, by_name), baseline.spec.max_train_steps);
  if (before.kind == "inverse_sqrt") {
    throw Error(
        fmt::format("trial {} of '{}' uses inverse_sqrt, whose decay is tied to its warmup: prepending a "
                    "warmup would change the decay; set warmup_steps in its space by hand",
                    trial.number, baseline.study.name));
  }
  const std::int64_t steps = baseline.spec.max_train_steps - before.warmup_steps + length;

  SpecParts parts;
  parts.name = name;
  parts.header = fmt::format(
      "Planned by: dltune plan apply-warmup --from {}{}{}\n"
      "{} prepended to the baseline, as the playbook's \"How to apply learning rate "
      "warmup\" says: the best configuration of study {} (trial {}) with warmup_steps {}{}, and max_train_steps {} "
      "instead of {}, so that after the warmup its schedule runs as before. Compare it with the baseline's trial "
      "(retrospective optimal checkpoint selection: each trial's best evaluation).{}",
      warmup.study.name, request.warmup_steps > 0 ? fmt::format(" --warmup-steps {}", length) : "",
      request.replicas > 1 ? fmt::format(" --replicas {}", request.replicas) : "",
      chosen_by_hand ? fmt::format("A warmup of {} steps, given by --warmup-steps{},", length, found)
                     : fmt::format("The shortest warmup study {} found stable", warmup.study.name),
      baseline.study.name, trial.number, length,
      before.warmup_steps > 0 ? fmt::format(" (instead of {})", before.warmup_steps) : "", steps,
      baseline.spec.max_train_steps,
      length * 20 > baseline.spec.max_train_steps
          ? " The warmup is more than 5% of max_train_steps: the playbook says max_train_steps may need to grow "
            "further to account for it."
          : "");
  parts.description =
      fmt::format("{}'s best configuration with {} steps of warmup prepended", baseline.study.name, length);
  parts.goal = "Does the warmup keep (or improve) the baseline's result, so that higher learning rates become usable?";
  parts.max_train_steps = steps;
  parts.replicas = request.replicas;
  parts.joint = true;  // one configuration: no sub-studies to keep apart
  parts.training = ParentTraining(baseline);
  parts.space = YamlTree::From(*YamlNode::Parse(baseline.study.spec_text, name).Find("space"));
  // warmup_steps fixed in the space, under the id the baseline uses for it.
  std::string warmup_id = ScheduleParamNames::kWarmupSteps;
  for (const Param& param : baseline.spec.space->params()) {
    if (param.name == ScheduleParamNames::kWarmupSteps) warmup_id = param.id;
  }
  YamlTree warmup_param = YamlTree::Map(/*flow=*/true);
  if (warmup_id != ScheduleParamNames::kWarmupSteps) {
    warmup_param.Set("name", YamlTree::Of(std::string(ScheduleParamNames::kWarmupSteps)));
  }
  warmup_param.Set("value", YamlTree::Of(length));
  warmup_param.comment = chosen_by_hand ? std::string("--warmup-steps") + found
                                        : fmt::format("the shortest warmup study {} found stable", warmup.study.name);
  parts.space.Set(warmup_id, warmup_param);
  YamlTree config = ConfigOf(*baseline.spec.space, trial.params);
  config.Erase(warmup_id);
  config.comment = fmt::format("trial {} of {}", trial.number, baseline.study.name);
  parts.configs.Append(config);
  YamlTree options = YamlTree::Map();
  options.Set("warmup_study", YamlTree::Of(warmup.study.name));
  options.Set("warmup_steps", YamlTree::Of(length));
  options.Set("baseline_steps", YamlTree::Of(baseline.spec.max_train_steps));
  options.Set("baseline_warmup_steps", YamlTree::Of(before.warmup_steps));
  options.Set("replicas", YamlTree::Of(static_cast<std::int64_t>(request.replicas)));
  const Chosen chosen{trial, BestObjectiveOf(baseline, trial).value_or(0), 1, 1};
  parts.procedure = ProcedureBlock("apply-warmup", baseline, options, {chosen});
  return Finish(name, Write(baseline, parts));
}

PlannedStudy PlanClipping(Store& store, const ClippingRequest& request) {
  if (request.unstable_learning_rate < 0 || !std::isfinite(request.unstable_learning_rate)) {
    throw Error("--unstable-lr must be a positive learning rate");
  }
  if (request.parent.empty()) throw Error("--from needs the baseline's name (dltune studies lists them)");
  const StudyData from = LoadStudyData(store, request.parent, /*with_measurements=*/false);
  const StabilityContext context = StabilityContextOf(store, from);
  const StudyData& baseline = context.baseline;
  const double unstable =
      request.unstable_learning_rate > 0 ? request.unstable_learning_rate : context.unstable_learning_rate.value_or(0);
  if (unstable <= 0) {
    throw Error(
        fmt::format("no unstable learning rate is known for study {}: probe it first (dltune plan instability "
                    "--from {}), or pass --unstable-lr",
                    baseline.study.name, baseline.study.name));
  }
  const Chosen best = BestWhereUnstable(baseline);
  std::vector<double> norms;
  for (const TrainMeasurement& m : baseline.train.count(best.trial.number) ? baseline.train.at(best.trial.number)
                                                                           : std::vector<TrainMeasurement>{}) {
    if (m.grad_norm && std::isfinite(*m.grad_norm)) norms.push_back(*m.grad_norm);
  }
  if (norms.size() < 10) {
    throw Error(
        fmt::format("trial {} of study {} recorded {} gradient norms, fewer than the 10 a percentile needs "
                    "(training.log_every_steps records them); pass --thresholds",
                    best.trial.number, baseline.study.name, norms.size()));
  }
  std::sort(norms.begin(), norms.end());
  const double p90 = std::stod(fmt::format("{:.3g}", norms[norms.size() * 9 / 10]));
  std::vector<double> thresholds = request.thresholds;
  if (thresholds.empty()) {
    for (const double factor : {0.5, 1.0, 2.0}) thresholds.push_back(std::stod(fmt::format("{:.3g}", factor * p90)));
  }
  std::sort(thresholds.begin(), thresholds.end());
  thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
  if (!(thresholds.front() > 0)) throw Error("--thresholds must be positive gradient norms");
  thresholds.insert(thresholds.begin(), 0.0);  // the reference: no clipping
  const std::int64_t steps =
      request.steps > 0 ? request.steps
                        : (context.probe_steps > 0 ? context.probe_steps
                                                   : std::min<std::int64_t>(500, baseline.spec.max_train_steps));
  const std::string name = PlannedName(request.name, baseline.study.name, "clipping");

  SpecParts parts;
  parts.name = name;
  std::string listed;
  for (std::size_t i = 1; i < thresholds.size(); ++i) listed += (listed.empty() ? "" : ",") + Num(thresholds[i]);
  parts.header = fmt::format(
      "Planned by: dltune plan clipping --from {}{}{}\n"
      "The playbook's \"Gradient clipping\" for an instability: the best configuration of study {} (trial {}) at the "
      "unstable learning rate {}, constant, for {} steps evaluated densely, without clipping and with grad_clip_norm "
      "{} (around {}, the 90th percentile of that trial's gradient norms). The gentlest threshold that trains stably "
      "while clipping at most half the steps is what dltune plan apply-clipping adds to the baseline.",
      request.parent, request.unstable_learning_rate > 0 ? " --unstable-lr " + Num(unstable) : "",
      request.name.empty() ? "" : " --name " + request.name, baseline.study.name, best.trial.number, Num(unstable),
      steps, listed, Num(p90));
  parts.description = fmt::format("Clipping study of {}: grad_clip_norm {} at the unstable learning rate {}",
                                  baseline.study.name, listed, Num(unstable));
  parts.goal =
      fmt::format("Does clipping the gradients make training at {} stable, and at which threshold?", Num(unstable));
  parts.max_train_steps = steps;
  parts.training = DenseTraining(baseline, "log:60");
  parts.joint = true;
  parts.space = ConstantScheduleSpace(baseline, best.trial, /*without_regularization=*/false);
  YamlTree& lr = parts.space.Set(ScheduleParamNames::kLearningRate, YamlTree::Of(unstable));
  lr.comment = "the unstable learning rate";
  YamlTree values_list = YamlTree::Sequence(/*flow=*/true);
  std::vector<YamlTree> values;
  std::vector<std::string> comments;
  for (const double threshold : thresholds) {
    values.push_back(YamlTree::Of(threshold));
    values_list.Append(values.back());
    comments.push_back(threshold > 0 ? fmt::format("{}x the 90th percentile", Num(threshold / p90))
                                     : std::string("no clipping: the reference"));
  }
  YamlTree clip = YamlTree::Map(/*flow=*/true);
  clip.Set("values", values_list);
  clip.comment = "0 clips nothing";
  parts.space.Set("grad_clip_norm", clip);
  ListOver(parts, "grad_clip_norm", values, comments);
  YamlTree options = YamlTree::Map();
  options.Set("baseline", YamlTree::Of(baseline.study.name));
  options.Set("learning_rate", YamlTree::Of(unstable));
  options.Set("percentile_90", YamlTree::Of(p90));
  parts.procedure = ProcedureBlock("clipping", baseline, options, std::vector<Chosen>(thresholds.size(), best));
  return Finish(name, Write(baseline, parts));
}

}  // namespace dltune
