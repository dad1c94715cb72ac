// dltune plan expand: a study's search space expanded where its best trials crowd an edge.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/strings.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/plan/plan.h"
#include "dltune/report/study_data.h"
#include "planned_spec.h"

namespace dltune {

using namespace plan_internal;

PlannedStudy PlanExpand(Store& store, const ExpandRequest& request) {
  const StudyData parent = LoadParent(store, request.parent, /*with_measurements=*/true);
  std::vector<const Diagnostic*> edges;
  const std::vector<Diagnostic> diagnostics = Diagnose(parent);
  for (const Diagnostic& d : diagnostics) {
    if (d.id == "boundary" && d.handled.empty() && d.expand_to) edges.push_back(&d);
  }
  if (edges.empty()) {
    throw Error(
        fmt::format("study {} has no search-space edge to expand: none of its boundary findings (dltune doctor "
                    "{}) is open with a range that can grow",
                    parent.study.name, parent.study.name));
  }
  const std::string name = PlannedName(request.name, parent.study.name, "expanded");
  YamlTree spec = DerivedSpec(parent, name, "", "expand", parent.study.name, YamlTree::Map());
  YamlTree* space = spec.Find("space");
  YamlTree options = YamlTree::Map(/*flow=*/true);
  std::vector<std::string> changes;
  for (const Diagnostic* d : edges) {
    const Param* param = parent.spec.space->Find(d->param_id);
    YamlTree* entry = space == nullptr ? nullptr : space->Find(d->param_id);
    if (param == nullptr || entry == nullptr || entry->kind != YamlTree::Kind::kMap) {
      throw Error(fmt::format("study {}'s spec has no range {} under space: to expand (edit the spec instead)",
                              parent.study.name, d->param_id));
    }
    const bool upper = *d->expand_to > param->max;
    if (options.Find(d->param_id) != nullptr) continue;  // crowded in two sub-studies: expanded once
    const Value bound =
        param->kind == ParamKind::kInt ? Value(static_cast<std::int64_t>(*d->expand_to)) : Value(*d->expand_to);
    YamlTree& set = entry->Set(upper ? "max" : "min", YamlTree::Of(bound));
    set.comment = fmt::format("was {}: {}", Num(upper ? param->max : param->min), d->title);
    YamlTree change = YamlTree::Map(/*flow=*/true);
    change.Set(upper ? "max" : "min", YamlTree::Of(bound));
    options.Set(d->param_id, change);
    changes.push_back(fmt::format("{} {} {} → {}", d->param_id, upper ? "max" : "min",
                                  Num(upper ? param->max : param->min), FormatValue(bound)));
  }
  spec.comment = WrapComment(fmt::format(
      "Planned by: dltune plan expand --from {}{}\n"
      "Study {} with its search space expanded where its best trials crowd an edge (the playbook's \"Identifying "
      "bad search space boundaries\"): {}. The same seed keeps the other params' quasi-random points.",
      parent.study.name, request.name.empty() ? "" : " --name " + request.name, parent.study.name,
      fmt::join(changes, "; ")));
  spec.Find("procedure")->Set("options", options);
  return Finish(name, ToYamlText(spec));
}

}  // namespace dltune
