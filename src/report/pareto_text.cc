#include "report/pareto_text.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/report/study_data.h"
#include "report/text_table.h"

namespace dltune {
namespace {

// A cost as people read it: bytes as GiB, parameter counts whole, the others at 4 significant digits.
std::string CostText(ParetoCost cost, double value) {
  if (cost == ParetoCost::kPeakGpuMemory) return fmt::format("{:.3g} GiB", value / (1024.0 * 1024.0 * 1024.0));
  if (cost == ParetoCost::kParameters || value >= 1e4) return fmt::format("{:.0f}", value);  // never "6.3e+04"
  return fmt::format("{:.4g}", value);
}

std::vector<std::string> CostNames(const std::vector<ParetoCost>& costs) {
  std::vector<std::string> names;
  names.reserve(costs.size());
  for (const ParetoCost cost : costs) names.emplace_back(CostInfo(cost).name);
  return names;
}

std::string Recorded(const StudyData& data) {
  const std::vector<std::string> names = CostNames(RecordedCosts(data));
  return names.empty() ? "it recorded none" : fmt::format("it recorded {}", fmt::join(names, ", "));
}

}  // namespace

ParetoCost RequireRecordedCost(const StudyData& data, const std::string& name) {
  const std::optional<ParetoCost> cost = ParseParetoCost(name);
  if (!cost) {
    std::vector<ParetoCost> all;
    for (const ParetoCostInfo& info : ParetoCosts()) all.push_back(info.cost);
    throw Error(fmt::format("--pareto: no cost named '{}': the costs are {}; study {}: {}", name,
                            fmt::join(CostNames(all), ", "), data.study.name, Recorded(data)));
  }
  const std::vector<ParetoCost> recorded = RecordedCosts(data);
  if (std::find(recorded.begin(), recorded.end(), *cost) == recorded.end()) {
    throw Error(fmt::format("--pareto {}: not recorded in study {}: {}; {}", name, data.study.name,
                            NotRecordedText(data, *cost), Recorded(data)));
  }
  return *cost;
}

std::string ParetoText(const StudyData& data, ParetoCost cost) {
  const ParetoCostInfo& info = CostInfo(cost);
  const Objective& objective = data.spec.objective;
  const ParetoView view = AnalyzePareto(data, cost);
  std::string out = fmt::format(
      "Study {}: {} ({} is better) against {} ({} is cheaper)\n"
      "Each sub-study's Pareto front, cheapest first: its completed trials that no other of its trials beats (at least "
      "as good in both, better in one).\n",
      data.study.name, objective.Name(), objective.direction == Direction::kMinimize ? "lower" : "higher", info.label,
      info.higher_is_better ? "higher" : "lower");
  for (const ParetoSubStudy& sub : view.substudies) {
    const auto infeasible =
        std::count_if(sub.points.begin(), sub.points.end(), [](const ParetoPoint& p) { return p.infeasible; });
    std::string counts = fmt::format("{} trial{} drawn, {} on the front", sub.points.size(),
                                     sub.points.size() == 1 ? "" : "s", sub.front.size());
    if (infeasible > 0) counts += fmt::format(", {} infeasible", infeasible);
    if (sub.without_cost > 0) counts += fmt::format("; {} without {}", sub.without_cost, info.label);
    if (sub.unfinished > 0) counts += fmt::format("; {} not finished (left out)", sub.unfinished);
    out += fmt::format("\n{}{}\n", view.substudies.size() > 1 ? "sub-study " + sub.substudy + ": " : "", counts);
    if (sub.front.empty()) continue;
    TextTable table({"trial", info.label, objective.Name()});
    for (const std::uint64_t trial : sub.front) {
      const auto point =
          std::find_if(sub.points.begin(), sub.points.end(), [&](const ParetoPoint& p) { return p.trial == trial; });
      table.AddRow({std::to_string(trial), CostText(cost, point->cost), fmt::format("{:.4g}", *point->objective)});
    }
    out += table.Render(2);
  }
  std::vector<std::string> others;
  for (const ParetoCost other : RecordedCosts(data)) {
    if (other != cost) others.emplace_back(CostInfo(other).name);
  }
  if (!others.empty()) out += fmt::format("\nAlso recorded: {} (--pareto COST).\n", fmt::join(others, ", "));
  return TerminalSafe(out);
}

nlohmann::json ParetoJson(const StudyData& data, ParetoCost cost) {
  const ParetoCostInfo& info = CostInfo(cost);
  const ParetoView view = AnalyzePareto(data, cost);
  nlohmann::json substudies = nlohmann::json::array();
  for (const ParetoSubStudy& sub : view.substudies) {
    nlohmann::json points = nlohmann::json::array();
    for (const ParetoPoint& point : sub.points) {
      points.push_back({{"trial", point.trial},
                        {"state", point.infeasible ? "infeasible" : "completed"},
                        {"cost", point.cost},
                        {"objective", point.objective ? nlohmann::json(*point.objective) : nlohmann::json()},
                        {"on_front", point.on_front}});
    }
    substudies.push_back({{"substudy", sub.substudy},
                          {"front", sub.front},
                          {"points", points},
                          {"without_cost", sub.without_cost},
                          {"unfinished", sub.unfinished}});
  }
  return {{"study", data.study.name},
          {"objective", data.spec.objective.Name()},
          {"direction", DirectionName(data.spec.objective.direction)},
          {"cost", info.name},
          {"cost_label", info.label},
          {"cost_direction", info.higher_is_better ? "maximize" : "minimize"},
          {"recorded_costs", CostNames(RecordedCosts(data))},
          {"substudies", substudies}};
}

std::string ShowPareto(Store& store, const std::string& study, const std::string& cost, bool json) {
  const StudyData data = LoadStudyData(store, study);
  const ParetoCost chosen = RequireRecordedCost(data, cost);
  return json ? ParetoJson(data, chosen).dump(2) + "\n" : ParetoText(data, chosen);
}

}  // namespace dltune
