#include "vega_specs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

Objective ErrorRate() { return {.split = "valid", .metric = "error_rate", .direction = Direction::kMinimize}; }

// Every field an encoding reads, anywhere in the spec: they must be the specs' own words, never user text.
void CollectFields(const json& node, std::vector<std::string>& fields) {
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      if (key == "field" && value.is_string()) fields.push_back(value.get<std::string>());
      if (key != "values") CollectFields(value, fields);  // data values may hold anything
    }
  } else if (node.is_array()) {
    for (const auto& item : node) CollectFields(item, fields);
  }
}

// The layer whose mark has `type` and, when given, `color`.
const json* FindLayer(const json& spec, const std::string& type, const std::string& color = "") {
  for (const auto& layer : spec.at("layer")) {
    const json& mark = layer.at("mark");
    if (mark.at("type") == type && (color.empty() || mark.value("color", "") == color)) return &layer;
  }
  return nullptr;
}

AxisPlot LearningRatePlot() {
  AxisPlot plot{.param_id = "lr", .param_name = "learning_rate", .log_scale = true, .lower = 1e-4, .upper = 1.0};
  plot.points = {
      {.trial = 0, .substudy = "optimizer=adam", .value = 0.01, .position = 0.01, .objective = 0.2},
      {.trial = 1, .substudy = "optimizer=<b>", .value = 0.1, .position = 0.1, .objective = 0.1},
      {.trial = 2, .substudy = "optimizer=adam", .value = 0.5, .position = 0.5, .objective = 0.7, .infeasible = true},
      {.trial = 3, .substudy = "optimizer=adam", .value = 0.9, .position = 0.9, .infeasible = true},
      {.trial = 4, .substudy = "optimizer=adam", .value = 0.05, .position = 0.05},  // running: not drawn
  };
  return plot;
}

TEST(AxisPlotSpec, LogAxisBoundsAndInfeasibleTrials) {
  const json spec = AxisPlotSpec(LearningRatePlot(), ErrorRate(), {.substudies = {"optimizer=adam", "optimizer=<b>"}});
  EXPECT_EQ(spec.at("$schema"), "https://vega.github.io/schema/vega-lite/v6.json");
  const json* bounds = FindLayer(spec, "rule");
  ASSERT_NE(bounds, nullptr);
  EXPECT_EQ(bounds->at("data").at("values").size(), 2u);
  EXPECT_DOUBLE_EQ(bounds->at("data").at("values")[0].at("x").get<double>(), 1e-4);

  const json* completed = FindLayer(spec, "point");
  ASSERT_NE(completed, nullptr);
  EXPECT_EQ(completed->at("encoding").at("x").at("scale").at("type"), "log");
  EXPECT_EQ(completed->at("data").at("values").size(), 2u);
  EXPECT_EQ(completed->at("encoding").at("color").at("scale").at("domain"),
            json::array({"optimizer=adam", "optimizer=<b>"}));

  // Infeasible: one at its objective, one without any along the top (worse) edge; both red crosses.
  std::vector<const json*> infeasible;
  for (const auto& layer : spec.at("layer")) {
    if (layer.at("mark").value("color", "") == "#d62728") infeasible.push_back(&layer);
  }
  ASSERT_EQ(infeasible.size(), 2u);
  EXPECT_EQ(infeasible[0]->at("data").at("values")[0].at("trial"), 2);
  EXPECT_EQ(infeasible[0]->at("data").at("values")[0].at("state"), "infeasible");
  EXPECT_EQ(infeasible[1]->at("data").at("values")[0].at("trial"), 3);
  EXPECT_EQ(infeasible[1]->at("encoding").at("y").at("value"), 6);
}

TEST(AxisPlotSpec, CategoricalParamsUseTheirChoicesAsDomain) {
  AxisPlot plot{.param_id = "opt", .param_name = "optimizer", .categorical = true, .categories = {"sgd", "adam"}};
  plot.points = {{.trial = 0, .substudy = "all", .value = std::string("adam"), .position = 1, .objective = 0.3}};
  const json spec = AxisPlotSpec(plot, ErrorRate());
  const json* points = FindLayer(spec, "point");
  ASSERT_NE(points, nullptr);
  EXPECT_EQ(points->at("encoding").at("x").at("type"), "nominal");
  EXPECT_EQ(points->at("encoding").at("x").at("scale").at("domain"), json::array({"sgd", "adam"}));
  EXPECT_EQ(points->at("data").at("values")[0].at("x"), "adam");
  EXPECT_FALSE(points->at("encoding").at("color").contains("field") &&
               points->at("encoding").at("color").at("legend") != nullptr);  // one sub-study: no legend
}

TEST(AxisPlotSpec, NoObjectiveYetGivesAnEmptyAxisNotAScaleOverNothing) {
  // A study that just started: its running trial has no best yet. Vega would warn "Infinite extent" (and the
  // browser tests fail on warnings) for a y scale over no values.
  AxisPlot plot = LearningRatePlot();
  plot.points = {plot.points.back()};
  const json spec = AxisPlotSpec(plot, ErrorRate());
  const json* points = FindLayer(spec, "point");
  ASSERT_NE(points, nullptr);
  EXPECT_TRUE(points->at("data").at("values").empty());
  EXPECT_EQ(points->at("encoding").at("y").at("scale").at("domain"), json::array({0, 1}));
  // With values, the scale is left to the data.
  const json drawn = AxisPlotSpec(LearningRatePlot(), ErrorRate());
  EXPECT_FALSE(FindLayer(drawn, "point")->at("encoding").at("y").at("scale").contains("domain"));

  IsolationPlot isolation{.param_id = "opt", .param_name = "optimizer", .categorical = true};
  isolation.points = {{.label = "adam", .position = 0, .trials = 1}};
  EXPECT_EQ(IsolationPlotSpec(isolation, ErrorRate(), {}).at("encoding").at("y").at("scale").at("domain"),
            json::array({0, 1}));
}

TEST(VegaSpecs, UserTextStaysInDataAndTitles) {
  const std::string hostile = "'] + alert(1) + datum['";
  AxisPlot plot = LearningRatePlot();
  plot.param_name = hostile;
  for (auto& point : plot.points) point.substudy = hostile;
  std::vector<TrainingCurve> curves = {{.trial = 0,
                                        .substudy = hostile,
                                        .series = "valid/error_rate",
                                        .points = {{1, 0.5}, {2, 0.4}},
                                        .highlighted = true,
                                        .best_step = 2}};
  std::vector<json> specs = {AxisPlotSpec(plot, ErrorRate()),
                             TrainingCurvesSpec(curves, "valid/error_rate", CurveSource::kEvaluation, true)};
  for (const json& spec : specs) {
    std::vector<std::string> fields;
    CollectFields(spec, fields);
    for (const auto& field : fields) EXPECT_THAT(field, Not(HasSubstr("alert"))) << spec.dump();
    // No expression anywhere: no filter, calculate or labelExpr strings built from data.
    EXPECT_THAT(spec.dump(), Not(HasSubstr("\"expr\"")));
    EXPECT_THAT(spec.dump(), Not(HasSubstr("labelExpr")));
  }
}

TEST(TrainingCurvesSpec, HighlightedDrawnStrongOverFaintWithBestStepsMarked) {
  std::vector<TrainingCurve> curves = {
      {.trial = 0,
       .substudy = "a",
       .series = "valid/error_rate",
       .points = {{0, 0.9}, {100, 0.3}, {200, 0.35}},
       .highlighted = true,
       .best_step = 100},
      {.trial = 1,
       .substudy = "a",
       .series = "valid/error_rate",
       .points = {{0, 0.9}, {100, 0.6}},
       .highlighted = false,
       .best_step = 90},
      {.trial = 0,
       .substudy = "a",
       .series = "train/loss",
       .source = CurveSource::kTrainingSteps,
       .points = {{0, 2.0}}},
  };
  const json spec = TrainingCurvesSpec(curves, "valid/error_rate", CurveSource::kEvaluation, true);
  const json& layers = spec.at("layer");
  ASSERT_EQ(layers.size(), 3u);
  EXPECT_LT(layers[0].at("mark").at("opacity").get<double>(), 0.5);  // faint first
  EXPECT_EQ(layers[0].at("data").at("values").size(), 2u);
  EXPECT_EQ(layers[1].at("mark").at("opacity").get<double>(), 1.0);  // strong on top
  EXPECT_EQ(layers[1].at("data").at("values").size(), 3u);
  const json& best = layers[2].at("data").at("values");
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].at("step"), 100);
  EXPECT_DOUBLE_EQ(best[0].at("y").get<double>(), 0.3);
  EXPECT_DOUBLE_EQ(best[1].at("y").get<double>(), 0.6);  // the nearest point to step 90
  EXPECT_GT(best[0].at("size").get<int>(), best[1].at("size").get<int>());
}

TEST(TrainingCurvesSpec, LossSpanningDecadesUsesLogScale) {
  std::vector<TrainingCurve> curves = {
      {.trial = 0,
       .substudy = "a",
       .series = "train/loss",
       .source = CurveSource::kTrainingSteps,
       .points = {{0, 2.3}, {100, 0.01}}},
      {.trial = 0, .substudy = "a", .series = "train/loss", .points = {{0, 9.0}}}};  // an evaluation: not drawn
  const json spec = TrainingCurvesSpec(curves, "train/loss", CurveSource::kTrainingSteps, false);
  EXPECT_EQ(spec.at("layer")[0].at("encoding").at("y").at("scale").at("type"), "log");
  EXPECT_EQ(spec.at("layer").size(), 1u);
}

TEST(TrainingCurvesSpec, ZoomsOnTheHighlightedTrialsWhenOthersStretchTheAxis) {
  std::vector<TrainingCurve> curves = {
      {.trial = 0,
       .substudy = "a",
       .series = "valid/error_rate",
       .points = {{0, 0.10}, {100, 0.12}},
       .highlighted = true},
      {.trial = 1, .substudy = "a", .series = "valid/error_rate", .points = {{0, 0.9}, {100, 0.8}}},
  };
  json spec = TrainingCurvesSpec(curves, "valid/error_rate", CurveSource::kEvaluation, false);
  const json& y = spec.at("layer")[0].at("encoding").at("y");
  ASSERT_TRUE(y.at("scale").contains("domain"));
  EXPECT_LE(y.at("scale").at("domain")[0].get<double>(), 0.10);
  EXPECT_GT(y.at("scale").at("domain")[1].get<double>(), 0.12);
  EXPECT_LT(y.at("scale").at("domain")[1].get<double>(), 0.2);
  EXPECT_THAT(y.at("title").get<std::string>(), HasSubstr("zoomed"));
  EXPECT_TRUE(spec.at("layer")[0].at("mark").at("clip").get<bool>());

  curves[1].points = {{0, 0.13}, {100, 0.125}};  // close to the highlighted one: no zoom
  spec = TrainingCurvesSpec(curves, "valid/error_rate", CurveSource::kEvaluation, false);
  EXPECT_FALSE(spec.at("layer")[0].at("encoding").at("y").at("scale").contains("domain"));
}

TEST(VegaSpecs, LogAxesGetReadableTicks) {
  AxisPlot plot = LearningRatePlot();  // [1e-4, 1]: four decades, powers of ten
  const json* points = nullptr;
  const json spec = AxisPlotSpec(plot, ErrorRate());
  for (const auto& layer : spec.at("layer")) {
    if (layer.at("mark").at("type") == "point") points = &layer;
  }
  ASSERT_NE(points, nullptr);
  EXPECT_EQ(points->at("encoding").at("x").at("axis").at("values"), json::array({1e-4, 1e-3, 1e-2, 1e-1, 1.0}));
}

TEST(BestStepSpec, ShadesTheStepBudgetRegions) {
  const json spec = BestStepSpec({{.trial = 3, .substudy = "a", .best_step = 900, .fraction = 0.9, .objective = 0.1}},
                                 1000, ErrorRate());
  const json* zones = FindLayer(spec, "rect");
  ASSERT_NE(zones, nullptr);
  EXPECT_DOUBLE_EQ(zones->at("data").at("values")[0].at("x2").get<double>(), 100);
  EXPECT_DOUBLE_EQ(zones->at("data").at("values")[1].at("x").get<double>(), 750);
  const json* points = FindLayer(spec, "point");
  ASSERT_NE(points, nullptr);
  EXPECT_EQ(points->at("encoding").at("x").at("scale").at("domain"), json::array({0, 1000.0}));
}

TEST(GradientNormSpecs, P90RuleOnCurvesAndHistogram) {
  GradientNorms norms;
  norms.curves = {{.trial = 0, .substudy = "a", .series = "grad_norm", .points = {{1, 0.5}, {2, 2.0}}}};
  norms.histogram = {{.lower = 0.4, .upper = 1.0, .count = 1}, {.lower = 1.0, .upper = 2.5, .count = 1}};
  norms.p90 = 1.85;
  norms.steps = 2;
  const json curves = GradientNormCurvesSpec(norms);
  const json* rule = FindLayer(curves, "rule");
  ASSERT_NE(rule, nullptr);
  EXPECT_DOUBLE_EQ(rule->at("data").at("values")[0].at("y").get<double>(), 1.85);
  EXPECT_EQ(curves.at("layer")[0].at("encoding").at("y").at("scale").at("type"), "log");

  const json histogram = GradientNormHistogramSpec(norms);
  rule = FindLayer(histogram, "rule");
  ASSERT_NE(rule, nullptr);
  EXPECT_DOUBLE_EQ(rule->at("data").at("values")[0].at("x").get<double>(), 1.85);
  EXPECT_EQ(FindLayer(histogram, "rect")->at("data").at("values").size(), 2u);

  norms.p90.reset();
  EXPECT_EQ(FindLayer(GradientNormHistogramSpec(norms), "rule"), nullptr);
}

TEST(BootstrapSpec, OneBoxPerBudget) {
  BootstrapPlot plot{.substudy = "a",
                     .boxes = {{.budget = 1, .min = 0.1, .q1 = 0.2, .median = 0.3, .q3 = 0.4, .max = 0.9},
                               {.budget = 2, .min = 0.1, .q1 = 0.15, .median = 0.2, .q3 = 0.3, .max = 0.5}}};
  const json spec = BootstrapSpec(plot, ErrorRate());
  EXPECT_EQ(spec.at("data").at("values").size(), 2u);
  EXPECT_EQ(spec.at("layer").size(), 3u);
  EXPECT_EQ(spec.at("encoding").at("x").at("scale").at("domain"), json::array({0.5, 2.5}));
}

TEST(BootstrapSpec, ManyTrialsGetALogAxis) {
  BootstrapPlot plot{.substudy = "all", .boxes = {}};
  for (const std::uint64_t budget : BootstrapBudgets(5000)) {
    plot.boxes.push_back(
        {.budget = static_cast<int>(budget), .min = 0.1, .q1 = 0.2, .median = 0.3, .q3 = 0.4, .max = 0.5});
  }
  const json x = BootstrapSpec(plot, ErrorRate(), {}).at("encoding").at("x");
  EXPECT_EQ(x.at("scale").at("type"), "log");
  EXPECT_EQ(x.at("axis").at("values"), json::array({1.0, 10.0, 100.0, 1000.0}));  // decades, not every budget
  plot.boxes.resize(50);
  EXPECT_FALSE(BootstrapSpec(plot, ErrorRate(), {}).at("encoding").at("x").at("scale").contains("type"));
}

TEST(VegaSpecs, NonFiniteNumbersBecomeNull) {
  IsolationPlot plot{.param_id = "opt", .param_name = "optimizer"};
  plot.points = {{.label = "adam", .best = std::numeric_limits<double>::quiet_NaN()}, {.label = "sgd"}};
  const json spec = IsolationPlotSpec(plot, ErrorRate());
  EXPECT_TRUE(spec.at("data").at("values")[0].at("y").is_null());
  EXPECT_TRUE(spec.at("data").at("values")[1].at("y").is_null());
  EXPECT_NO_THROW((void)spec.dump());
}

// The instability probe's learning rates are a list of products (0.08345234782...): labels at the digits that keep
// them apart, level while they fit, upright when they would overlap.
TEST(AxisPlotSpec, NumericChoicesGetShortLabelsThatDoNotOverlap) {
  AxisPlot plot{.param_id = "lr", .param_name = "learning_rate", .categorical = true};
  plot.categories = {"0.016690469564", "0.041726173910", "0.083452347820"};
  plot.points = {{.trial = 0, .substudy = "all", .value = 0.041726173910, .position = 1, .objective = 0.3}};
  const json x = FindLayer(AxisPlotSpec(plot, ErrorRate()), "point")->at("encoding").at("x");
  EXPECT_EQ(x.at("scale").at("domain"), json::array({"0.01669", "0.04173", "0.08345"}));
  EXPECT_EQ(FindLayer(AxisPlotSpec(plot, ErrorRate()), "point")->at("data").at("values")[0].at("x"), "0.04173");
  EXPECT_EQ(x.at("axis").at("labelAngle"), 0);
  plot.categories = {"1.0000001", "1.0000002"};  // apart only at 8 digits
  EXPECT_EQ(FindLayer(AxisPlotSpec(plot, ErrorRate()), "point")->at("encoding").at("x").at("scale").at("domain"),
            json::array({"1.0000001", "1.0000002"}));
  plot.categories.clear();
  for (int i = 0; i < 12; ++i) plot.categories.push_back("a long choice " + std::to_string(i));
  plot.points[0].value = std::string("a long choice 1");
  EXPECT_EQ(FindLayer(AxisPlotSpec(plot, ErrorRate()), "point")->at("encoding").at("x").at("axis").at("labelAngle"),
            -90);
}

// Steps and counts are whole numbers: their axes say so ("1,500", not "1.5e+3"); other axes write decimals.
TEST(VegaSpecs, StepAndCountAxesAreIntegers) {
  const std::vector<TrainingCurve> curves = {
      {.trial = 0, .substudy = "a", .series = "valid/error_rate", .points = {{0, 0.9}, {150, 0.3}}}};
  const json curve = TrainingCurvesSpec(curves, "valid/error_rate", CurveSource::kEvaluation, false);
  EXPECT_EQ(curve.at("layer")[0].at("encoding").at("x").at("axis").at("format"), ",d");
  EXPECT_EQ(curve.at("config").at("axisQuantitative").at("format"), "~r");
  const json best = BestStepSpec({{.trial = 0, .substudy = "a", .best_step = 150, .objective = 0.3}}, 200, ErrorRate());
  EXPECT_EQ(FindLayer(best, "point")->at("encoding").at("x").at("axis").at("format"), ",d");
  GradientNorms norms;
  norms.histogram = {{.lower = 1, .upper = 2, .count = 150}};
  EXPECT_EQ(FindLayer(GradientNormHistogramSpec(norms), "rect")->at("encoding").at("y").at("axis").at("format"), ",d");
}

// A curve of one point (a trial that evaluated once) is drawn as a dot: a line through one point draws nothing.
TEST(TrainingCurvesSpec, AOnePointCurveIsADot) {
  const std::vector<TrainingCurve> curves = {
      {.trial = 0, .substudy = "a", .series = "valid/error_rate", .points = {{100, 0.3}}, .highlighted = true},
      {.trial = 1,
       .substudy = "a",
       .series = "valid/error_rate",
       .points = {{0, 0.9}, {100, 0.4}},
       .highlighted = true}};
  const json spec = TrainingCurvesSpec(curves, "valid/error_rate", CurveSource::kEvaluation, false);
  const json* dots = FindLayer(spec, "point");
  ASSERT_NE(dots, nullptr);
  ASSERT_EQ(dots->at("data").at("values").size(), 1u);
  EXPECT_EQ(dots->at("data").at("values")[0].at("trial"), 0);
  GradientNorms norms{.steps = 1};
  norms.curves = {{.trial = 0, .substudy = "a", .series = "train/grad_norm", .points = {{1, 0.5}}}};
  ASSERT_NE(FindLayer(GradientNormCurvesSpec(norms), "point"), nullptr);
  const json probe = StabilityCurvesSpec({{.label = "2x", .trial = 0, .points = {{1, 2.0}}}});
  ASSERT_NE(FindLayer(probe, "point"), nullptr);
}

// Against the parent study: each label beside its point, towards the middle, so none runs over an axis.
TEST(RoundComparisonSpec, LabelsPointTowardsTheMiddle) {
  RoundComparison rounds;
  rounds.rows = {
      {.configuration = 0, .label = "lr=0.1", .parent_value = 0.2, .value = 0.25, .parent_rank = 1, .rank = 2},
      {.configuration = 1, .label = "lr=0.3", .parent_value = 0.4, .value = 0.2, .parent_rank = 2, .rank = 1}};
  const json spec = RoundComparisonSpec(rounds, ErrorRate(), "p");
  EXPECT_EQ(spec.at("data").at("values")[0].at("side"), "left");
  EXPECT_EQ(spec.at("data").at("values")[1].at("side"), "right");
  std::vector<std::string> aligns;
  for (const auto& layer : spec.at("layer")) {
    if (layer.at("mark").at("type") == "text") {
      aligns.push_back(layer.at("mark").at("align"));
      EXPECT_LE(layer.at("mark").at("limit").get<int>(), spec.at("width").get<int>() / 2);
    }
  }
  EXPECT_EQ(aligns, (std::vector<std::string>{"left", "right"}));
}

// A sweep whose learning rates have not fit the training set yet: no line layer over no data ("Infinite extent").
TEST(StepBudgetSpec, NoLineBeforeAnyLearningRateFits) {
  StepBudget budget;
  budget.rows = {{.trial = 0, .learning_rate = 0.01}, {.trial = 1, .learning_rate = 0.1}};
  EXPECT_EQ(FindLayer(StepBudgetSpec(budget, 100), "line"), nullptr);
  budget.rows[1].first_fit_step = 40;
  EXPECT_NE(FindLayer(StepBudgetSpec(budget, 100), "line"), nullptr);
}

ParetoView SecondsView() {
  ParetoView view{.cost = ParetoCost::kTrainingSeconds, .recorded = true};
  view.substudies.push_back({.index = 0,
                             .substudy = "optimizer=<b>",
                             .points = {{.trial = 0, .cost = 10, .objective = 0.3, .on_front = true},
                                        {.trial = 1, .cost = 20, .objective = 0.35},
                                        {.trial = 2, .cost = 150, .objective = 0.1, .on_front = true},
                                        {.trial = 3, .cost = 5, .infeasible = true}},
                             .front = {0, 2}});
  return view;
}

// The front strong and joined by a staircase, dominated trials faint, infeasible ones as red crosses along the worse
// edge; a cost spanning a decade on a log axis.
TEST(ParetoSpec, TheFrontAsAStaircaseAndInfeasibleTrialsMarked) {
  const json spec = ParetoSpec(SecondsView(), ErrorRate(), {.substudies = {"optimizer=<b>"}});
  const json* line = FindLayer(spec, "line");
  ASSERT_NE(line, nullptr);
  EXPECT_EQ(line->at("mark").at("interpolate"), "step-after");
  EXPECT_EQ(line->at("data").at("values").size(), 2u);
  EXPECT_EQ(line->at("encoding").at("x").at("scale").at("type"), "log");
  EXPECT_THAT(line->at("encoding").at("x").at("title").get<std::string>(),
              HasSubstr("training seconds, log scale (lower is cheaper)"));
  EXPECT_EQ(line->at("encoding").at("y").at("title"), "valid/error_rate (lower is better)");
  // The dominated trial faint below, the front's strong above.
  std::vector<std::pair<std::string, double>> drawn;
  for (const auto& layer : spec.at("layer")) {
    if (layer.at("mark").at("type") != "point" || layer.at("mark").contains("color")) continue;
    for (const auto& row : layer.at("data").at("values")) {
      drawn.emplace_back(row.at("front").get<std::string>(), layer.at("mark").at("opacity").get<double>());
      EXPECT_EQ(row.at("substudy"), "optimizer=<b>");
    }
  }
  EXPECT_EQ(drawn, (std::vector<std::pair<std::string, double>>{
                       {"dominated", 0.35}, {"on the front", 0.95}, {"on the front", 0.95}}));
  const json* crosses = FindLayer(spec, "point", "#d62728");
  ASSERT_NE(crosses, nullptr);
  EXPECT_EQ(crosses->at("mark").at("shape"), "cross");
  EXPECT_EQ(crosses->at("data").at("values").size(), 1u);
  EXPECT_EQ(crosses->at("encoding").at("y").at("value"), 6);  // lower is better: the worse edge is the top
  std::vector<std::string> fields;
  CollectFields(spec, fields);
  for (const auto& field : fields) EXPECT_THAT(field, Not(HasSubstr("<b>")));
}

// Examples per second is cheaper higher: the staircase turns the other way. Bytes are drawn as GiB, on a linear axis
// within a decade.
TEST(ParetoSpec, EachCostsDirectionAndUnit) {
  ParetoView view = SecondsView();
  view.cost = ParetoCost::kExamplesPerSecond;
  const json speed = ParetoSpec(view, ErrorRate());
  EXPECT_EQ(FindLayer(speed, "line")->at("mark").at("interpolate"), "step-before");
  EXPECT_THAT(FindLayer(speed, "line")->at("encoding").at("x").at("title").get<std::string>(),
              HasSubstr("(higher is cheaper)"));
  view.cost = ParetoCost::kPeakGpuMemory;
  for (ParetoPoint& point : view.substudies[0].points) point.cost = 1024.0 * 1024.0 * 1024.0 * (1 + 0.01 * point.cost);
  const json memory = ParetoSpec(view, ErrorRate());
  const json* points = FindLayer(memory, "point");  // the dominated trial 1, at 20
  EXPECT_DOUBLE_EQ(points->at("data").at("values")[0].at("x").get<double>(), 1.2);
  EXPECT_EQ(points->at("encoding").at("x").at("scale").at("type"), "linear");
  EXPECT_THAT(points->at("encoding").at("x").at("title").get<std::string>(), HasSubstr("peak GPU memory, GiB"));
  // No trial with an objective yet: an empty axis, no staircase.
  view.substudies[0].points.resize(0);
  view.substudies[0].front.clear();
  const json empty = ParetoSpec(view, ErrorRate());
  EXPECT_EQ(FindLayer(empty, "line"), nullptr);
  EXPECT_NE(FindLayer(empty, "point"), nullptr);
  // Only an infeasible trial: its cross alone, no layer without data (Vega warns of an infinite extent).
  view.substudies[0].points = {{.trial = 3, .cost = 5, .infeasible = true}};
  const json crosses = ParetoSpec(view, ErrorRate());
  ASSERT_EQ(crosses.at("layer").size(), 1u);
  EXPECT_EQ(crosses.at("layer")[0].at("mark").at("shape"), "cross");
}

}  // namespace
}  // namespace dltune
