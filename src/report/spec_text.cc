// A study spec and its planned trials as text: the account `dltune space check` gives, and the trials `dltune space
// sample` lists.
#include "report/spec_text.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyze/search_budget.h"
#include "core/strings.h"
#include "dltune/search/sampler.h"
#include "report/text_table.h"

namespace dltune {
namespace {

// Short form for tables: reals with 4 significant digits, everything else as is.
std::string ShortValue(const Value& value) {
  if (const auto* real = std::get_if<double>(&value)) return fmt::format("{:.4g}", *real);
  return FormatValue(value);
}

std::string TrialCountText(const StudyPlan& plan) {
  std::string trials = plan.Replicas() == 1
                           ? fmt::format("{} trials", plan.TrialCount())
                           : fmt::format("{} configurations × {} replicas = {} trials", plan.ConfigurationCount(),
                                         plan.Replicas(), plan.TrialCount());
  if (plan.SubStudyCount() == 1) return trials;
  return fmt::format("{} sub-studies, {} in all", plan.SubStudyCount(), trials);
}

}  // namespace

std::string SpecCheckText(const StudySpec& spec, const StudyPlan& plan, const std::string& data_check) {
  std::string out = fmt::format("study {}", spec.name);
  if (!spec.description.empty()) out += ": " + spec.description;
  out += "\n";
  if (!spec.goal.empty()) out += "goal: " + spec.goal + "\n";
  out += "\n";
  TextTable summary({"", ""});
  summary.AddRow({"trials run by", !spec.command.empty()         ? "command: " + spec.command
                                   : !spec.workload.name.empty() ? "workload " + spec.workload.name
                                                                 : "a program using the ask/tell API"});
  summary.AddRow({"objective", spec.objective.Describe()});
  summary.AddRow({"max_train_steps", fmt::format("{} (the same for every trial)", spec.max_train_steps)});
  summary.AddRow({"sampler", fmt::format("{}, seed {}", spec.sampler.name, spec.seed)});
  summary.AddRow({"scientific_mode", ScientificModeName(spec.scientific_mode)});
  summary.AddRow({"trials", TrialCountText(plan)});
  if (!spec.procedure.empty()) {
    summary.AddRow(
        {"planned from", fmt::format("study {} (dltune plan {})", spec.procedure.parent, spec.procedure.kind)});
  }
  const std::string rendered = summary.Render(2);
  out += rendered.substr(rendered.find('\n') + 1);  // no header line

  out += "\nparams\n";
  TextTable params({"id", "name", "role", "kind", "scale", "domain", "exists when"});
  for (const auto& param : spec.space->params()) {
    const bool range = param.kind == ParamKind::kFloat || param.kind == ParamKind::kInt;
    params.AddRow({param.id, param.name, RoleName(param.role), KindName(param.kind),
                   range ? ScaleName(param.scale) : "", param.DomainText(),
                   param.IsConditional() ? param.ConditionText() : "always"});
  }
  out += params.Render(2);

  out += "\nsub-studies\n";
  TextTable substudies({"sub-study", plan.Replicas() == 1 ? "trials" : "configurations", "params searched"});
  const auto dims = SampledDimensions(*spec.space, spec.scientific_mode == ScientificMode::kJoint);
  constexpr std::size_t kShownSubStudies = 100;
  for (std::size_t s = 0; s < plan.SubStudyCount() && s < kShownSubStudies; ++s) {
    const SubStudy substudy = plan.SubStudyAt(s);
    std::string searched;
    for (const std::size_t d : dims) {
      const Param& param = spec.space->params()[d];
      // Searched unless a condition on a scientific param rules it out in this sub-study.
      const bool possible = std::all_of(param.when.begin(), param.when.end(), [&](const Condition& condition) {
        const auto it = substudy.scientific.find(condition.param_id);
        return it == substudy.scientific.end() || std::any_of(condition.values.begin(), condition.values.end(),
                                                              [&](const Value& v) { return SameValue(v, it->second); });
      });
      if (possible) searched += (searched.empty() ? "" : ", ") + param.id;
    }
    substudies.AddRow({substudy.label, fmt::format("{}", plan.SubStudyTrialCount(substudy.index)),
                       searched.empty() ? "(none)" : searched});
  }
  out += substudies.Render(2);
  if (plan.SubStudyCount() > kShownSubStudies) {
    out += fmt::format("  ... and {} more sub-studies (dltune space sample --format csv lists every trial)\n",
                       plan.SubStudyCount() - kShownSubStudies);
  }
  out += fmt::format("\n{}: the spec is valid\n", spec.file);
  out += data_check;
  for (const Diagnostic& d : CheckAdamBudget(spec)) {
    out += fmt::format("warning: {}\n  {}\n  Suggestion: {}\n", d.title, d.detail, d.suggestion);
  }
  return TerminalSafe(out);
}

std::vector<std::vector<PlannedTrial>> PlannedTrialsToShow(const StudyPlan& plan, std::uint64_t limit) {
  std::vector<std::vector<PlannedTrial>> groups(plan.SubStudyCount());
  for (std::uint64_t number = 0; number < plan.TrialCount(); ++number) {
    // Trials are interleaved, so their index in the sub-study never decreases with the number (within a replica).
    if (limit != 0 && plan.SubStudyOf(number).second >= limit) {
      if (plan.Replicas() == 1) break;
      continue;
    }
    if (!plan.IsPlanned(number)) continue;
    PlannedTrial trial = plan.Trial(number);
    if (limit != 0 && trial.index >= limit) continue;
    groups[trial.substudy].push_back(std::move(trial));
  }
  return groups;
}

std::string PlannedTrialsTable(const StudySpec& spec, const StudyPlan& plan,
                               const std::vector<std::vector<PlannedTrial>>& groups) {
  std::string out;
  for (std::size_t s = 0; s < groups.size(); ++s) {
    const SubStudy substudy = plan.SubStudyAt(s);
    out += fmt::format("{}sub-study {} ({} of {} trials)\n", s ? "\n" : "", substudy.label, groups[s].size(),
                       plan.SubStudyTrialCount(s) * plan.Replicas());
    if (groups[s].empty()) continue;  // an adaptive sampler's: none is known before the study runs
    // Columns: params that vary in some shown trial; named as the workload sees them unless two share a name.
    std::vector<const Param*> columns;
    for (const auto& param : spec.space->params()) {
      if (!param.Varies() || substudy.scientific.count(param.id) != 0) continue;
      const bool shown = std::any_of(groups[s].begin(), groups[s].end(),
                                     [&](const PlannedTrial& t) { return t.params.count(param.id) != 0; });
      if (shown) columns.push_back(&param);
    }
    std::map<std::string, int> name_uses;
    for (const Param* param : columns) ++name_uses[param->name];
    std::vector<std::string> header = {"trial"};
    if (plan.Replicas() > 1) header.insert(header.end(), {"config", "replica", "seed"});
    for (const Param* param : columns) header.push_back(name_uses[param->name] > 1 ? param->id : param->name);
    TextTable table(header);
    for (const auto& trial : groups[s]) {
      std::vector<std::string> row = {fmt::format("{}", trial.number)};
      if (plan.Replicas() > 1) {
        row.insert(row.end(),
                   {std::to_string(trial.configuration), std::to_string(trial.replica), std::to_string(trial.seed)});
      }
      for (const Param* param : columns) {
        const auto it = trial.params.find(param->id);
        row.push_back(it == trial.params.end() ? "-" : ShortValue(it->second));
      }
      table.AddRow(std::move(row));
    }
    out += table.Render(2);
  }
  std::string fixed;
  for (const auto& param : spec.space->params()) {
    if (!param.Varies()) fixed += (fixed.empty() ? "" : ", ") + param.name + "=" + FormatValue(param.values.front());
  }
  if (!fixed.empty()) out += "\nfixed: " + fixed + "\n";
  if (plan.IsAdaptive()) {
    out += fmt::format("\nThe {} sampler chooses the other trials from the results so far, as the study runs.\n",
                       spec.sampler.name);
  }
  return TerminalSafe(out);
}

std::string PlannedTrialsJson(const StudySpec& spec, const StudyPlan& plan,
                              const std::vector<std::vector<PlannedTrial>>& groups) {
  nlohmann::json root = {{"study", spec.name}, {"sampler", spec.sampler.name}, {"seed", spec.seed}};
  root["substudies"] = nlohmann::json::array();
  for (std::size_t s = 0; s < groups.size(); ++s) {
    const SubStudy planned = plan.SubStudyAt(s);
    nlohmann::json substudy = {{"label", planned.label}, {"trial_count", plan.SubStudyTrialCount(s)}};
    substudy["scientific"] = nlohmann::json::object();
    for (const auto& [id, value] : planned.scientific) substudy["scientific"][id] = ValueToJson(value);
    substudy["trials"] = nlohmann::json::array();
    for (const auto& trial : groups[s]) {
      nlohmann::json params = nlohmann::json::object();
      for (const auto& [id, value] : trial.params) params[id] = ValueToJson(value);
      substudy["trials"].push_back({{"number", trial.number},
                                    {"index", trial.index},
                                    {"configuration", trial.configuration},
                                    {"replica", trial.replica},
                                    {"seed", trial.seed},
                                    {"params", params}});
    }
    root["substudies"].push_back(std::move(substudy));
  }
  return root.dump(2) + "\n";
}

std::string PlannedTrialsCsv(const StudySpec& spec, const StudyPlan& plan,
                             const std::vector<std::vector<PlannedTrial>>& groups) {
  std::string out = "trial,substudy,index,configuration,replica,seed";
  for (const auto& param : spec.space->params()) out += "," + CsvField(param.id);
  out += "\n";
  for (const auto& group : groups) {
    for (const auto& trial : group) {
      out += fmt::format("{},{},{},{},{},{}", trial.number, CsvField(plan.SubStudyAt(trial.substudy).label),
                         trial.index, trial.configuration, trial.replica, trial.seed);
      for (const auto& param : spec.space->params()) {
        const auto it = trial.params.find(param.id);
        out += ',';
        if (it != trial.params.end()) out += CsvField(FormatValue(it->second));
      }
      out += "\n";
    }
  }
  return out;
}

}  // namespace dltune
