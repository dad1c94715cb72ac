#include "vega_specs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "analyze/time_split.h"

namespace dltune {
namespace {

using nlohmann::json;

constexpr const char* kSchema = "https://vega.github.io/schema/vega-lite/v6.json";
// Tableau 10 without its red, which marks infeasible trials and thresholds.
constexpr const char* kSubstudyPalette[] = {"#4c78a8", "#f58518", "#54a24b", "#b279a2", "#72b7b2",
                                            "#eeca3b", "#9d755d", "#bab0ac", "#ff9da6", "#79706e"};
constexpr const char* kInfeasibleColor = "#d62728";
constexpr const char* kThresholdColor = "#d62728";

// A number for a JSON document: null when it is not finite (JSON has no NaN or infinity).
json Number(double value) { return std::isfinite(value) ? json(value) : json(); }
json Number(const std::optional<double>& value) { return value ? Number(*value) : json(); }

// The skeleton every spec shares: schema, size and a readable configuration.
json Base(const ChartOptions& options, int default_width, int default_height) {
  return {{"$schema", kSchema},
          {"width", options.width > 0 ? options.width : default_width},
          {"height", options.height > 0 ? options.height : default_height},
          {"config",
           {{"font", "DejaVu Sans, Helvetica, Arial, sans-serif"},
            {"axis", {{"labelFontSize", 11}, {"titleFontSize", 12}, {"titleFontWeight", "normal"}, {"grid", true}}},
            // Tick labels at the precision their spacing needs, in decimals: 0.3, not 0.30000000000000004 nor
            // 0.300000, and 150, not 1.5e+2 ("~g" at the 2 digits a spacing of 50 needs).
            {"axisQuantitative", {{"format", "~r"}}},
            // Below the plot, one entry per line: sub-study labels can be long, and charts sit two abreast.
            {"legend",
             {{"orient", "bottom"},
              {"direction", "vertical"},
              {"labelFontSize", 11},
              {"titleFontSize", 11},
              {"labelLimit", 420},
              {"symbolOpacity", 1},
              {"symbolStrokeWidth", 2}}},
            {"view", {{"stroke", "#ccc"}}}}}};
}

// The color encoding of the sub-study: the same color for a sub-study in every chart (when the caller passes the
// study's sub-studies), no legend when there is only one.
json SubstudyColor(const ChartOptions& options, const std::vector<std::string>& seen) {
  const std::vector<std::string>& domain = options.substudies.empty() ? seen : options.substudies;
  json range = json::array();
  for (std::size_t i = 0; i < domain.size(); ++i) range.push_back(kSubstudyPalette[i % std::size(kSubstudyPalette)]);
  json color = {{"field", "substudy"},
                {"type", "nominal"},
                {"title", "sub-study"},
                {"scale", {{"domain", domain}, {"range", range}}}};
  if (domain.size() <= 1) color["legend"] = nullptr;
  return color;
}

// Sub-study labels in order of first appearance.
class SeenOrder {
 public:
  void Add(const std::string& label) {
    if (set_.insert(label).second) order_.push_back(label);
  }
  const std::vector<std::string>& order() const { return order_; }

 private:
  std::set<std::string> set_;
  std::vector<std::string> order_;
};

json Layer(json data_values, json mark, json encoding) {
  return {{"data", {{"values", std::move(data_values)}}}, {"mark", std::move(mark)}, {"encoding", std::move(encoding)}};
}

json Tooltip(const char* field, const char* title, const char* type = "nominal", const char* format = nullptr) {
  json entry = {{"field", field}, {"type", type}, {"title", title}};
  if (format != nullptr) entry["format"] = format;
  return entry;
}

// Tick values for a log axis over [lo, hi]: 1-2-5 (or 1-2-3-5 over about a decade) steps per decade over a few
// decades, powers of ten beyond; empty when the range is not positive. Vega's own log ticks label every minor tick,
// which crowds a small chart.
json LogAxisValues(double lo, double hi) {
  json values = json::array();
  if (!(lo > 0) || !(hi >= lo) || !std::isfinite(hi)) return values;
  const double decades = std::log10(hi / lo);
  const std::vector<double> multiples = decades <= 1.2   ? std::vector<double>{1, 2, 3, 5}
                                        : decades <= 2.5 ? std::vector<double>{1, 2, 5}
                                        : decades <= 3.5 ? std::vector<double>{1, 3}
                                                         : std::vector<double>{1};
  const int stride = decades > 8 ? 2 : 1;
  for (int k = static_cast<int>(std::floor(std::log10(lo))); k <= static_cast<int>(std::ceil(std::log10(hi))); ++k) {
    if (k % stride != 0) continue;
    for (const double m : multiples) {
      const double value = std::stod(fmt::format("{}e{}", m, k));  // 0.3, not 3 * 0.1 = 0.30000000000000004
      if (value >= lo * (1 - 1e-9) && value <= hi * (1 + 1e-9)) values.push_back(value);
    }
  }
  return values;
}

// The axis of a log scale over [lo, hi]: LogAxisValues as its ticks, labels without trailing zeros.
json LogAxis(double lo, double hi) {
  json axis = {{"format", "~g"}};
  json values = LogAxisValues(lo, hi);
  if (values.size() >= 2) axis["values"] = std::move(values);
  return axis;
}

// The axis of a quantity that is a whole number (steps, counts of steps or trials): whole-number ticks only, written
// as integers with thousands separators ("1,500", never "1.5e+3" nor "2.5").
json IntegerAxis() { return {{"format", ",d"}, {"tickMinStep", 1}}; }

// Roughly how wide a label of `text` is drawn at the axes' 11 px font, in pixels.
double LabelWidth(const std::string& text) {
  std::size_t points = 0;
  for (const char c : text) points += (static_cast<unsigned char>(c) & 0xC0) != 0x80 ? 1 : 0;
  return 7.0 * static_cast<double>(points);
}

// The axis of a nominal x over `width` pixels: labels level while each fits its band, else upright (read from below)
// so that neighbours never overlap; each cut at `limit` pixels.
json NominalAxis(const json& labels, int width, int limit) {
  double widest = 0;
  for (const auto& label : labels) widest = std::max(widest, LabelWidth(label.get<std::string>()));
  const double band = static_cast<double>(width) / static_cast<double>(std::max<std::size_t>(labels.size(), 1));
  if (std::min(widest, static_cast<double>(limit)) + 8 <= band) return {{"labelAngle", 0}, {"labelLimit", limit}};
  return {{"labelAngle", -90},
          {"labelAlign", "right"},
          {"labelBaseline", "middle"},
          {"labelLimit", limit},
          {"labelOverlap", "greedy"}};
}

// Labels for the values of a discrete param: numbers at the fewest significant digits (at least 4) that keep them
// apart, "0.08345" rather than "0.08345234782", other values as they are.
std::vector<std::string> CategoryLabels(const std::vector<std::string>& categories) {
  std::vector<double> numbers;
  for (const std::string& category : categories) {
    std::size_t used = 0;
    double value = 0;
    try {
      value = std::stod(category, &used);
    } catch (const std::exception&) {
      return categories;
    }
    if (used != category.size() || !std::isfinite(value)) return categories;
    numbers.push_back(value);
  }
  for (int digits = 4; digits <= 17; ++digits) {
    std::vector<std::string> labels;
    labels.reserve(numbers.size());
    for (const double value : numbers) labels.push_back(fmt::format("{:.{}g}", value, digits));
    if (std::set<std::string>(labels.begin(), labels.end()).size() == labels.size()) return labels;
  }
  return categories;
}

// A continuous scale: log, or linear not forced to include zero (Vega-Lite rejects `zero` on log scales).
json ContinuousScale(bool log) {
  // A log scale's "nice" domain runs to whole decades, leaving most of the plot empty.
  return log ? json{{"type", "log"}, {"nice", false}, {"padding", 6}} : json{{"type", "linear"}, {"zero", false}};
}

// The step axis of curves: from 0, or a log axis (steps from 1) when the study evaluates densely early.
json StepAxis(const ChartOptions& options) {
  if (options.log_steps) {
    return {{"field", "step"},
            {"type", "quantitative"},
            {"title", "step (log scale)"},
            {"scale", {{"type", "log"}, {"nice", false}}},
            {"axis", {{"format", "~s"}}}};
  }
  json axis = IntegerAxis();
  axis["tickCount"] = 10;
  return {{"field", "step"}, {"type", "quantitative"}, {"title", "step"}, {"scale", {{"zero", true}}}, {"axis", axis}};
}

bool AllPositive(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return v > 0; });
}

}  // namespace

std::string ObjectiveTitle(const Objective& objective) {
  return objective.Name() +
         (objective.direction == Direction::kMinimize ? " (lower is better)" : " (higher is better)");
}

json AxisPlotSpec(const AxisPlot& plot, const Objective& objective, const ChartOptions& options) {
  json spec = Base(options, 330, 210);
  const std::vector<std::string> categories = CategoryLabels(plot.categories);
  SeenOrder substudies;
  json completed = json::array();
  json infeasible_at_value = json::array();
  json infeasible_no_value = json::array();
  for (const AxisPoint& point : plot.points) {
    if (!point.infeasible && !point.objective) continue;  // not finished, or failed: nothing to show
    json row = {{"trial", point.trial},
                {"substudy", point.substudy},
                {"value", FormatValue(point.value)},
                {"y", Number(point.objective)},
                {"state", point.infeasible ? "infeasible" : "completed"}};
    if (plot.categorical) {
      const auto index = static_cast<std::size_t>(point.position);
      row["x"] = index < categories.size() ? categories[index] : FormatValue(point.value);
      // Spread the points of one category sideways, deterministically, so they do not hide each other.
      row["jitter"] = std::fmod(static_cast<double>(point.trial) * 0.6180339887498949, 1.0) - 0.5;
    } else {
      row["x"] = Number(point.position);
    }
    if (!point.infeasible) {
      substudies.Add(point.substudy);
      completed.push_back(std::move(row));
    } else if (point.objective) {
      infeasible_at_value.push_back(std::move(row));
    } else {
      infeasible_no_value.push_back(std::move(row));
    }
  }

  json x;
  if (plot.categorical) {
    x = {{"field", "x"},
         {"type", "nominal"},
         {"title", plot.param_name},
         {"scale", {{"domain", categories}, {"paddingInner", 0.3}}},
         {"axis", NominalAxis(categories, spec["width"].get<int>(), 140)}};
  } else {
    json scale = ContinuousScale(plot.log_scale);
    scale["nice"] = false;
    scale["padding"] = 12;
    if (plot.lower && plot.upper) scale["domain"] = {Number(*plot.lower), Number(*plot.upper)};
    x = {{"field", "x"},
         {"type", "quantitative"},
         {"title", plot.param_name + (plot.log_scale ? " (log scale)" : "")},
         {"scale", scale}};
    if (plot.log_scale) {
      double lo = plot.lower.value_or(std::numeric_limits<double>::infinity());
      double hi = plot.upper.value_or(0);
      for (const AxisPoint& point : plot.points) {
        lo = std::min(lo, point.position);
        hi = std::max(hi, point.position);
      }
      x["axis"] = LogAxis(lo, hi);
    }
  }
  json y = {{"field", "y"},
            {"type", "quantitative"},
            {"title", ObjectiveTitle(objective)},
            {"scale", {{"zero", false}, {"nice", true}, {"padding", 10}}}};
  // No objective yet (a study that just started): an empty axis rather than a scale over nothing.
  if (completed.empty() && infeasible_at_value.empty()) y["scale"]["domain"] = {0, 1};
  const json shape = {
      {"field", "state"},
      {"type", "nominal"},
      {"title", nullptr},
      {"scale", {{"domain", json::array({"completed", "infeasible"})}, {"range", json::array({"circle", "cross"})}}}};
  json tooltip = json::array(
      {Tooltip("trial", "trial"), Tooltip("substudy", "sub-study"), Tooltip("value", plot.param_name.c_str()),
       Tooltip("y", objective.Name().c_str(), "quantitative", ".4~g"), Tooltip("state", "state")});
  auto encoding = [&](bool with_y) {
    json e = {{"x", x}, {"shape", shape}, {"tooltip", tooltip}};
    if (with_y) e["y"] = y;
    if (plot.categorical) {
      e["xOffset"] = {{"field", "jitter"}, {"type", "quantitative"}, {"scale", {{"domain", {-0.5, 0.5}}}}};
    }
    return e;
  };

  json layers = json::array();
  if (!plot.categorical && plot.lower && plot.upper) {
    json bounds = {{{"x", Number(*plot.lower)}, {"bound", "lower bound of the search space"}},
                   {{"x", Number(*plot.upper)}, {"bound", "upper bound of the search space"}}};
    layers.push_back(
        Layer(std::move(bounds), {{"type", "rule"}, {"color", "#888"}, {"strokeDash", {5, 4}}},
              {{"x", {{"field", "x"}, {"type", "quantitative"}}},
               {"tooltip", json::array({Tooltip("bound", "bound"), Tooltip("x", "value", "quantitative", "~g")})}}));
  }
  if (!completed.empty() || (infeasible_at_value.empty() && infeasible_no_value.empty())) {
    json e = encoding(true);
    e["color"] = SubstudyColor(options, substudies.order());
    layers.push_back(
        Layer(std::move(completed), {{"type", "point"}, {"filled", true}, {"size", 45}, {"opacity", 0.8}}, e));
  }
  const json infeasible_mark = {{"type", "point"},    {"filled", true}, {"size", 90},
                                {"strokeWidth", 1.5}, {"opacity", 0.9}, {"color", kInfeasibleColor}};
  if (!infeasible_at_value.empty())
    layers.push_back(Layer(std::move(infeasible_at_value), infeasible_mark, encoding(true)));
  if (!infeasible_no_value.empty()) {
    // No objective to place them at: along the edge where the worse values are.
    json e = encoding(false);
    const int height = spec["height"].get<int>();
    e["y"] = {{"value", objective.direction == Direction::kMinimize ? 6 : height - 6}};
    layers.push_back(Layer(std::move(infeasible_no_value), infeasible_mark, e));
  }
  spec["layer"] = std::move(layers);
  return spec;
}

json IsolationPlotSpec(const IsolationPlot& plot, const Objective& objective, const ChartOptions& options) {
  json spec = Base(options, 330, 210);
  json rows = json::array();
  json labels = json::array();
  bool intervals = false;
  std::vector<double> values;
  std::vector<std::string> raw_labels;
  for (const IsolationPoint& point : plot.points) raw_labels.push_back(point.label);
  const std::vector<std::string> shown = CategoryLabels(raw_labels);
  for (std::size_t i = 0; i < plot.points.size(); ++i) {
    const IsolationPoint& point = plot.points[i];
    labels.push_back(shown[i]);
    intervals = intervals || (point.low && point.high);
    if (point.best) values.push_back(*point.best);
    rows.push_back({{"label", shown[i]},
                    {"y", Number(point.best)},
                    {"low", Number(point.low)},
                    {"high", Number(point.high)},
                    {"replicas", point.replicas},
                    {"trial", point.best_trial ? json(*point.best_trial) : json()},
                    {"trials", point.trials},
                    {"completed", point.completed}});
  }
  const json x = {{"field", "label"},
                  {"type", "nominal"},
                  {"title", plot.param_name},
                  {"sort", labels},
                  {"scale", {{"domain", labels}}},
                  {"axis", NominalAxis(labels, spec["width"].get<int>(), 140)}};
  json y = {{"field", "y"},
            {"type", "quantitative"},
            {"title", "best " + ObjectiveTitle(objective)},
            {"scale", {{"zero", false}, {"nice", true}, {"padding", 14}}}};
  if (values.empty()) {
    y["scale"]["domain"] = {0, 1};  // no value completed yet: an empty axis rather than a scale over nothing
  } else if (!intervals) {
    // Single runs carry no measure of their noise: an axis zoomed to their difference would make any difference
    // look large. The values' spread takes at most a third of the axis, and at least 5% of their size is shown.
    const auto [low, high] = std::minmax_element(values.begin(), values.end());
    const double pad = std::max({*high - *low, 0.05 * std::max(std::fabs(*low), std::fabs(*high)), 1e-12});
    y["scale"]["domain"] = {*low - pad, *high + pad};
    y["scale"]["nice"] = false;
  }
  if (intervals) y["title"] = "mean " + ObjectiveTitle(objective) + ", 95% CI";
  const json tooltip = json::array(
      {Tooltip("label", plot.param_name.c_str()),
       Tooltip("y", ((intervals ? "mean " : "best ") + objective.Name()).c_str(), "quantitative", ".4~g"),
       Tooltip("low", "95% CI from", "quantitative", ".4~g"), Tooltip("high", "95% CI to", "quantitative", ".4~g"),
       Tooltip("replicas", "runs"), Tooltip("trial", intervals ? "median replica" : "best trial"),
       Tooltip("completed", "completed trials"), Tooltip("trials", "trials")});
  spec["data"] = {{"values", rows}};
  spec["encoding"] = {{"x", x}, {"y", y}, {"tooltip", tooltip}};
  // Points, labelled with their value; joined by a line only for buckets of a continuous param, where neighbours mean
  // something.
  spec["layer"] =
      json::array({{{"mark", {{"type", "point"}, {"filled", true}, {"size", 80}, {"color", "#4c78a8"}}}},
                   {{"mark", {{"type", "text"}, {"dy", -12}, {"fontSize", 11}, {"color", "#333"}}},
                    {"encoding", {{"text", {{"field", "y"}, {"type", "quantitative"}, {"format", ".4~g"}}}}}}});
  if (!plot.categorical) {
    const json line = {{"mark", {{"type", "line"}, {"color", "#4c78a8"}, {"strokeWidth", 1.5}}}};
    spec["layer"].insert(spec["layer"].begin(), line);
  }
  if (intervals) {
    const json interval = {
        {"mark", {{"type", "rule"}, {"color", "#4c78a8"}, {"strokeWidth", 2}}},
        {"encoding", {{"y", {{"field", "low"}, {"type", "quantitative"}}}, {"y2", {{"field", "high"}}}}}};
    spec["layer"].insert(spec["layer"].begin(), interval);
  }
  return spec;
}

json ReplicaSpec(const TrialVariance& variance, const Objective& objective, const ChartOptions& options) {
  json spec = Base(options, 700, 260);
  json runs = json::array();
  json means = json::array();
  json labels = json::array();
  SeenOrder substudies;
  for (const ConfigurationReplicas& c : variance.configurations) {
    const std::string label = c.scientific.empty()
                                  ? fmt::format("configuration {}", c.configuration)
                                  : fmt::format("{} (configuration {})", c.scientific, c.configuration);
    labels.push_back(label);
    substudies.Add(c.substudy);
    for (std::size_t i = 0; i < c.values.size(); ++i) {
      runs.push_back(
          {{"label", label}, {"substudy", c.substudy}, {"y", Number(c.values[i])}, {"trial", c.completed[i]}});
    }
    if (c.values.empty()) continue;
    means.push_back({{"label", label},
                     {"substudy", c.substudy},
                     {"y", Number(c.stats.mean)},
                     {"low", Number(c.stats.low)},
                     {"high", Number(c.stats.high)},
                     {"sd", Number(c.stats.sd)},
                     {"n", c.stats.n},
                     {"parent", Number(c.parent_value)}});
  }
  const json x = {{"field", "label"},
                  {"type", "nominal"},
                  {"title", nullptr},
                  {"sort", labels},
                  {"scale", {{"domain", labels}}},
                  {"axis", NominalAxis(labels, spec["width"].get<int>(), 220)}};
  const json y = {{"field", "y"},
                  {"type", "quantitative"},
                  {"title", ObjectiveTitle(objective)},
                  {"scale", {{"zero", false}, {"nice", true}, {"padding", 14}}}};
  const json color = SubstudyColor(options, substudies.order());
  spec["encoding"] = {{"x", x}};
  spec["layer"] = json::array(
      {{{"data", {{"values", runs}}},
        {"mark", {{"type", "point"}, {"filled", false}, {"size", 40}, {"opacity", 0.8}}},
        {"encoding",
         {{"y", y},
          {"color", color},
          {"tooltip", json::array({Tooltip("label", "configuration"), Tooltip("trial", "trial"),
                                   Tooltip("y", objective.Name().c_str(), "quantitative", ".4~g")})}}}},
       {{"data", {{"values", means}}},
        {"mark", {{"type", "rule"}, {"strokeWidth", 2}}},
        {"encoding",
         {{"y", {{"field", "low"}, {"type", "quantitative"}}}, {"y2", {{"field", "high"}}}, {"color", color}}}},
       {{"data", {{"values", means}}},
        {"mark", {{"type", "tick"}, {"thickness", 2}, {"size", 28}}},
        {"encoding",
         {{"y", y},
          {"color", color},
          {"tooltip", json::array({Tooltip("label", "configuration"), Tooltip("y", "mean", "quantitative", ".4~g"),
                                   Tooltip("low", "95% CI from", "quantitative", ".4~g"),
                                   Tooltip("high", "95% CI to", "quantitative", ".4~g"),
                                   Tooltip("sd", "sd", "quantitative", ".3~g"), Tooltip("n", "replicas"),
                                   Tooltip("parent", "parent trial", "quantitative", ".4~g")})}}}},
       {{"data", {{"values", means}}},
        {"mark",
         {{"type", "point"}, {"shape", "diamond"}, {"size", 70}, {"color", kThresholdColor}, {"filled", false}}},
        {"encoding", {{"y", {{"field", "parent"}, {"type", "quantitative"}}}}}}});
  return spec;
}

json PairedDifferenceSpec(const TrialVariance& variance, const Objective& objective, const ChartOptions& options) {
  json spec = Base(options, 620, 0);
  json rows = json::array();
  for (const ReplicaComparison& c : variance.comparisons) {
    rows.push_back({{"label", c.better_label + " better than " + c.other_label},
                    {"x", Number(c.advantage.mean)},
                    {"low", Number(c.advantage.low)},
                    {"high", Number(c.advantage.high)},
                    {"pairs", c.advantage.n},
                    {"parent", Number(c.parent_gap)},
                    {"verdict", c.within_noise ? "within the noise" : "beyond the noise"}});
  }
  spec["height"] = std::max<std::size_t>(1, rows.size()) * 36;
  // The axis holds 0, every interval and every parent gap.
  double low = 0, high = 0;
  for (const ReplicaComparison& c : variance.comparisons) {
    for (const std::optional<double>& v :
         {std::optional<double>(c.advantage.mean), c.advantage.low, c.advantage.high, c.parent_gap}) {
      if (v && std::isfinite(*v)) {
        low = std::min(low, *v);
        high = std::max(high, *v);
      }
    }
  }
  const double pad = std::max((high - low) * 0.08, 1e-12);
  const json y = {{"field", "label"}, {"type", "nominal"}, {"title", nullptr}, {"axis", {{"labelLimit", 360}}}};
  const json x = {{"field", "x"},
                  {"type", "quantitative"},
                  {"scale", {{"domain", {low - pad, high + pad}}, {"nice", false}}},
                  {"title", fmt::format("how much better, in {} (paired by seed, 95% CI)", objective.Name())}};
  spec["data"] = {{"values", rows}};
  spec["encoding"] = {{"y", y}};
  spec["layer"] = json::array(
      {{{"mark", {{"type", "rule"}, {"color", "#888"}, {"strokeDash", {4, 3}}}},
        {"data", {{"values", json::array({json::object()})}}},
        {"encoding", {{"x", {{"datum", 0}}}, {"y", nullptr}}}},
       {{"mark", {{"type", "rule"}, {"strokeWidth", 2}, {"color", "#4c78a8"}}},
        {"encoding",
         {{"x", {{"field", "low"}, {"type", "quantitative"}, {"scale", x["scale"]}}}, {"x2", {{"field", "high"}}}}}},
       {{"mark", {{"type", "point"}, {"filled", true}, {"size", 70}, {"color", "#4c78a8"}}},
        {"encoding",
         {{"x", x},
          {"tooltip", json::array({Tooltip("label", "comparison"), Tooltip("x", "mean", "quantitative", ".4~g"),
                                   Tooltip("low", "95% CI from", "quantitative", ".4~g"),
                                   Tooltip("high", "95% CI to", "quantitative", ".4~g"), Tooltip("pairs", "pairs"),
                                   Tooltip("parent", "parent's single runs", "quantitative", ".4~g"),
                                   Tooltip("verdict", "verdict")})}}}},
       {{"mark",
         {{"type", "point"}, {"shape", "diamond"}, {"size", 70}, {"color", kThresholdColor}, {"filled", false}}},
        {"encoding", {{"x", {{"field", "parent"}, {"type", "quantitative"}}}}}}});
  return spec;
}

json RoundComparisonSpec(const RoundComparison& rounds, const Objective& objective, const std::string& parent,
                         const ChartOptions& options) {
  json spec = Base(options, 420, 300);
  // Each point's label beside it, towards the middle of the plot (right of the points in the left half of the parent's
  // values, left of the others), cut at half the plot's width: a label never runs over the axes.
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const RoundRow& row : rounds.rows) {
    if (std::isfinite(row.parent_value)) {
      lo = std::min(lo, row.parent_value);
      hi = std::max(hi, row.parent_value);
    }
  }
  json rows = json::array();
  for (const RoundRow& row : rounds.rows) {
    const bool right_half = hi > lo && row.parent_value > (lo + hi) / 2;
    rows.push_back({{"label", row.label},
                    {"side", right_half ? "right" : "left"},
                    {"tag", fmt::format("#{} {}", row.rank, row.label)},
                    {"x", Number(row.parent_value)},
                    {"y", Number(row.value)},
                    {"parent_rank", row.parent_rank},
                    {"rank", row.rank},
                    {"trial", row.parent_trial}});
  }
  spec["data"] = {{"values", rows}};
  spec["encoding"] = {
      {"x",
       {{"field", "x"},
        {"type", "quantitative"},
        {"title", objective.Name() + " in " + parent},
        {"scale", {{"zero", false}, {"nice", true}, {"padding", 14}}},
        {"axis", {{"tickCount", 5}}}}},
      {"y",
       {{"field", "y"},
        {"type", "quantitative"},
        {"title", objective.Name() + " here"},
        {"scale", {{"zero", false}, {"nice", true}, {"padding", 14}}}}},
      {"tooltip", json::array({Tooltip("label", "configuration"), Tooltip("trial", "parent trial"),
                               Tooltip("x", "parent", "quantitative", ".4~g"), Tooltip("parent_rank", "rank there"),
                               Tooltip("y", "here", "quantitative", ".4~g"), Tooltip("rank", "rank here")})}};
  const int limit = spec["width"].get<int>() / 2 - 24;
  const auto tags = [&](const char* side, const char* align, int dx) {
    return json{{"transform", json::array({{{"filter", fmt::format("datum.side == '{}'", side)}}})},
                {"mark",
                 {{"type", "text"},
                  {"align", align},
                  {"baseline", "middle"},
                  {"dx", dx},
                  {"limit", limit},
                  {"fontSize", 10},
                  {"color", "#333"}}},
                {"encoding", {{"text", {{"field", "tag"}, {"type", "nominal"}}}}}};
  };
  spec["layer"] = json::array({{{"mark", {{"type", "point"}, {"filled", true}, {"size", 70}, {"color", "#4c78a8"}}}}});
  for (const char* side : {"left", "right"}) {
    const bool any = std::any_of(rows.begin(), rows.end(), [&](const json& row) { return row.at("side") == side; });
    if (any) spec["layer"].push_back(side == std::string("left") ? tags(side, "left", 8) : tags(side, "right", -8));
  }
  return spec;
}

json TrainingCurvesSpec(const std::vector<TrainingCurve>& curves, const std::string& series, CurveSource source,
                        bool mark_best_steps, const ChartOptions& options) {
  json spec = Base(options, 700, 280);
  SeenOrder substudies;
  json faint = json::array();
  json strong = json::array();
  json lone = json::array();  // the only point of its curve
  json best = json::array();
  std::vector<double> values;
  std::vector<double> strong_values;
  for (const TrainingCurve& curve : curves) {
    if (curve.series != series || curve.source != source || curve.points.empty()) continue;
    substudies.Add(curve.substudy);
    json& rows = curve.highlighted ? strong : faint;
    const std::size_t before = rows.size();
    for (const CurvePoint& point : curve.points) {
      if (!std::isfinite(point.value) || (options.log_steps && point.step < 1)) continue;
      values.push_back(point.value);
      if (curve.highlighted) strong_values.push_back(point.value);
      rows.push_back({{"trial", curve.trial}, {"substudy", curve.substudy}, {"step", point.step}, {"y", point.value}});
    }
    if (rows.size() == before + 1) {  // a line through one point draws nothing: a dot instead
      json dot = rows.back();
      dot["opacity"] = curve.highlighted ? 1.0 : 0.35;
      lone.push_back(std::move(dot));
    }
    if (mark_best_steps && curve.best_step) {
      // The curve's point nearest the best step (a long series is thinned, so the step itself may be gone).
      const auto nearest =
          std::min_element(curve.points.begin(), curve.points.end(), [&](const auto& a, const auto& b) {
            return std::llabs(a.step - *curve.best_step) < std::llabs(b.step - *curve.best_step);
          });
      if (std::isfinite(nearest->value)) {
        best.push_back({{"trial", curve.trial},
                        {"substudy", curve.substudy},
                        {"step", *curve.best_step},
                        {"y", nearest->value},
                        {"size", curve.highlighted ? 70 : 18},
                        {"opacity", curve.highlighted ? 1.0 : 0.35}});
      }
    }
  }
  const std::string metric = series.substr(series.find('/') + 1);
  const bool log_y =
      !values.empty() && AllPositive(values) &&
      (metric.find("loss") != std::string::npos || metric.find("norm") != std::string::npos) &&
      *std::max_element(values.begin(), values.end()) >= 10 * *std::min_element(values.begin(), values.end());
  const json x = StepAxis(options);
  json y = {{"field", "y"},
            {"type", "quantitative"},
            {"title", series + (log_y ? " (log scale)" : "")},
            {"scale", ContinuousScale(log_y)}};
  // When the other trials (diverging, or far behind) stretch the axis to more than twice what the highlighted ones
  // span, the axis covers the highlighted trials with a margin, and the rest is clipped at the plot's edge.
  double lo = values.empty() ? 0 : *std::min_element(values.begin(), values.end());
  double hi = values.empty() ? 1 : *std::max_element(values.begin(), values.end());
  bool zoomed = false;
  if (!strong_values.empty() && strong_values.size() < values.size()) {
    auto to_axis = [&](double v) { return log_y ? std::log10(v) : v; };
    auto from_axis = [&](double v) { return log_y ? std::pow(10.0, v) : v; };
    const double full = to_axis(hi) - to_axis(lo);
    const double part = to_axis(*std::max_element(strong_values.begin(), strong_values.end())) -
                        to_axis(*std::min_element(strong_values.begin(), strong_values.end()));
    const double margin = std::max(0.15 * part, 0.05 * full);
    if (full > 0 && part + 2 * margin < 0.5 * full) {
      const double zoom_lo =
          std::max(to_axis(lo), to_axis(*std::min_element(strong_values.begin(), strong_values.end())) - margin);
      const double zoom_hi =
          std::min(to_axis(hi), to_axis(*std::max_element(strong_values.begin(), strong_values.end())) + margin);
      lo = from_axis(zoom_lo);
      hi = from_axis(zoom_hi);
      y["scale"]["domain"] = {lo, hi};
      y["scale"]["nice"] = false;
      y["title"] = y["title"].get<std::string>() + ", zoomed";
      zoomed = true;
    }
  }
  if (log_y) y["axis"] = LogAxis(lo, hi);
  const json color = SubstudyColor(options, substudies.order());
  const json tooltip = json::array({Tooltip("trial", "trial"), Tooltip("substudy", "sub-study"),
                                    Tooltip("step", "step"), Tooltip("y", series.c_str(), "quantitative", ".4~g")});
  auto line = [&](json rows, double opacity, double width) {
    return Layer(std::move(rows), {{"type", "line"}, {"opacity", opacity}, {"strokeWidth", width}, {"clip", zoomed}},
                 {{"x", x},
                  {"y", y},
                  {"color", color},
                  {"detail", {{"field", "trial"}, {"type", "nominal"}}},
                  {"tooltip", tooltip}});
  };
  json layers = json::array();
  if (!faint.empty()) layers.push_back(line(std::move(faint), 0.22, 1));
  // Drawn last, over the others.
  // Per-step series are noisy: thinner lines keep the strong curves apart.
  const double strong_width = source == CurveSource::kTrainingSteps ? 1.3 : 2.2;
  if (!strong.empty() || layers.empty()) layers.push_back(line(std::move(strong), 1.0, strong_width));
  if (!lone.empty()) {
    layers.push_back(Layer(std::move(lone), {{"type", "point"}, {"filled", true}, {"size", 30}, {"clip", zoomed}},
                           {{"x", x},
                            {"y", y},
                            {"color", color},
                            {"opacity", {{"field", "opacity"}, {"type", "quantitative"}, {"scale", nullptr}}},
                            {"tooltip", tooltip}}));
  }
  if (!best.empty()) {
    json tip = json::array({Tooltip("trial", "trial"), Tooltip("substudy", "sub-study"), Tooltip("step", "best step"),
                            Tooltip("y", series.c_str(), "quantitative", ".4~g")});
    layers.push_back(Layer(std::move(best),
                           {{"type", "point"}, {"filled", true}, {"shape", "diamond"}, {"clip", zoomed}},
                           {{"x", x},
                            {"y", y},
                            {"color", color},
                            {"size", {{"field", "size"}, {"type", "quantitative"}, {"scale", nullptr}}},
                            {"opacity", {{"field", "opacity"}, {"type", "quantitative"}, {"scale", nullptr}}},
                            {"tooltip", tip}}));
  }
  spec["layer"] = std::move(layers);
  return spec;
}

json BestStepSpec(const std::vector<BestStepPoint>& points, std::int64_t max_train_steps, const Objective& objective,
                  const ChartOptions& options) {
  json spec = Base(options, 330, 210);
  SeenOrder substudies;
  json rows = json::array();
  for (const BestStepPoint& point : points) {
    substudies.Add(point.substudy);
    rows.push_back({{"trial", point.trial},
                    {"substudy", point.substudy},
                    {"step", point.best_step},
                    {"fraction", Number(point.fraction)},
                    {"y", Number(point.objective)}});
  }
  const auto max_steps = static_cast<double>(std::max<std::int64_t>(max_train_steps, 1));
  const json x = {{"field", "step"},
                  {"type", "quantitative"},
                  {"title", fmt::format("best step (max_train_steps = {})", max_train_steps)},
                  {"scale", {{"domain", {0, max_steps}}, {"nice", false}, {"padding", 8}}},
                  {"axis", IntegerAxis()}};
  const json zones = json::array(
      {{{"x", 0},
        {"x2", 0.1 * max_steps},
        {"zone", "first 10%: max_train_steps may be too high"},
        {"tag", "first 10%"}},
       {{"x", 0.75 * max_steps}, {"x2", max_steps}, {"zone", "last 25%: likely compute-bound"}, {"tag", "last 25%"}}});
  json layers = json::array();
  layers.push_back(Layer(zones, {{"type", "rect"}, {"color", "#f2c14e"}, {"opacity", 0.18}},
                         {{"x", {{"field", "x"}, {"type", "quantitative"}, {"scale", {{"domain", {0, max_steps}}}}}},
                          {"x2", {{"field", "x2"}}},
                          {"tooltip", json::array({Tooltip("zone", "region")})}}));
  layers.push_back(
      Layer(zones,
            {{"type", "text"},
             {"align", "left"},
             {"baseline", "top"},
             {"dx", 3},
             {"dy", 4},
             {"fontSize", 10},
             {"color", "#8a6d1c"}},
            {{"x", {{"field", "x"}, {"type", "quantitative"}}}, {"y", {{"value", 0}}}, {"text", {{"field", "tag"}}}}));
  layers.push_back(Layer(std::move(rows), {{"type", "point"}, {"filled", true}, {"size", 50}, {"opacity", 0.85}},
                         {{"x", x},
                          {"y",
                           {{"field", "y"},
                            {"type", "quantitative"},
                            {"title", "best " + ObjectiveTitle(objective)},
                            {"scale", {{"zero", false}, {"padding", 10}}}}},
                          {"color", SubstudyColor(options, substudies.order())},
                          {"tooltip", json::array({Tooltip("trial", "trial"), Tooltip("substudy", "sub-study"),
                                                   Tooltip("step", "best step"),
                                                   Tooltip("fraction", "of max_train_steps", "quantitative", ".0%"),
                                                   Tooltip("y", objective.Name().c_str(), "quantitative", ".4~g")})}}));
  spec["layer"] = std::move(layers);
  return spec;
}

json GradientNormCurvesSpec(const GradientNorms& norms, const ChartOptions& options) {
  json spec = Base(options, 330, 210);
  SeenOrder substudies;
  json rows = json::array();
  std::vector<double> values;
  json lone = json::array();  // the only point of its curve
  for (const TrainingCurve& curve : norms.curves) {
    substudies.Add(curve.substudy);
    const std::size_t before = rows.size();
    for (const CurvePoint& point : curve.points) {
      if (!std::isfinite(point.value) || (options.log_steps && point.step < 1)) continue;
      values.push_back(point.value);
      rows.push_back({{"trial", curve.trial}, {"substudy", curve.substudy}, {"step", point.step}, {"y", point.value}});
    }
    if (rows.size() == before + 1) lone.push_back(rows.back());
  }
  const bool log_y = !values.empty() && AllPositive(values);
  json y = {{"field", "y"},
            {"type", "quantitative"},
            {"title", log_y ? "gradient norm (log scale)" : "gradient norm"},
            {"scale", ContinuousScale(log_y)}};
  if (log_y) {
    y["axis"] =
        LogAxis(*std::min_element(values.begin(), values.end()), *std::max_element(values.begin(), values.end()));
  }
  json layers = json::array();
  layers.push_back(Layer(std::move(rows), {{"type", "line"}, {"opacity", 0.45}, {"strokeWidth", 1}},
                         {{"x", StepAxis(options)},
                          {"y", y},
                          {"color", SubstudyColor(options, substudies.order())},
                          {"detail", {{"field", "trial"}, {"type", "nominal"}}},
                          {"tooltip", json::array({Tooltip("trial", "trial"), Tooltip("substudy", "sub-study")})}}));
  if (!lone.empty()) {  // a line through one point draws nothing: a dot instead
    layers.push_back(Layer(std::move(lone), {{"type", "point"}, {"filled", true}, {"size", 30}},
                           {{"x", StepAxis(options)},
                            {"y", y},
                            {"color", SubstudyColor(options, substudies.order())},
                            {"tooltip", json::array({Tooltip("trial", "trial"), Tooltip("substudy", "sub-study")})}}));
  }
  if (norms.p90 && std::isfinite(*norms.p90) && (!log_y || *norms.p90 > 0)) {
    const json p90 = json::array({{{"y", *norms.p90}, {"label", fmt::format("90th percentile {:.3g}", *norms.p90)}}});
    layers.push_back(Layer(
        p90, {{"type", "rule"}, {"color", kThresholdColor}, {"strokeDash", {6, 4}}, {"strokeWidth", 1.5}},
        {{"y", {{"field", "y"}, {"type", "quantitative"}}}, {"tooltip", json::array({Tooltip("label", "rule")})}}));
  }
  spec["layer"] = std::move(layers);
  return spec;
}

json GradientNormHistogramSpec(const GradientNorms& norms, const ChartOptions& options) {
  json spec = Base(options, 330, 210);
  json rows = json::array();
  bool positive = true;
  double lo = std::numeric_limits<double>::infinity();
  double hi = 0;
  for (const HistogramBin& bin : norms.histogram) {
    if (!std::isfinite(bin.lower) || !std::isfinite(bin.upper)) continue;
    positive = positive && bin.lower > 0;
    lo = std::min(lo, bin.lower);
    hi = std::max(hi, bin.upper);
    rows.push_back({{"lower", bin.lower}, {"upper", bin.upper}, {"count", bin.count}});
  }
  const bool log_x = positive && !rows.empty();
  json x_scale = ContinuousScale(log_x);
  x_scale["nice"] = false;
  json x = {{"field", "lower"},
            {"type", "quantitative"},
            {"title", log_x ? "gradient norm before clipping (log scale)" : "gradient norm before clipping"},
            {"scale", x_scale},
            {"axis", {{"format", "~g"}}}};
  if (log_x) x["axis"] = LogAxis(lo, hi);
  json layers = json::array();
  layers.push_back(Layer(
      std::move(rows), {{"type", "rect"}, {"color", "#4c78a8"}, {"stroke", "white"}, {"strokeWidth", 0.5}},
      {{"x", x},
       {"x2", {{"field", "upper"}}},
       {"y", {{"field", "count"}, {"type", "quantitative"}, {"title", "steps"}, {"axis", IntegerAxis()}}},
       {"tooltip",
        json::array({Tooltip("lower", "from", "quantitative", ".3~g"), Tooltip("upper", "to", "quantitative", ".3~g"),
                     Tooltip("count", "steps", "quantitative")})}}));
  if (norms.p90 && std::isfinite(*norms.p90) && (!log_x || *norms.p90 > 0)) {
    const json p90 =
        json::array({{{"x", *norms.p90},
                      {"label", fmt::format("90th percentile {:.3g}: suggested clipping threshold", *norms.p90)}}});
    layers.push_back(Layer(
        p90, {{"type", "rule"}, {"color", kThresholdColor}, {"strokeDash", {6, 4}}, {"strokeWidth", 1.5}},
        {{"x", {{"field", "x"}, {"type", "quantitative"}}}, {"tooltip", json::array({Tooltip("label", "rule")})}}));
    // The rule's label on the side with room: left of a rule in the right part of the axis.
    const auto at = [&](double v) { return log_x ? std::log10(v) : v; };
    const bool right_part = hi > lo && at(*norms.p90) > at(lo) + 0.6 * (at(hi) - at(lo));
    layers.push_back(Layer(p90,
                           {{"type", "text"},
                            {"align", right_part ? "right" : "left"},
                            {"baseline", "top"},
                            {"dx", right_part ? -4 : 4},
                            {"dy", 4},
                            {"fontSize", 11},
                            {"color", kThresholdColor}},
                           {{"x", {{"field", "x"}, {"type", "quantitative"}}},
                            {"y", {{"value", 0}}},
                            {"text", {{"value", fmt::format("p90 = {:.3g}", *norms.p90)}}}}));
  }
  spec["layer"] = std::move(layers);
  return spec;
}

json BootstrapSpec(const BootstrapPlot& plot, const Objective& objective, const ChartOptions& options) {
  json spec = Base(options, 330, 210);
  json rows = json::array();
  int max_budget = 1;
  for (const BootstrapBox& box : plot.boxes) {
    max_budget = std::max(max_budget, box.budget);
    rows.push_back({{"budget", box.budget},
                    {"min", Number(box.min)},
                    {"q1", Number(box.q1)},
                    {"median", Number(box.median)},
                    {"q3", Number(box.q3)},
                    {"max", Number(box.max)}});
  }
  const int width = spec["width"].get<int>();
  // Beyond 50 trials the budgets grow by 5% (BootstrapBudgets): a log axis spaces their boxes evenly.
  const bool log_budgets = max_budget > 50;
  const double box_width =
      std::clamp(0.6 * width / static_cast<double>(log_budgets ? plot.boxes.size() : max_budget), 1.0, 16.0);
  json x = {{"field", "budget"}, {"type", "quantitative"}, {"title", "trials in the study (resampled)"}};
  if (log_budgets) {
    x["scale"] = {{"type", "log"}, {"domain", {0.8, max_budget * 1.25}}, {"nice", false}};
    x["axis"] = LogAxis(1, max_budget);
  } else {
    x["scale"] = {{"domain", {0.5, max_budget + 0.5}}, {"nice", false}, {"zero", false}};
    x["axis"] = IntegerAxis();
  }
  spec["data"] = {{"values", std::move(rows)}};
  spec["encoding"] = {
      {"x", x},
      {"tooltip",
       json::array({Tooltip("budget", "trials", "quantitative"), Tooltip("min", "min", "quantitative", ".4~g"),
                    Tooltip("q1", "25%", "quantitative", ".4~g"), Tooltip("median", "median", "quantitative", ".4~g"),
                    Tooltip("q3", "75%", "quantitative", ".4~g"), Tooltip("max", "max", "quantitative", ".4~g")})}};
  const json y_title = "best " + ObjectiveTitle(objective);
  spec["layer"] = json::array(
      {{{"mark", {{"type", "rule"}, {"color", "#4c78a8"}}},
        {"encoding",
         {{"y", {{"field", "min"}, {"type", "quantitative"}, {"title", y_title}, {"scale", {{"zero", false}}}}},
          {"y2", {{"field", "max"}}}}}},
       {{"mark", {{"type", "bar"}, {"color", "#9ecae9"}, {"stroke", "#4c78a8"}, {"size", box_width}}},
        {"encoding", {{"y", {{"field", "q1"}, {"type", "quantitative"}}}, {"y2", {{"field", "q3"}}}}}},
       {{"mark",
         {{"type", "tick"}, {"orient", "horizontal"}, {"color", "#1f3b5a"}, {"thickness", 2}, {"size", box_width}}},
        {"encoding", {{"y", {{"field", "median"}, {"type", "quantitative"}}}}}}});
  return spec;
}

json EqualBudgetSpec(const StudyComparison& comparison, const ChartOptions& options) {
  json spec = Base(options, 330, 240);
  json rows = json::array();
  for (const ComparedStudy* study : {&comparison.a, &comparison.b}) {
    if (study->completed == 0) continue;
    const BootstrapBox& box = study->at_equal_budget;
    rows.push_back({{"study", study->name},
                    {"min", Number(box.min)},
                    {"q1", Number(box.q1)},
                    {"median", Number(box.median)},
                    {"q3", Number(box.q3)},
                    {"max", Number(box.max)},
                    {"completed", study->completed}});
  }
  spec["data"] = {{"values", std::move(rows)}};
  spec["encoding"] = {
      {"x", {{"field", "study"}, {"type", "nominal"}, {"title", nullptr}, {"axis", {{"labelAngle", 0}}}}},
      {"tooltip",
       json::array({Tooltip("study", "study"), Tooltip("completed", "completed trials"),
                    Tooltip("min", "min", "quantitative", ".4~g"), Tooltip("q1", "25%", "quantitative", ".4~g"),
                    Tooltip("median", "median", "quantitative", ".4~g"), Tooltip("q3", "75%", "quantitative", ".4~g"),
                    Tooltip("max", "max", "quantitative", ".4~g")})}};
  const json y_title = fmt::format("best {} of {} trials", ObjectiveTitle(comparison.objective), comparison.budget);
  spec["layer"] = json::array(
      {{{"mark", {{"type", "rule"}, {"color", "#4c78a8"}}},
        {"encoding",
         {{"y", {{"field", "min"}, {"type", "quantitative"}, {"title", y_title}, {"scale", {{"zero", false}}}}},
          {"y2", {{"field", "max"}}}}}},
       {{"mark", {{"type", "bar"}, {"color", "#9ecae9"}, {"stroke", "#4c78a8"}, {"size", 36}}},
        {"encoding", {{"y", {{"field", "q1"}, {"type", "quantitative"}}}, {"y2", {{"field", "q3"}}}}}},
       {{"mark", {{"type", "tick"}, {"orient", "horizontal"}, {"color", "#1f3b5a"}, {"thickness", 2}, {"size", 36}}},
        {"encoding", {{"y", {{"field", "median"}, {"type", "quantitative"}}}}}}});
  return spec;
}

json StepBudgetSpec(const StepBudget& budget, std::int64_t max_train_steps, const ChartOptions& options) {
  json spec = Base(options, 420, 260);
  json rows = json::array();
  for (const FitRow& row : budget.rows) {
    const bool fits = row.first_fit_step.has_value();
    rows.push_back({{"lr", row.learning_rate},
                    {"y", fits ? *row.first_fit_step : max_train_steps},
                    {"fits", fits ? "fits" : fmt::format("not within {} steps", max_train_steps)},
                    {"trial", row.trial},
                    {"last", Number(row.last_value)},
                    {"fastest", budget.fastest_trial && *budget.fastest_trial == row.trial}});
  }
  spec["data"] = {{"values", rows}};
  spec["encoding"] = {
      {"x",
       {{"field", "lr"},
        {"type", "quantitative"},
        {"title", "learning rate (constant)"},
        {"scale", {{"type", "log"}}},
        {"axis",
         [&] {
           double lo = std::numeric_limits<double>::infinity(), hi = 0;
           for (const FitRow& row : budget.rows) {
             lo = std::min(lo, row.learning_rate);
             hi = std::max(hi, row.learning_rate);
           }
           return LogAxis(lo, hi);
         }()}}},
      {"y",
       {{"field", "y"},
        {"type", "quantitative"},
        {"title", "first step that fits " + budget.condition.Text()},
        {"scale", {{"zero", true}}},
        {"axis", IntegerAxis()}}},
      {"tooltip", json::array({Tooltip("trial", "trial"), Tooltip("lr", "learning rate", "quantitative", ".3~g"),
                               Tooltip("y", "first fitting step"), Tooltip("fits", "fits?"),
                               Tooltip("last", "last value", "quantitative", ".4~g")})}};
  spec["layer"] = json::array(
      {{{"mark", {{"type", "point"}, {"size", 80}, {"filled", true}}},
        {"encoding",
         {{"shape", {{"field", "fits"}, {"type", "nominal"}, {"title", nullptr}}},
          {"color",
           {{"condition", {{"test", "datum.fastest"}, {"value", kThresholdColor}}}, {"value", "#4c78a8"}}}}}}});
  // The line through the learning rates that fit, when any does: Vega warns of the infinite extent of an empty layer.
  if (std::any_of(budget.rows.begin(), budget.rows.end(), [](const FitRow& r) { return r.first_fit_step; })) {
    const json line = {{"mark", {{"type", "line"}, {"color", "#4c78a8"}, {"strokeWidth", 1.5}}},
                       {"transform", json::array({{{"filter", "datum.fits == 'fits'"}}})}};
    spec["layer"].insert(spec["layer"].begin(), line);
  }
  return spec;
}

json InteractionSpec(const InteractionPlot& plot, const Objective& objective, const ChartOptions& options) {
  json spec = Base(options, 330, 260);
  json rows = json::array();
  for (const InteractionPoint& point : plot.points) {
    rows.push_back({{"trial", point.trial},
                    {"substudy", point.substudy},
                    {"x", Number(point.x)},
                    {"y", Number(point.y)},
                    {"objective", Number(point.objective)},
                    {"infeasible", point.infeasible}});
  }
  const auto axis = [](const AxisPlot& param, const char* field) {
    json encoding = {{"field", field}, {"type", "quantitative"}, {"title", param.param_name}};
    if (param.log_scale) {
      encoding["scale"] = {{"type", "log"}};
    } else {
      encoding["scale"] = {{"zero", false}};
    }
    return encoding;
  };
  const json tooltip = json::array({Tooltip("trial", "trial"), Tooltip("substudy", "sub-study"),
                                    Tooltip("x", plot.x_axis.param_name.c_str(), "quantitative", ".4~g"),
                                    Tooltip("y", plot.y_axis.param_name.c_str(), "quantitative", ".4~g"),
                                    Tooltip("objective", objective.Name().c_str(), "quantitative", ".4~g")});
  spec["data"] = {{"values", rows}};
  spec["encoding"] = {{"x", axis(plot.x_axis, "x")}, {"y", axis(plot.y_axis, "y")}, {"tooltip", tooltip}};
  // Better trials darker, whichever way the objective goes.
  const json color = {{"field", "objective"},
                      {"type", "quantitative"},
                      {"title", ObjectiveTitle(objective)},
                      {"scale", {{"scheme", "viridis"}, {"reverse", objective.direction == Direction::kMaximize}}}};
  // A layer is added only when it has points: Vega warns about the extent of an empty one.
  spec["layer"] = json::array();
  const auto any = [&](bool infeasible) {
    return std::any_of(plot.points.begin(), plot.points.end(),
                       [&](const InteractionPoint& p) { return p.infeasible == infeasible; });
  };
  if (any(false) || !any(true)) {
    const json feasible = {{"transform", json::array({{{"filter", "!datum.infeasible"}}})},
                           {"mark", {{"type", "point"}, {"filled", true}, {"size", 55}, {"opacity", 0.9}}},
                           {"encoding", {{"color", color}}}};
    spec["layer"].push_back(feasible);
  }
  if (any(true)) {
    const json infeasible = {
        {"transform", json::array({{{"filter", "datum.infeasible"}}})},
        {"mark", {{"type", "point"}, {"shape", "cross"}, {"size", 55}, {"color", kInfeasibleColor}, {"filled", true}}}};
    spec["layer"].push_back(infeasible);
  }
  return spec;
}

json ThroughputSpec(const Throughput& throughput, ThroughputMeasure measure, const ChartOptions& options) {
  static_assert(kTimedExamples == 1e6, "the axis says a million");
  json spec = Base(options, 420, 260);
  json rows = json::array();
  const ThroughputRow* first = nullptr;
  for (const ThroughputRow& row : throughput.rows) {
    if (!row.examples_per_second) continue;
    if (first == nullptr) first = &row;
    // Perfect scaling from the smallest batch size: examples per second grow with the batch, time per step stays.
    const double scale = static_cast<double>(row.batch_size) / static_cast<double>(first->batch_size);
    double y = *row.examples_per_second, ideal = *first->examples_per_second * scale;
    if (measure == ThroughputMeasure::kStepTime) {
      y = *row.step_time;
      ideal = *first->step_time;
    } else if (measure == ThroughputMeasure::kTimeForExamples) {
      y = kTimedExamples / *row.examples_per_second;
      ideal = kTimedExamples / *first->examples_per_second / scale;
    }
    rows.push_back({{"batch", row.batch_size},
                    {"y", y},
                    {"ideal", ideal},
                    {"efficiency", Number(row.efficiency)},
                    {"wait", Number(row.data_wait_share)},
                    {"repeats", row.repeats},
                    {"repeat_spread", Number(row.repeat_spread)},
                    {"trial", row.trial}});
  }
  spec["data"] = {{"values", rows}};
  const std::string y_title = measure == ThroughputMeasure::kStepTime          ? "seconds per step (median)"
                              : measure == ThroughputMeasure::kTimeForExamples ? "seconds per million examples"
                                                                               : "examples per second";
  spec["encoding"] = {
      {"x",
       {{"field", "batch"},
        {"type", "quantitative"},
        {"title", "batch size"},
        {"scale", {{"type", "log"}, {"base", 2}}},
        {"axis",
         {{"values",
           [&] {
             json values = json::array();
             for (const ThroughputRow& row : throughput.rows) values.push_back(row.batch_size);
             return values;
           }()}}}}},
      {"tooltip",
       json::array({Tooltip("batch", "batch size"), Tooltip("y", y_title.c_str(), "quantitative", ".4~g"),
                    Tooltip("efficiency", "scaling of the doubling", "quantitative", ".2f"),
                    Tooltip("wait", "share waiting for data", "quantitative", ".1%"),
                    Tooltip("repeats", "measurements"), Tooltip("repeat_spread", "their spread", "quantitative", ".1%"),
                    Tooltip("trial", "first trial")})}};
  spec["layer"] = json::array(
      {{{"mark", {{"type", "line"}, {"color", "#888"}, {"strokeDash", {4, 3}}}},
        {"encoding", {{"y", {{"field", "ideal"}, {"type", "quantitative"}}}}}},
       {{"mark", {{"type", "line"}, {"color", "#4c78a8"}, {"point", true}}},
        {"encoding",
         {{"y", {{"field", "y"}, {"type", "quantitative"}, {"title", y_title}, {"scale", {{"type", "log"}}}}}}}}});
  return spec;
}

json StabilityCurvesSpec(const std::vector<LabelledCurve>& curves, const ChartOptions& options) {
  json spec = Base(options, 700, 300);
  json rows = json::array();
  json rises = json::array();
  json labels = json::array();
  std::vector<double> values;
  json lone = json::array();  // the only point of its run
  for (const LabelledCurve& curve : curves) {
    labels.push_back(curve.label);
    const std::size_t before = rows.size();
    for (const auto& [step, loss] : curve.points) {
      if (step < 1 || !std::isfinite(loss)) continue;
      values.push_back(loss);
      rows.push_back({{"run", curve.label}, {"trial", curve.trial}, {"step", step}, {"y", loss}});
    }
    if (rows.size() == before + 1) lone.push_back(rows.back());
    if (!curve.rise_step || *curve.rise_step < 1) continue;
    // The rise marked on the curve: its point nearest the step.
    const auto nearest = std::min_element(curve.points.begin(), curve.points.end(), [&](const auto& a, const auto& b) {
      return std::llabs(a.first - *curve.rise_step) < std::llabs(b.first - *curve.rise_step);
    });
    if (nearest != curve.points.end() && std::isfinite(nearest->second) && nearest->second > 0) {
      rises.push_back(
          {{"run", curve.label}, {"trial", curve.trial}, {"step", *curve.rise_step}, {"y", nearest->second}});
    }
  }
  const bool log_y = !values.empty() && AllPositive(values);
  ChartOptions log_steps = options;
  log_steps.log_steps = true;
  const json color = {{"field", "run"},
                      {"type", "nominal"},
                      {"title", nullptr},
                      {"scale", {{"domain", labels}}},
                      {"legend", {{"orient", "bottom"}, {"columns", 1}, {"labelLimit", 640}}}};
  const json y = {{"field", "y"},
                  {"type", "quantitative"},
                  {"title", log_y ? "training loss (log scale)" : "training loss"},
                  {"scale", ContinuousScale(log_y)}};
  const json tooltip = json::array({Tooltip("run", "run"), Tooltip("trial", "trial"), Tooltip("step", "step"),
                                    Tooltip("y", "training loss", "quantitative", ".4~g")});
  json layers = json::array();
  layers.push_back(Layer(rows, {{"type", "line"}, {"strokeWidth", 1.2}, {"opacity", 0.85}},
                         {{"x", StepAxis(log_steps)}, {"y", y}, {"color", color}, {"tooltip", tooltip}}));
  if (!lone.empty()) {  // a line through one point draws nothing: a dot instead
    layers.push_back(Layer(std::move(lone), {{"type", "point"}, {"filled", true}, {"size", 30}},
                           {{"x", StepAxis(log_steps)}, {"y", y}, {"color", color}, {"tooltip", tooltip}}));
  }
  if (!rises.empty()) {
    layers.push_back(
        Layer(rises, {{"type", "point"}, {"shape", "triangle-up"}, {"size", 90}, {"filled", true}},
              {{"x", {{"field", "step"}, {"type", "quantitative"}}},
               {"y", {{"field", "y"}, {"type", "quantitative"}}},
               {"color", color},
               {"tooltip", json::array({Tooltip("run", "run"), Tooltip("step", "the loss rises from")})}}));
  }
  spec["layer"] = std::move(layers);
  return spec;
}

// 420 wide: with the phases' labels beside it, the chart fits a report's column (about 530 px).
json TimeTotalsSpec(const TimeSplit& total, const ChartOptions& options) {
  json spec = Base(options, 420, 240);
  const double wall = TotalSeconds(total);
  json rows = json::array();
  json order = json::array();
  for (const TimePhase& phase : TimePhases()) {
    order.push_back(phase.label);
    const auto it = total.find(phase.key);
    const double seconds = it == total.end() ? 0.0 : it->second;
    rows.push_back({{"phase", phase.label},
                    {"seconds", seconds},
                    {"share", wall > 0 ? json(seconds / wall) : json()},
                    {"part", phase.in_total ? "part of the trials' time" : "inside or alongside it"}});
  }
  spec["data"] = {{"values", rows}};
  spec["mark"] = {{"type", "bar"}};
  spec["encoding"] = {
      {"y", {{"field", "phase"}, {"type", "nominal"}, {"sort", order}, {"title", nullptr}}},
      {"x", {{"field", "seconds"}, {"type", "quantitative"}, {"title", "seconds, all trials"}}},
      {"color",
       {{"field", "part"},
        {"type", "nominal"},
        {"scale",
         {{"domain", {"part of the trials' time", "inside or alongside it"}}, {"range", {"#4c78a8", "#b8cbe0"}}}},
        {"legend", {{"orient", "bottom"}, {"title", nullptr}}}}},
      {"tooltip", json::array({Tooltip("phase", "phase"), Tooltip("seconds", "seconds", "quantitative", ".3~g"),
                               Tooltip("share", "of the trials' time", "quantitative", ".0%")})}};
  return spec;
}

json TrialTimesSpec(const std::vector<TrialRecord>& trials, const ChartOptions& options) {
  json spec = Base(options, 420, std::clamp(static_cast<int>(trials.size()) * 14, 120, 900));
  json rows = json::array();
  json order = json::array();
  for (const TimePhase& phase : TimePhases()) {
    if (phase.in_total) order.push_back(phase.label);
  }
  for (const TrialRecord& trial : trials) {
    int index = 0;
    for (const TimePhase& phase : TimePhases()) {
      if (!phase.in_total) continue;
      ++index;
      const auto it = trial.time_split.find(phase.key);
      if (it == trial.time_split.end() || !(it->second > 0)) continue;
      rows.push_back({{"trial", trial.number}, {"phase", phase.label}, {"order", index}, {"seconds", it->second}});
    }
  }
  spec["data"] = {{"values", rows}};
  spec["mark"] = {{"type", "bar"}};
  spec["encoding"] = {
      {"y", {{"field", "trial"}, {"type", "ordinal"}, {"title", "trial"}}},
      {"x", {{"field", "seconds"}, {"type", "quantitative"}, {"stack", "zero"}, {"title", "seconds"}}},
      {"color",
       {{"field", "phase"}, {"type", "nominal"}, {"scale", {{"domain", order}}}, {"legend", {{"orient", "bottom"}}}}},
      {"order", {{"field", "order"}, {"type", "quantitative"}}},
      {"tooltip", json::array({Tooltip("trial", "trial"), Tooltip("phase", "phase"),
                               Tooltip("seconds", "seconds", "quantitative", ".3~g")})}};
  return spec;
}

json ParetoSpec(const ParetoView& view, const Objective& objective, const ChartOptions& options) {
  json spec = Base(options, 420, 260);
  const ParetoCostInfo& cost = CostInfo(view.cost);
  // Bytes read better as GiB; every other cost is drawn as recorded.
  const bool bytes = view.cost == ParetoCost::kPeakGpuMemory;
  const double unit = bytes ? 1024.0 * 1024.0 * 1024.0 : 1.0;
  SeenOrder substudies;
  json points = json::array();
  json front = json::array();
  json infeasible = json::array();
  double lo = std::numeric_limits<double>::infinity(), hi = 0;
  for (const ParetoSubStudy& sub : view.substudies) {
    for (const ParetoPoint& point : sub.points) {
      const double x = point.cost / unit;
      lo = std::min(lo, x);
      hi = std::max(hi, x);
      json row = {{"trial", point.trial},
                  {"substudy", sub.substudy},
                  {"x", Number(x)},
                  {"y", Number(point.objective)},
                  {"front", point.infeasible ? "infeasible" : (point.on_front ? "on the front" : "dominated")}};
      if (point.infeasible) {
        infeasible.push_back(std::move(row));
        continue;
      }
      substudies.Add(sub.substudy);
      if (point.on_front) front.push_back(row);
      points.push_back(std::move(row));
    }
  }
  // A cost spanning a decade or more is drawn on a log axis.
  const bool log = hi > 0 && lo > 0 && hi / lo >= 10;
  json scale = ContinuousScale(log);
  json x = {{"field", "x"},
            {"type", "quantitative"},
            {"title", fmt::format("{}{}{} ({} is cheaper)", cost.label, bytes ? ", GiB" : "", log ? ", log scale" : "",
                                  cost.higher_is_better ? "higher" : "lower")},
            {"scale", scale}};
  if (log) x["axis"] = LogAxis(lo, hi);
  if (view.cost == ParetoCost::kParameters) x["axis"]["format"] = "~s";
  json y = {{"field", "y"},
            {"type", "quantitative"},
            {"title", ObjectiveTitle(objective)},
            {"scale", {{"zero", false}, {"nice", true}, {"padding", 10}}}};
  if (points.empty()) y["scale"]["domain"] = {0, 1};
  const json color = SubstudyColor(options, substudies.order());
  const json tooltip = json::array(
      {Tooltip("trial", "trial"), Tooltip("substudy", "sub-study"),
       Tooltip("x", fmt::format("{}{}", cost.label, bytes ? " (GiB)" : "").c_str(), "quantitative", ",.4~r"),
       Tooltip("y", objective.Name().c_str(), "quantitative", ".4~g"), Tooltip("front", "")});
  json layers = json::array();
  if (!front.empty()) {
    // The front as a staircase: every point beyond a step (dearer and worse) is dominated. Sorted by x, the corner
    // after a point comes first along x for a cost where lower is cheaper, first along y for one where higher is.
    layers.push_back(
        Layer(std::move(front),
              {{"type", "line"},
               {"interpolate", cost.higher_is_better ? "step-before" : "step-after"},
               {"strokeWidth", 1.5},
               {"opacity", 0.8}},
              {{"x", x}, {"y", y}, {"color", color}, {"order", {{"field", "x"}, {"type", "quantitative"}}}}));
  }
  // Dominated trials faint and small, the front's strong on top of them.
  json dominated = json::array();
  json strong = json::array();
  for (json& row : points) (row["front"] == "on the front" ? strong : dominated).push_back(std::move(row));
  const json encoding = {{"x", x}, {"y", y}, {"color", color}, {"tooltip", tooltip}};
  // A layer without data draws the axes of a chart of nothing, and makes Vega warn beside other layers.
  if (!dominated.empty() || (strong.empty() && infeasible.empty())) {
    layers.push_back(
        Layer(std::move(dominated), {{"type", "point"}, {"filled", true}, {"size", 35}, {"opacity", 0.35}}, encoding));
  }
  if (!strong.empty()) {
    layers.push_back(
        Layer(std::move(strong), {{"type", "point"}, {"filled", true}, {"size", 60}, {"opacity", 0.95}}, encoding));
  }
  if (!infeasible.empty()) {
    // No objective to place them at: along the edge where the worse values are, as red crosses.
    const int height = spec["height"].get<int>();
    layers.push_back(Layer(std::move(infeasible),
                           {{"type", "point"},
                            {"shape", "cross"},
                            {"filled", true},
                            {"size", 90},
                            {"opacity", 0.9},
                            {"color", kInfeasibleColor}},
                           {{"x", x},
                            {"y", {{"value", objective.direction == Direction::kMinimize ? 6 : height - 6}}},
                            {"tooltip", tooltip}}));
  }
  spec["layer"] = std::move(layers);
  return spec;
}

}  // namespace dltune
