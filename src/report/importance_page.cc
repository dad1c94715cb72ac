#include "report/importance_page.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "analyze/analysis_util.h"
#include "report/importance_text.h"

namespace dltune {
namespace {

using nlohmann::json;

constexpr const char* kSchema = "https://vega.github.io/schema/vega-lite/v6.json";
constexpr const char* kOutOfNoise = "stands out of the noise";
constexpr const char* kInNoise = "indistinguishable from no effect";

json Base(const ChartOptions& options, int width, int height) {
  return {{"$schema", kSchema},
          {"width", options.width > 0 ? options.width : width},
          {"height", options.height > 0 ? options.height : height},
          {"config",
           {{"font", "DejaVu Sans, Helvetica, Arial, sans-serif"},
            {"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}, {"titleFontWeight", "normal"}}},
            {"axisQuantitative", {{"format", "~r"}}},  // 0.003, not 0.0030000 nor 3e-3
            {"legend",
             {{"orient", "bottom"},
              {"direction", "vertical"},
              {"labelFontSize", 11},
              {"labelLimit", 420},
              {"titleLimit", 420}}},
            {"view", {{"stroke", "#ccc"}}}}}};
}

json Tip(const char* field, const char* title, const char* type = "nominal", const char* format = nullptr) {
  json tip = {{"field", field}, {"title", title}, {"type", type}};
  if (format != nullptr) tip["format"] = format;
  return tip;
}

// The sub-study's params, most important first (spec order on ties).
std::vector<const ParamImportance*> ByImportance(const SubStudyImportance& substudy) {
  std::vector<const ParamImportance*> params;
  for (const ParamImportance& p : substudy.params) params.push_back(&p);
  std::stable_sort(params.begin(), params.end(),
                   [](const ParamImportance* a, const ParamImportance* b) { return a->importance > b->importance; });
  return params;
}

// A param's value as a unit position: a range's UnitPosition, a list's index over its length; nullopt when absent
// or not one of its values.
std::optional<double> PositionOf(const Param& param, const Assignment& params) {
  const auto found = params.find(param.id);
  if (found == params.end()) return std::nullopt;
  if (param.IsChoice()) {
    for (std::size_t i = 0; i < param.values.size(); ++i) {
      if (SameValue(param.values[i], found->second)) {
        return param.values.size() == 1 ? 0.5 : static_cast<double>(i) / static_cast<double>(param.values.size() - 1);
      }
    }
    return std::nullopt;
  }
  const auto number = NumericValue(found->second);
  if (!number || !std::isfinite(*number)) return std::nullopt;
  return std::clamp(analysis_util::UnitPosition(param, *number), 0.0, 1.0);
}

// The labels of an axis's two ends: a range's bounds, a list's first and last values.
std::pair<std::string, std::string> EndsOf(const Param& param) {
  if (param.IsChoice()) {
    if (param.values.empty()) return {"", ""};
    return {FormatValue(param.values.front()), FormatValue(param.values.back())};
  }
  return {analysis_util::Num(param.min), analysis_util::Num(param.max)};
}

// The text layer of the axes' labels at `position` (0 or 1), on `baseline`.
json EndLabels(const json& ends, const json& x, const json& y, int position, const char* baseline) {
  return {
      {"data", {{"values", ends}}},
      {"transform", json::array({{{"filter", fmt::format("datum.position == {}", position)}}})},
      {"mark",
       {{"type", "text"}, {"dx", 4}, {"align", "left"}, {"baseline", baseline}, {"fontSize", 10}, {"color", "#555"}}},
      {"encoding", {{"x", x}, {"y", y}, {"text", {{"field", "label"}, {"type", "nominal"}}}}}};
}

}  // namespace

json ImportanceBarSpec(const SubStudyImportance& substudy, const ImportanceSettings& settings,
                       const ChartOptions& options) {
  const auto params = ByImportance(substudy);
  json spec = Base(options, 420, std::max(60, 26 * static_cast<int>(params.size())));
  json rows = json::array();
  json order = json::array();
  for (const ParamImportance* p : params) {
    order.push_back(p->param_id);
    rows.push_back({{"param", p->param_id},
                    {"importance", p->importance},
                    {"floor", p->noise_floor},
                    {"above", p->above_noise},
                    {"low", p->above_noise_low},
                    {"high", p->above_noise_high},
                    {"best", BestValueText(*p, substudy)},
                    {"verdict", p->indistinguishable ? kInNoise : kOutOfNoise}});
  }
  const std::string interval =
      fmt::format("{:g}-{:g}% interval", settings.interval_low * 100, settings.interval_high * 100);
  const json y = {{"field", "param"}, {"type", "nominal"}, {"sort", order}, {"title", nullptr}};
  const json tooltip = json::array(
      {Tip("param", "hyperparameter"), Tip("importance", "importance", "quantitative", ".3g"),
       Tip("floor", "noise floor", "quantitative", ".3g"), Tip("above", "above the floor", "quantitative", ".3g"),
       Tip("low", "interval low", "quantitative", ".3g"), Tip("high", "interval high", "quantitative", ".3g"),
       Tip("verdict", "verdict"), Tip("best", "best trial's value")});
  spec["data"] = {{"values", rows}};
  const json x = {{"field", "above"},
                  {"type", "quantitative"},
                  {"title", "importance above the noise floor (PED-ANOVA), " + interval}};
  const json color = {{"field", "verdict"},
                      {"type", "nominal"},
                      {"title", nullptr},
                      {"scale", {{"domain", {kOutOfNoise, kInNoise}}, {"range", {"#4c78a8", "#bab0ac"}}}}};
  const json bar = {{"mark", {{"type", "bar"}, {"height", {{"band", 0.6}}}}},
                    {"encoding", {{"x", x}, {"y", y}, {"color", color}, {"tooltip", tooltip}}}};
  const json whisker = {{"mark", {{"type", "rule"}, {"color", "#333"}, {"strokeWidth", 1.5}}},
                        {"encoding",
                         {{"x", {{"field", "low"}, {"type", "quantitative"}}},
                          {"x2", {{"field", "high"}}},
                          {"y", y},
                          {"tooltip", tooltip}}}};
  // The noise floor: 0 above it, across the plot.
  const json floor = {{"data", {{"values", json::array({{{"zero", 0}}})}}},
                      {"mark", {{"type", "rule"}, {"color", "#d62728"}, {"strokeWidth", 1.5}}},
                      {"encoding", {{"x", {{"field", "zero"}, {"type", "quantitative"}}}}}};
  spec["layer"] = json::array({bar, whisker, floor});
  return spec;
}

json ParallelCoordinatesSpec(const StudyData& data, const SubStudyImportance& substudy, const ChartOptions& options,
                             std::size_t max_trials) {
  const auto params = ByImportance(substudy);
  json spec = Base(options, 980, 280);
  json rows = json::array();
  json ends = json::array();
  json order = json::array();
  std::vector<const Param*> space_params;
  for (const ParamImportance* p : params) {
    const Param* param = data.spec.space ? data.spec.space->Find(p->param_id) : nullptr;
    if (param == nullptr) continue;
    space_params.push_back(param);
    order.push_back(param->id);
    const auto [first, last] = EndsOf(*param);
    ends.push_back({{"param", param->id}, {"position", 0}, {"label", first}});
    ends.push_back({{"param", param->id}, {"position", 1}, {"label", last}});
  }
  for (const auto& group : analysis_util::RankedBySubStudy(data)) {
    if (group.empty() || group.front().trial->substudy != substudy.index) continue;
    for (std::size_t i = 0; i < group.size() && i < max_trials; ++i) {
      const TrialRecord& trial = *group[i].trial;
      for (const Param* param : space_params) {
        const auto position = PositionOf(*param, trial.params);
        if (!position) continue;
        const auto value = trial.params.find(param->id);
        rows.push_back({{"trial", trial.number},
                        {"objective", group[i].objective},
                        {"param", param->id},
                        {"position", *position},
                        {"value", FormatValue(value->second)}});
      }
    }
  }
  const json x = {{"field", "param"},
                  {"type", "nominal"},
                  {"sort", order},
                  {"title", nullptr},
                  {"axis", {{"labelAngle", 0}, {"orient", "bottom"}, {"grid", true}}}};
  const json y = {{"field", "position"}, {"type", "quantitative"}, {"scale", {{"domain", {0, 1}}}}, {"axis", nullptr}};
  const Objective& objective = data.spec.objective;
  spec["layer"] = json::array(
      {{{"data", {{"values", rows}}},
        {"mark", {{"type", "line"}, {"opacity", 0.6}, {"strokeWidth", 1.2}}},
        {"encoding",
         {{"x", x},
          {"y", y},
          {"detail", {{"field", "trial"}, {"type", "nominal"}}},
          {"color",
           {{"field", "objective"},
            {"type", "quantitative"},
            {"title", ObjectiveTitle(objective)},
            {"scale", {{"scheme", "viridis"}, {"reverse", objective.direction == Direction::kMaximize}}}}},
          {"tooltip", json::array({Tip("trial", "trial"), Tip("param", "hyperparameter"), Tip("value", "value"),
                                   Tip("objective", objective.Name().c_str(), "quantitative", ".4~g")})}}}},
       // A dot at each value: a trial with a single param still shows.
       {{"data", {{"values", rows}}},
        {"mark", {{"type", "point"}, {"filled", true}, {"size", 14}, {"opacity", 0.7}}},
        {"encoding", {{"x", x}, {"y", y}, {"color", {{"field", "objective"}, {"type", "quantitative"}}}}}},
       // Each axis's ends, inside the plot: the bottom one above its line, the top one below.
       EndLabels(ends, x, y, 0, "bottom"),
       EndLabels(ends, x, y, 1, "top")});
  return spec;
}

bool ShowsImportance(const StudyData& data) {
  return !data.spec.procedure.ComparesWithParent() && !data.spec.procedure.Measures();
}

PageSection ImportanceSection(const StudyData& data, const HyperparameterImportance& importance,
                              const ChartOptions& normal, const ChartOptions& wide) {
  const ImportanceSettings& s = importance.settings;
  PageSection section{
      .id = "importance",
      .title = "Hyperparameter importance: which nuisance hyperparameters matter, and which are noise?",
      .explanation = fmt::format(
          "How much each nuisance hyperparameter decides whether a trial of the sub-study reaches the top {:g}% of "
          "the objective: PED-ANOVA (Watanabe et al., IJCAI 2023), as a bar above the noise floor (the red line: "
          "what a hyperparameter of no effect gets from the same trials) with its {:g}-{:g}% bootstrap interval ({} "
          "resamples of the trials). A grey bar's interval holds the floor: the trials cannot tell its effect from "
          "none, so it is a candidate to fix in the next round (at the best trial's value) and spend the budget on "
          "the others. Below, each trial as a line across the hyperparameters, coloured by its best "
          "objective (darker is better): the important ones gather the dark lines.",
          s.target_quantile * 100, s.interval_low * 100, s.interval_high * 100, s.resamples),
      .empty_text = "No sub-study has two completed trials with a nuisance hyperparameter that varies."};
  const bool several = importance.substudies.size() > 1;
  for (const SubStudyImportance& sub : importance.substudies) {
    if (sub.params.empty()) continue;
    const std::string of = several ? " of " + sub.substudy : "";
    const std::string suffix = several ? fmt::format("_{}", sub.index) : "";
    section.charts.push_back(
        {.id = "importance" + suffix,
         .caption = fmt::format("importance{}: {} completed trials, {} in the top {:g}%{}", of, sub.trials,
                                sub.top_trials, s.target_quantile * 100,
                                sub.top_trials < kMinTopTrialsToFix ? " (too few to tell which to fix)" : ""),
         .spec = ImportanceBarSpec(sub, s, normal)});
    section.charts.push_back(
        {.id = "parallel" + suffix,
         .caption = fmt::format("trials{} across the nuisance hyperparameters, most important left", of),
         .spec = ParallelCoordinatesSpec(data, sub, wide),
         .wide = true});
  }
  return section;
}

}  // namespace dltune
