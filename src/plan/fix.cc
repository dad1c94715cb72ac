// dltune plan fix: a study's nuisance hyperparameters that the trials cannot tell from no effect fixed at the best
// trial's value, for the next round.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dltune/analyze/diagnostics.h"
#include "dltune/plan/plan.h"
#include "planned_spec.h"

namespace dltune {

using namespace plan_internal;

PlannedStudy PlanFix(Store& store, const ExpandRequest& request) {
  const StudyData parent = LoadParent(store, request.parent);
  std::vector<Diagnostic> unimportant;
  for (Diagnostic& d : Diagnose(parent)) {
    if (d.id == "unimportant" && d.handled.empty()) unimportant.push_back(std::move(d));
  }
  if (unimportant.empty()) {
    throw Error(fmt::format(
        "study {} has no hyperparameter to fix: none of its unimportant findings (dltune doctor {}) is open; dltune "
        "show {} --importance shows each one's importance and noise floor",
        parent.study.name, parent.study.name, parent.study.name));
  }
  const std::string name = PlannedName(request.name, parent.study.name, "fixed");
  YamlTree spec = DerivedSpec(parent, name, "", "fix", parent.study.name, YamlTree::Map());
  YamlTree* space = spec.Find("space");
  YamlTree options = YamlTree::Map(/*flow=*/true);
  std::vector<std::string> changes;
  for (const Diagnostic& d : unimportant) {
    YamlTree* entry = space == nullptr ? nullptr : space->Find(d.param_id);
    const auto trial = d.trials.empty() ? std::nullopt : std::optional<std::uint64_t>(d.trials.front());
    const TrialRecord* best = nullptr;
    for (const TrialRecord& t : parent.trials) {
      if (trial && t.number == *trial) best = &t;
    }
    const Value* value = nullptr;
    if (best != nullptr) {
      const auto found = best->params.find(d.param_id);
      if (found != best->params.end()) value = &found->second;
    }
    if (entry == nullptr || entry->kind != YamlTree::Kind::kMap || value == nullptr) {
      throw Error(
          fmt::format("study {}'s spec has no param {} under space: to fix at trial {}'s value (edit the "
                      "spec instead)",
                      parent.study.name, d.param_id, trial.value_or(0)));
    }
    for (const char* key : {"min", "max", "scale", "type", "values", "role"}) entry->Erase(key);
    YamlTree& set = entry->Set("value", YamlTree::Of(*value));
    set.comment = fmt::format("fixed at trial {}'s value: {}", best->number, d.title);
    options.Set(d.param_id, YamlTree::Of(*value));
    changes.push_back(fmt::format("{} = {} (trial {})", d.param_id, FormatValue(*value), best->number));
  }
  spec.comment = WrapComment(fmt::format(
      "Planned by: dltune plan fix --from {}{}\n"
      "Study {} with the nuisance hyperparameters whose importance its trials could not tell from no effect "
      "(PED-ANOVA against its noise floor: dltune show {} --importance) fixed at its best trial's values, for the "
      "next round (the playbook's \"Identifying scientific, nuisance, and fixed hyperparameters\"): {}.",
      parent.study.name, request.name.empty() ? "" : " --name " + request.name, parent.study.name, parent.study.name,
      fmt::join(changes, "; ")));
  spec.Find("procedure")->Set("options", options);
  return Finish(name, ToYamlText(spec));
}

}  // namespace dltune
