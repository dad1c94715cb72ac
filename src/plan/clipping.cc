// dltune plan apply-clipping and narrow-lr: what a stability lineage found, applied to the baseline's spec.
#include <cmath>

#include <fmt/format.h>

#include "core/schedule.h"
#include "dltune/analyze/instability.h"
#include "dltune/plan/plan.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"

namespace dltune {

using namespace plan_internal;

PlannedStudy PlanApplyClipping(Store& store, const DerivedRequest& request) {
  if (request.parent.empty()) throw Error("--from needs the clipping study's name (dltune studies lists them)");
  const StudyData clipping = LoadStudyData(store, request.parent, /*with_measurements=*/true);
  if (clipping.spec.procedure.kind != "clipping") {
    throw Error(
        fmt::format("study '{}' is not a clipping study (dltune plan clipping): apply-clipping reads the "
                    "threshold from one",
                    clipping.study.name));
  }
  const ClippingStudy study = AnalyzeClipping(clipping);
  if (!study.finished) {
    throw Error(
        fmt::format("clipping study '{}' has trials still to run: finish it (dltune run) first", clipping.study.name));
  }
  if (!study.recommended) {
    throw Error(
        fmt::format("no threshold of clipping study '{}' trains stably without clipping most steps: "
                    "dltune plan narrow-lr --from {} tunes below the unstable learning rate instead",
                    clipping.study.name, clipping.study.name));
  }
  const StudyData baseline = LoadParent(store, study.baseline, /*with_measurements=*/false);
  const std::string name = PlannedName(request.name, baseline.study.name, "clipped");
  YamlTree options = YamlTree::Map();
  options.Set("grad_clip_norm", YamlTree::Of(*study.recommended));
  YamlTree spec = DerivedSpec(
      baseline, name,
      fmt::format("Planned by: dltune plan apply-clipping --from {}{}\n"
                  "Study {} as it was tuned, with its gradients clipped at {}: the gentlest threshold of clipping "
                  "study {} that trained stably at the unstable learning rate {} (the playbook's \"Gradient "
                  "clipping\").",
                  clipping.study.name, request.name.empty() ? "" : " --name " + request.name, baseline.study.name,
                  Num(*study.recommended), clipping.study.name, Num(study.learning_rate)),
      "apply-clipping", clipping.study.name, options);
  YamlTree* space = spec.Find("space");
  if (space == nullptr) throw Error(fmt::format("study {}'s spec has no space:", baseline.study.name));
  YamlTree& clip = space->Set("grad_clip_norm", YamlTree::Of(*study.recommended));
  clip.comment = fmt::format("clipping study {}", clipping.study.name);
  return Finish(name, ToYamlText(spec));
}

PlannedStudy PlanNarrowLearningRate(Store& store, const DerivedRequest& request) {
  if (request.parent.empty()) throw Error("--from needs a clipping, warmup or probe study's name");
  const StudyData from = LoadStudyData(store, request.parent, /*with_measurements=*/false);
  const StabilityContext context = StabilityContextOf(store, from);
  if (!context.unstable_learning_rate || *context.unstable_learning_rate <= 0) {
    throw Error(
        fmt::format("no unstable learning rate is known from study '{}': narrow-lr takes an instability "
                    "probe, or a warmup or clipping study planned from one",
                    from.study.name));
  }
  const StudyData& baseline = context.baseline;
  const double unstable = *context.unstable_learning_rate;
  const double top = std::stod(fmt::format("{:.3g}", unstable / 2));
  const Param* rate = nullptr;
  for (const Param& param : baseline.spec.space->params()) {
    if (param.name == ScheduleParamNames::kLearningRate && param.Varies() && !param.IsChoice()) rate = &param;
  }
  YamlTree options = YamlTree::Map();
  options.Set("unstable_learning_rate", YamlTree::Of(unstable));
  options.Set("max", YamlTree::Of(top));
  const std::string name = PlannedName(request.name, baseline.study.name, "narrow-lr");
  YamlTree spec = DerivedSpec(
      baseline, name,
      fmt::format("Planned by: dltune plan narrow-lr --from {}{}\n"
                  "Study {} as it was tuned, its learning rate kept below the unstable {} (at most half of it): an "
                  "instability that neither warmup nor gradient clipping cured (the playbook's \"Identifying "
                  "unstable workloads\").",
                  from.study.name, request.name.empty() ? "" : " --name " + request.name, baseline.study.name,
                  Num(unstable)),
      "narrow-lr", from.study.name, options);
  YamlTree* space = spec.Find("space");
  YamlTree* entry = space == nullptr || rate == nullptr ? nullptr : space->Find(rate->id);
  if (entry == nullptr || entry->kind != YamlTree::Kind::kMap) {
    throw Error(
        fmt::format("study {}'s spec searches no learning-rate range under space: to narrow", baseline.study.name));
  }
  if (rate->max <= top) {
    throw Error(fmt::format("study {}'s learning rates already end at {}, below half the unstable {}",
                            baseline.study.name, Num(rate->max), Num(unstable)));
  }
  YamlTree& max = entry->Set("max", YamlTree::Of(top));
  max.comment = fmt::format("was {}: half the unstable learning rate {}", Num(rate->max), Num(unstable));
  if (rate->min >= top) {
    YamlTree& min = entry->Set("min", YamlTree::Of(std::stod(fmt::format("{:.3g}", top / 30))));
    min.comment = fmt::format("was {}", Num(rate->min));
  }
  return Finish(name, ToYamlText(spec));
}

}  // namespace dltune
