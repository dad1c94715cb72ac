#include "report/pareto_section.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace dltune {
namespace {

// "sub-study optimizer=adam: trials 3, 5 and 8": the front of each sub-study, for a chart's caption.
std::string FrontCaption(const ParetoView& view) {
  std::vector<std::string> parts;
  std::size_t drawn = 0;
  for (const ParetoSubStudy& sub : view.substudies) {
    drawn += sub.points.size();
    if (sub.front.empty()) continue;
    std::string trials;
    for (std::size_t i = 0; i < sub.front.size() && i < 8; ++i) {
      trials += fmt::format("{}{}", i == 0 ? "" : (i + 1 == sub.front.size() ? " and " : ", "), sub.front[i]);
    }
    if (sub.front.size() > 8) trials += fmt::format(" and {} more", sub.front.size() - 8);
    parts.push_back(fmt::format("{}trial{} {}", view.substudies.size() > 1 ? sub.substudy + ": " : "",
                                sub.front.size() == 1 ? "" : "s", trials));
  }
  if (parts.empty()) return fmt::format("{} trials drawn, none completed with the cost", drawn);
  if (parts.size() > 4) return fmt::format("{} trials drawn; {} sub-studies with a front", drawn, parts.size());
  return fmt::format("{} trials drawn; on the front: {}", drawn, fmt::join(parts, "; "));
}

}  // namespace

std::optional<ParetoCost> DefaultParetoCost(const StudyData& data) {
  const std::vector<ParetoCost> recorded = RecordedCosts(data);
  if (recorded.empty()) return std::nullopt;
  return std::find(recorded.begin(), recorded.end(), ParetoCost::kTrainingSeconds) != recorded.end()
             ? ParetoCost::kTrainingSeconds
             : recorded.front();
}

PageSection ParetoSection(const StudyData& data, const ChartOptions& options) {
  PageSection section{
      .id = "pareto",
      .title = "Quality against cost: what does a better result cost?",
      .explanation =
          "Each trial's best objective against what it cost, per sub-study: the trials no other is both cheaper and "
          "better than (the Pareto front) drawn strong and joined by a staircase, the others faint, infeasible trials "
          "as red crosses along the worse edge. Where the front flattens, more cost buys little. The objective stays "
          "the one the study optimizes: the front is a view of the trade-off, not a second objective.",
      .empty_text = "No completed or infeasible trial has recorded a cost yet."};
  const std::vector<ParetoCost> recorded = RecordedCosts(data);
  std::vector<std::string> missing;
  for (const ParetoCostInfo& info : ParetoCosts()) {
    if (std::find(recorded.begin(), recorded.end(), info.cost) == recorded.end()) {
      missing.push_back(fmt::format("{}: {}", info.label, NotRecordedText(data, info.cost)));
    }
  }
  if (!missing.empty())
    section.explanation += fmt::format(" Not recorded in this study: {}.", fmt::join(missing, "; "));
  const std::optional<ParetoCost> first = DefaultParetoCost(data);
  if (!first) return section;
  std::vector<ParetoCost> order = {*first};
  for (const ParetoCost cost : recorded) {
    if (cost != *first) order.push_back(cost);
  }
  for (const ParetoCost cost : order) {
    const ParetoView view = AnalyzePareto(data, cost);
    const ParetoCostInfo& info = CostInfo(cost);
    PageChart chart{
        .id = std::string("pareto_") + info.name,
        .caption = fmt::format("{} against {}: {}", data.spec.objective.Name(), info.label, FrontCaption(view)),
        .spec = ParetoSpec(view, data.spec.objective, options)};
    (cost == *first ? section.charts : section.folded_charts).push_back(std::move(chart));
  }
  if (!section.folded_charts.empty()) {
    section.folded_title = fmt::format("Against the other recorded costs ({})", section.folded_charts.size());
  }
  return section;
}

}  // namespace dltune
