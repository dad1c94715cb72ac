// The checklist's "unimportant" finding: nuisance hyperparameters whose importance the trials cannot tell from none,
// candidates to fix in the next round (the playbook's "Identifying scientific, nuisance, and fixed hyperparameters").
#include <fmt/format.h>

#include <map>
#include <optional>

#include "diagnostic_checks.h"
#include "dltune/analyze/importance.h"

namespace dltune::diagnostic_checks {

namespace {

constexpr const char* kRolesSection = "Identifying scientific, nuisance, and fixed hyperparameters";

}  // namespace

void CheckUnimportant(const Context& context, std::vector<Diagnostic>& out) {
  const StudyData& data = context.data;
  // A list of chosen configurations (retrain, round 2) or a measurement searches nothing: no nuisance to fix.
  if (!data.spec.procedure.empty() && (data.spec.procedure.ComparesWithParent() || data.spec.procedure.Measures())) {
    return;
  }
  std::optional<HyperparameterImportance> computed;
  const HyperparameterImportance& importance =
      context.importance != nullptr ? *context.importance : computed.emplace(AnalyzeImportance(data));
  // Per param, the sub-studies with enough top trials to judge it, and whether each found it indistinguishable.
  struct Verdict {
    std::vector<const SubStudyImportance*> judged;
    std::vector<const ParamImportance*> entries;
    bool indistinguishable = true;
  };
  std::map<std::string, Verdict> verdicts;
  const SubStudyImportance* best = nullptr;  // the judged sub-study with the best trial
  double best_objective = 0;
  for (const SubStudyImportance& sub : importance.substudies) {
    if (sub.top_trials < kMinTopTrialsToFix) continue;
    for (const auto& group : context.ranked) {
      if (group.empty() || group.front().trial->substudy != sub.index) continue;
      if (best == nullptr || IsBetter(group.front().objective, best_objective, context.objective.direction)) {
        best = &sub;
        best_objective = group.front().objective;
      }
    }
    for (const ParamImportance& p : sub.params) {
      Verdict& v = verdicts[p.param_id];
      v.judged.push_back(&sub);
      v.entries.push_back(&p);
      v.indistinguishable = v.indistinguishable && p.indistinguishable;
    }
  }
  if (best == nullptr) return;
  const std::string command = fmt::format("dltune plan fix --from {}", data.study.name);
  for (const Param* param : data.spec.space->WithRole(Role::kNuisance)) {
    const auto found = verdicts.find(param->id);
    if (found == verdicts.end() || !found->second.indistinguishable) continue;
    const Verdict& v = found->second;
    const ParamImportance* at_best = nullptr;
    for (const ParamImportance& p : best->params) {
      if (p.param_id == param->id) at_best = &p;
    }
    if (at_best == nullptr || !at_best->best_value) continue;  // absent in the best trial (conditional): no value
    std::vector<std::string> evidence;
    for (std::size_t i = 0; i < v.judged.size(); ++i) {
      const ParamImportance& p = *v.entries[i];
      evidence.push_back(
          fmt::format("{}importance {} against a noise floor of {}: {} above it (interval {} to {}), over {} "
                      "trials",
                      context.single_substudy ? "" : v.judged[i]->substudy + ": ", analysis_util::Num(p.importance),
                      analysis_util::Num(p.noise_floor), analysis_util::Num(p.above_noise),
                      analysis_util::Num(p.above_noise_low), analysis_util::Num(p.above_noise_high), p.trials));
    }
    std::string detail = fmt::format(
        "PED-ANOVA (Watanabe et al., IJCAI 2023) measures how much {} decides whether a trial reaches the top {:g}% "
        "of {}; a hyperparameter of no effect gets the noise floor from the same trials. ",
        param->id, importance.settings.target_quantile * 100, context.objective.Name());
    for (std::size_t i = 0; i < evidence.size(); ++i) detail += (i == 0 ? "" : "; ") + evidence[i];
    detail += fmt::format(
        ". The {:g}-{:g}% bootstrap interval of the importance above the floor holds 0: the trials cannot tell its "
        "effect from none.",
        importance.settings.interval_low * 100, importance.settings.interval_high * 100);
    out.push_back(Diagnostic{
        .id = "unimportant",
        .severity = Severity::kInfo,
        .title = fmt::format("{} is indistinguishable from no effect: a candidate to fix in the next round", param->id),
        .detail = detail,
        .suggestion = fmt::format(
            "Fix {} at the best trial's value, {} (trial {}), to spend the next round's trials on the hyperparameters "
            "that matter; {} writes that spec for every hyperparameter this finding names. Conclusions then hold "
            "for that value only (the playbook's caveat of fixed hyperparameters).",
            param->id, FormatValue(*at_best->best_value), best->best_trial.value_or(0), command),
        .section = kRolesSection,
        .substudy = "",
        .param_id = param->id,
        .trials = {best->best_trial.value_or(0)}});
  }
}

}  // namespace dltune::diagnostic_checks
