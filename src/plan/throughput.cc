// dltune plan throughput: the playbook's batch-size sweep, one batch size at a time with the machine to itself.
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <regex>
#include <thread>

#include <fmt/format.h>

#include "dltune/plan/plan.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"
#include "store/recorded_spec.h"

namespace dltune {

using namespace plan_internal;

std::vector<std::int64_t> PowersOfTwoBetween(const std::string& text) {
  static const std::regex kRange(R"(([0-9]+):([0-9]+))");
  std::smatch match;
  if (!std::regex_match(text, match, kRange) || match[1].length() > 9 || match[2].length() > 9) {
    throw Error(fmt::format("--batch-sizes must be LOW:HIGH, such as 16:4096, not '{}'", text));
  }
  const std::int64_t low = std::stoll(match[1].str());
  const std::int64_t high = std::stoll(match[2].str());
  if (low < 1 || low > high) throw Error(fmt::format("--batch-sizes {}: needs 1 <= LOW <= HIGH", text));
  std::vector<std::int64_t> sizes;
  std::int64_t size = 1;
  while (size < low) size *= 2;
  for (; size <= high; size *= 2) sizes.push_back(size);
  if (sizes.size() < 2) throw Error(fmt::format("--batch-sizes {} holds fewer than two powers of two", text));
  return sizes;
}

namespace {

// The throughput sweeps already planned from `parent` (a spec file or a study), other than one named `name`: the
// measurements of the project's throughput before this one.
std::int64_t EarlierSweeps(Store* store, const std::string& parent, const std::string& name) {
  if (store == nullptr) return 0;
  std::int64_t sweeps = 0;
  for (const StudyRecord& study : store->ListStudies()) {
    if (study.parent != parent || study.name == name) continue;
    try {
      if (RecordedSpec(study).procedure.kind == "throughput") ++sweeps;
    } catch (const Error&) {  // a spec this version cannot read is not a sweep it counts
    }
  }
  return sweeps;
}

}  // namespace

PlannedStudy PlanThroughput(Store* store, const ThroughputRequest& request) {
  const std::vector<std::int64_t> sizes = PowersOfTwoBetween(request.batch_sizes);
  if (request.steps < 10) throw Error("--steps must be at least 10, to measure past the first steps");
  if (request.repeats < 1 || request.repeats > 100) throw Error("--repeats must be between 1 and 100");
  // The parent: a study's best trial, or a spec file's first planned trial.
  std::error_code error;
  const bool from_file = std::filesystem::is_regular_file(request.parent, error);
  if (!from_file && store == nullptr) throw Error(fmt::format("--from {}: no such spec file", request.parent));
  const StudyData parent = from_file ? ParentFromSpecFile(request.parent) : LoadParent(*store, request.parent);
  Assignment params;
  std::string source;
  if (from_file) {
    params = StudyPlan(parent.spec).Trial(0).params;
    source = fmt::format("the first trial of {}", request.parent);
    // A speed measurement must not diverge: the space's lowest learning rate, not a quasi-random one.
    for (const Param& param : parent.spec.space->params()) {
      if (param.name != "learning_rate" || !param.Varies()) continue;
      double lowest = param.min;
      if (param.kind == ParamKind::kDiscrete || param.kind == ParamKind::kCategorical) {
        lowest = std::numeric_limits<double>::infinity();
        for (const Value& value : param.values) {
          if (const auto number = NumericValue(value)) lowest = std::min(lowest, *number);
        }
      }
      if (!std::isfinite(lowest)) continue;
      params[param.id] = param.kind == ParamKind::kInt ? Value(static_cast<std::int64_t>(lowest)) : Value(lowest);
      source += fmt::format(", at the space's lowest learning rate ({}): a speed measurement must not diverge",
                            FormatValue(params[param.id]));
    }
  } else {
    const Chosen chosen = BestOverall(parent);
    params = chosen.trial.params;
    source = fmt::format("the best trial of study {} (trial {})", parent.study.name, chosen.trial.number);
  }
  const std::string name = PlannedName(request.name, parent.study.name, "throughput");
  const std::int64_t attempt = 1 + EarlierSweeps(store, from_file ? request.parent : parent.study.name, name);
  std::optional<std::int64_t> from_batch_size;
  for (const auto& [param_name, value] : ParamsByDisplayName(*parent.spec.space, params)) {
    const auto* size = std::get_if<std::int64_t>(&value);
    if (param_name == "batch_size" && size != nullptr && *size > 0) from_batch_size = *size;
  }

  YamlTree space = YamlTree::Map();
  YamlTree values = YamlTree::Sequence(/*flow=*/true);
  for (const std::int64_t size : sizes) values.Append(YamlTree::Of(size));
  YamlTree batch = YamlTree::Map(/*flow=*/true);
  batch.Set("values", values);
  batch.comment = "smallest first; the sweep stops at the first that runs out of memory";
  space.Set("batch_size", batch);
  for (const auto& [param_name, value] : ParamsByDisplayName(*parent.spec.space, params)) {
    if (param_name != "batch_size") space.Set(param_name, YamlTree::Of(value));
  }

  SpecParts parts;
  parts.name = name;
  parts.header = fmt::format(
      "Planned by: dltune plan throughput --from {} --batch-sizes {} --steps {} --repeats {}{}\n"
      "The playbook's \"Determining the feasible batch sizes and estimating training throughput\": {} trained "
      "{} steps at each batch size, one at a time with every core of the machine, smallest first, stopping at the "
      "first that runs out of memory; {} round{} over the batch sizes (replicas), so that each is measured {} and a "
      "machine whose speed changes shows it. Every step's time is recorded (log_every_steps: 1). Changing the batch "
      "size means re-tuning most hyperparameters (\"Changing the batch size requires re-tuning most "
      "hyperparameters\").",
      request.parent, request.batch_sizes, request.steps, request.repeats,
      request.name.empty() ? "" : " --name " + request.name, source, request.steps, request.repeats,
      request.repeats == 1 ? "" : "s", request.repeats == 1 ? "once" : fmt::format("{} times", request.repeats));
  parts.description =
      fmt::format("Throughput of {} at batch sizes {} to {}", parent.study.name, sizes.front(), sizes.back());
  parts.goal = "How fast does training go at each batch size, and where does a larger batch stop paying?";
  parts.max_train_steps = request.steps;
  parts.replicas = request.repeats;
  YamlTree training = ParentTraining(parent);
  const unsigned cores = std::max(1U, std::thread::hardware_concurrency());
  YamlTree& threads = training.Set("threads", YamlTree::Of(static_cast<std::int64_t>(cores)));
  threads.comment = "every core of the machine this was planned on: one trial at a time, the machine to itself";
  training.Set("log_every_steps", YamlTree::Of(std::int64_t{1}));
  training.Set("eval_every_steps", YamlTree::Of(request.steps));
  training.Set("train_eval_examples", YamlTree::Of(std::int64_t{1000}));
  training.Erase("valid_sample_examples");
  training.Erase("timeout");
  parts.training = training;
  parts.joint = true;
  parts.sampler = GridSampler();
  parts.space = space;
  YamlTree options = YamlTree::Map();
  options.Set("batch_sizes", YamlTree::Of(request.batch_sizes));
  options.Set("steps", YamlTree::Of(request.steps));
  options.Set("repeats", YamlTree::Of(static_cast<std::int64_t>(request.repeats)));
  options.Set("attempt", YamlTree::Of(attempt));
  if (from_batch_size) options.Set("from_batch_size", YamlTree::Of(*from_batch_size));
  YamlTree procedure = YamlTree::Map();
  procedure.Set("kind", YamlTree::Of(std::string("throughput")));
  procedure.Set("parent", YamlTree::Of(from_file ? request.parent : parent.study.name));
  options.flow = true;
  procedure.Set("options", options);
  parts.procedure = procedure;
  return Finish(name, Write(parent, parts));
}

}  // namespace dltune
