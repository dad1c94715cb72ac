// dltune plan apply-steps: the step budget a fit-steps sweep found, applied to the spec the project started from.
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "core/strings.h"
#include "dltune/analyze/step_budget.h"
#include "dltune/plan/plan.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"
#include "store/tracking.h"

namespace dltune {

using namespace plan_internal;

namespace {

// The spec a lineage started from: up the procedure parents of `study` to the first spec file or study that was not
// planned by a procedure.
StudyData LineageOrigin(Store& store, const StudyData& study) {
  std::string from = study.spec.procedure.parent;
  StudyRecord child = study.study;
  std::set<std::int64_t> seen = {child.id};
  for (;;) {
    std::error_code error;
    if (std::filesystem::is_regular_file(from, error)) return ParentFromSpecFile(from);
    const auto parent = FindParentStudy(store, child);
    if (!parent) {
      throw Error(
          fmt::format("study {}'s lineage leads to {}, which is neither a spec file here nor a study in the "
                      "store: the spec to apply the step budget to is not found",
                      study.study.name, from));
    }
    if (!seen.insert(parent->id).second) {
      throw Error(fmt::format("study {}'s lineage does not end: its procedure parents form a cycle", study.study.name));
    }
    StudyData ancestor = LoadStudyData(store, parent->name, /*with_measurements=*/false);
    if (ancestor.spec.procedure.kind.empty()) return ancestor;
    from = ancestor.spec.procedure.parent;
    child = ancestor.study;
  }
}

}  // namespace

PlannedStudy PlanApplySteps(Store& store, const ApplyStepsRequest& request) {
  const StudyData sweep = LoadParent(store, request.parent, /*with_measurements=*/true);
  if (sweep.spec.procedure.kind != "fit-steps") {
    throw Error(
        fmt::format("--from {}: apply-steps takes a fit-steps study (dltune plan fit-steps), not {}", request.parent,
                    sweep.spec.procedure.kind.empty() ? "a search" : "a " + sweep.spec.procedure.kind + " study"));
  }
  if (request.steps < 0) throw Error("--steps must be positive");
  std::int64_t steps = request.steps;
  if (steps == 0) {
    const StepBudget budget = AnalyzeStepBudget(sweep);
    if (!budget.candidate_steps) {
      throw Error(
          fmt::format("study {} found no candidate max_train_steps: no learning rate reached {} (dltune doctor "
                      "{}); pass --steps, or sweep longer",
                      sweep.study.name, budget.condition.Text(), sweep.study.name));
    }
    steps = *budget.candidate_steps;
  }
  const StudyData origin = LineageOrigin(store, sweep);
  const std::string name = PlannedName(request.name, NameBefore(sweep.study.name, "-fit-steps"), "tuning");

  // The origin's spec as written, with the budget and the sweep's batch size.
  YamlTree options = YamlTree::Map();
  options.Set("steps", YamlTree::Of(steps));
  YamlTree spec = DerivedSpec(
      origin, name,
      fmt::format("Planned by: dltune plan apply-steps --from {}{}{}\n"
                  "The spec {} with max_train_steps {}: the steps the fastest learning rate of study {} took to fit "
                  "the training set (the playbook's \"Algorithm for picking an initial candidate for max_train_steps "
                  "using a learning rate sweep\"), ready to tune.",
                  sweep.study.name, request.steps > 0 ? fmt::format(" --steps {}", request.steps) : "",
                  request.name.empty() ? "" : " --name " + request.name,
                  origin.study.spec_path.empty() ? "of study " + origin.study.name : origin.study.spec_path, steps,
                  sweep.study.name),
      "apply-steps", sweep.study.name, options);
  YamlTree& budget = spec.Set("max_train_steps", YamlTree::Of(steps));
  budget.comment = fmt::format("the candidate of study {}", sweep.study.name);
  std::optional<Value> batch_size;
  if (!sweep.trials.empty()) {
    for (const auto& [param_name, value] : ParamsByDisplayName(*sweep.spec.space, sweep.trials.front().params)) {
      if (param_name == "batch_size") batch_size = value;
    }
  }
  // The playbook fixes the batch size before tuning: "the batch size should not be treated as a tunable
  // hyperparameter for validation set performance".
  if (YamlTree* space = spec.Find("space"); space && batch_size) {
    YamlTree& batch = space->Set("batch_size", YamlTree::Of(*batch_size));
    batch.comment = fmt::format("the batch size study {} swept at", sweep.study.name);
  }
  return Finish(name, ToYamlText(spec));
}

}  // namespace dltune
