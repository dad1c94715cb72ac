#include "dltune/report/dashboard_api.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "dltune/analyze/diagnostics.h"
#include "dltune/report/html_report.h"
#include "dltune/report/study_data.h"
#include "dltune/report/vega_specs.h"
#include "dltune/store/tracking.h"

namespace dltune {
namespace {

using nlohmann::json;

json Optional(const std::optional<double>& value) { return value ? json(*value) : json(nullptr); }
json Optional(const std::optional<std::int64_t>& value) { return value ? json(*value) : json(nullptr); }

json StatesJson(const StudySummary& summary) {
  json states = json::object();
  for (int s = 0; s < 6; ++s) {
    const auto state = static_cast<TrialState>(s);
    states[TrialStateName(state)] = summary.Count(state);
  }
  return states;
}

json BestJson(const std::optional<BestTrial>& best) {
  if (!best) return nullptr;
  return {{"value", best->value},
          {"trial", best->number},
          {"substudy", best->substudy_label},
          {"step", Optional(best->step)}};
}

struct Chart {
  std::string id;
  std::string title;
  json spec;
};

ChartOptions Colors(const StudyData& data) {
  ChartOptions options;
  for (const auto& trial : data.trials) {
    if (std::find(options.substudies.begin(), options.substudies.end(), trial.substudy_label) ==
        options.substudies.end()) {
      options.substudies.push_back(trial.substudy_label);
    }
  }
  return options;
}

// The objective and training-loss curves of `data`'s trials (every trial of a study, or one).
// Beyond ReportOptions::max_curve_trials, only the running trials and each sub-study's best are drawn.
void AddCurveCharts(const StudyData& data, const ChartOptions& options, std::vector<Chart>& charts) {
  const ObjectiveRef objective = ObjectiveOf(data.spec);
  const StudyData shown = SubsetOfTrials(data, CurveTrials(data, ReportOptions{}.max_curve_trials));
  const auto curves = TrainingCurves(shown);
  if (curves.empty()) return;
  const std::string drawn = CurveTrialsNote(shown, data);
  const std::string note = drawn.empty() ? "" : " (" + drawn + ")";
  charts.push_back({"curves_objective", objective.Name() + " vs step" + note,
                    TrainingCurvesSpec(curves, objective.Name(), CurveSource::kEvaluation, true, options)});
  charts.push_back({"curves_train_loss", "training loss vs step" + note,
                    TrainingCurvesSpec(curves, "train/loss", CurveSource::kTrainingSteps, false, options)});
}

// The study page's charts from the trial records alone: the same analyses as the report (html_report.cc).
std::vector<Chart> RecordCharts(const StudyData& data) {
  const ObjectiveRef objective = ObjectiveOf(data.spec);
  const ChartOptions options = Colors(data);
  std::vector<Chart> charts;
  for (const auto& plot : IsolationPlots(data)) {
    charts.push_back({"isolation_" + plot.param_id, "isolation: best " + objective.Name() + " per " + plot.param_name,
                      IsolationPlotSpec(plot, objective, options)});
  }
  for (const auto& plot : HyperparameterAxisPlots(data)) {
    charts.push_back(
        {"axis_" + plot.param_id, "axis plot: " + plot.param_name, AxisPlotSpec(plot, objective, options)});
  }
  if (const auto best_steps = BestSteps(data); !best_steps.empty()) {
    charts.push_back({"best_steps", "best step vs max_train_steps",
                      BestStepSpec(best_steps, data.spec.max_train_steps, objective, options)});
  }
  for (const auto& plot : BootstrapBestObjective(data)) {
    charts.push_back({"bootstrap_" + plot.substudy, "have we sampled enough? " + plot.substudy,
                      BootstrapSpec(plot, objective, options)});
  }
  return charts;
}

// The study page's charts of measurements: training curves and gradient norms.
std::vector<Chart> MeasurementCharts(const StudyData& data) {
  const ChartOptions options = Colors(data);
  std::vector<Chart> charts;
  AddCurveCharts(data, options, charts);
  if (const GradientNorms norms = GradientNormAnalysis(data); !norms.histogram.empty()) {
    charts.push_back(
        {"grad_norm_histogram", "gradient norms (before clipping)", GradientNormHistogramSpec(norms, options)});
  }
  return charts;
}

json ChartsJson(const std::vector<Chart>& charts) {
  json out = json::array();
  for (const auto& chart : charts) out.push_back({{"id", chart.id}, {"title", chart.title}, {"spec", chart.spec}});
  return out;
}

// A trial page's charts: its curves and gradient norms.
std::vector<Chart> TrialCharts(const StudyData& data) {
  const ChartOptions options = Colors(data);
  std::vector<Chart> charts;
  AddCurveCharts(data, options, charts);
  if (const GradientNorms norms = GradientNormAnalysis(data); !norms.curves.empty()) {
    charts.push_back({"grad_norms", "gradient norm vs step", GradientNormCurvesSpec(norms, options)});
  }
  return charts;
}

json ParamsJson(const StudySpec& spec, const Assignment& params) {
  json out = json::object();
  for (const auto& [id, value] : params) {
    const Param* param = spec.space->Find(id);
    out[param ? param->name : id] = ValueToJson(value);
  }
  return out;
}

}  // namespace

json StudiesJson(Store& store) {
  json studies = json::array();
  for (const auto& study : store.ListStudies()) {
    const StudySummary summary = SummarizeStudy(store, study, 0);
    studies.push_back({{"name", study.name},
                       {"description", study.description},
                       {"spec_path", study.spec_path},
                       {"trials", summary.trial_count},
                       {"states", StatesJson(summary)},
                       {"best", BestJson(summary.best)},
                       {"objective", summary.objective.metric},
                       {"updated_at", study.updated_at}});
  }
  return {{"store", store.url()}, {"studies", studies}};
}

json StudyJson(Store& store, const std::string& name, StudyPart part) {
  const StudyData data = LoadStudyData(store, name, part == StudyPart::kMeasurements);
  if (part == StudyPart::kMeasurements) {
    json diagnostics = json::array();
    for (const auto& d : Diagnose(data)) {
      diagnostics.push_back({{"id", d.id},
                             {"severity", SeverityName(d.severity)},
                             {"title", d.title},
                             {"detail", d.detail},
                             {"suggestion", d.suggestion},
                             {"section", d.section},
                             {"substudy", d.substudy}});
    }
    return {{"updated_at", data.study.updated_at},
            {"diagnostics", diagnostics},
            {"charts", ChartsJson(MeasurementCharts(data))}};
  }
  const StudySummary summary = SummarizeStudy(data.study, data.trials);
  json per_substudy = json::array();
  for (const auto& best : summary.best_per_substudy) per_substudy.push_back(BestJson(best));
  json trials = json::array();
  for (const auto& trial : data.trials) {
    trials.push_back({{"number", trial.number},
                      {"substudy", trial.substudy_label},
                      {"state", TrialStateName(trial.state)},
                      {"best", Optional(trial.best_value)},
                      {"best_step", Optional(trial.best_step)},
                      {"final", Optional(trial.final_value)},
                      {"reason", trial.reason},
                      {"params", ParamsJson(data.spec, trial.params)}});
  }
  return {{"name", data.study.name},
          {"description", data.study.description},
          {"spec_path", data.study.spec_path},
          {"spec_hash", data.study.spec_hash},
          {"dltune_version", data.study.dltune_version},
          {"git_commit", data.study.git_commit},
          {"created_at", data.study.created_at},
          {"updated_at", data.study.updated_at},
          {"objective", data.spec.objective.metric},
          {"direction", DirectionName(data.spec.objective.direction)},
          {"max_train_steps", data.spec.max_train_steps},
          {"states", StatesJson(summary)},
          {"best", BestJson(summary.best)},
          {"best_per_substudy", per_substudy},
          {"charts", ChartsJson(RecordCharts(data))},
          {"trials", trials}};
}

std::string StudyJsonCache::Get(Store& store, const std::string& name, StudyPart part) {
  // Longer than the store's clock resolution (SQLite: 1 ms) plus any skew between this machine and a database server.
  constexpr double kSettledSeconds = 2.0;
  const StudyRecord study = RequireStudy(store, name);
  const auto key = std::make_pair(name, part);
  if (const auto it = entries_.find(key); it != entries_.end() && it->second.updated_at == study.updated_at) {
    return it->second.body;
  }
  std::string body = StudyJson(store, name, part).dump();
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (now - study.updated_at > kSettledSeconds) {
    entries_[key] = {study.updated_at, body};
  } else {
    entries_.erase(key);
  }
  return body;
}

json TrialJson(Store& store, const std::string& name, std::uint64_t number) {
  const StudyRecord study = RequireStudy(store, name);
  const StudySpec spec = ParseStudySpec(study.spec_text, study.spec_path.empty() ? name : study.spec_path);
  const auto trial = store.FindTrial(study.id, number);
  if (!trial) throw Error(fmt::format("study '{}' has no trial {}", name, number));
  json checkpoints = json::array();
  for (const auto& c : store.ListCheckpoints(trial->id)) {
    checkpoints.push_back({{"step", c.step},
                           {"path", c.path},
                           {"objective", Optional(c.objective)},
                           {"pool", CheckpointPoolName(c.pool)},
                           {"deleted", c.deleted}});
  }
  // The trial alone, as a StudyData the curve analyses read.
  StudyData data;
  data.study = study;
  data.spec = spec;
  data.trials = {*trial};
  data.evals[number] = store.EvalSeries(trial->id);
  data.train[number] = store.TrainSeries(trial->id);
  const json charts = ChartsJson(TrialCharts(data));
  return {{"study", study.name},
          {"number", trial->number},
          {"substudy", trial->substudy_label},
          {"state", TrialStateName(trial->state)},
          {"reason", trial->reason},
          {"worker", trial->worker},
          {"retries", trial->retries},
          {"started_at", trial->started_at ? json(*trial->started_at) : json(nullptr)},
          {"ended_at", trial->ended_at ? json(*trial->ended_at) : json(nullptr)},
          {"best", Optional(trial->best_value)},
          {"best_step", Optional(trial->best_step)},
          {"final", Optional(trial->final_value)},
          {"exit_status", trial->exit_status ? json(*trial->exit_status) : json(nullptr)},
          {"stderr_tail", trial->stderr_tail},
          {"params", ParamsJson(spec, trial->params)},
          {"checkpoints", checkpoints},
          {"charts", charts}};
}

std::vector<WebAsset> DashboardAssets() {
  const std::filesystem::path libraries = FindWebDir();
  // web/ holds the page next to node_modules/; an installed share/dltune/web the same way.
  const std::filesystem::path page_dir =
      std::filesystem::exists(libraries / "dashboard.html") ? libraries : libraries.parent_path();
  const std::string js = "text/javascript; charset=utf-8";
  std::vector<WebAsset> assets = {{"index.html", page_dir / "dashboard.html", "text/html; charset=utf-8"},
                                  {"dashboard.js", page_dir / "dashboard.js", js},
                                  {"dashboard.css", page_dir / "dashboard.css", "text/css; charset=utf-8"}};
  for (const char* library : {"vega", "vega-lite", "vega-embed"}) {
    assets.push_back(
        {fmt::format("{}.min.js", library), libraries / library / "build" / fmt::format("{}.min.js", library), js});
  }
  for (const auto& asset : assets) {
    if (!std::filesystem::exists(asset.path)) {
      throw Error(fmt::format("{}: the dashboard's file is missing (run scripts/setup, or set DLTUNE_WEB_DIR)",
                              asset.path.string()));
    }
  }
  return assets;
}

}  // namespace dltune
