#include "dltune/report/html_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "dltune/analyze/diagnostics.h"
#include "dltune/core/error.h"
#include "dltune/core/strings.h"
#include "dltune/report/vega_specs.h"
#include "dltune/store/tracking.h"
#include "dltune/version.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The playbook, which diagnostics link to by section.
constexpr const char* kPlaybookUrl = "https://github.com/google-research/tuning_playbook";

// The charting libraries, in the order they must load, as paths under the web directory.
constexpr const char* kLibraries[] = {"vega/build/vega.min.js", "vega-lite/build/vega-lite.min.js",
                                      "vega-embed/build/vega-embed.min.js"};

bool HoldsLibraries(const fs::path& dir) {
  std::error_code error;
  return std::all_of(std::begin(kLibraries), std::end(kLibraries),
                     [&](const char* file) { return fs::is_regular_file(dir / file, error); });
}

// `dir` itself or its node_modules/ when that holds the libraries.
std::optional<fs::path> WebDirAt(const fs::path& dir) {
  if (dir.empty()) return std::nullopt;
  if (HoldsLibraries(dir)) return dir;
  if (HoldsLibraries(dir / "node_modules")) return dir / "node_modules";
  return std::nullopt;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in.good() && !in.eof()) throw Error(fmt::format("{}: cannot read it", path.string()));
  if (!in)
    throw Error(fmt::format("{}: cannot read it; run scripts/setup to install the charting libraries", path.string()));
  return text.str();
}

std::string Format(double value) { return fmt::format("{:.6g}", value); }
std::string Format(const std::optional<double>& value) { return value ? Format(*value) : "-"; }

std::string FormatTime(double seconds) {
  if (seconds <= 0) return "-";
  return FormatClockTime(seconds, "%Y-%m-%d %H:%M UTC", TimeZone::kUtc);
}

// A param value for a table cell: reals to 4 significant digits, everything else as written.
std::string ShortValue(const Value& value) {
  if (const auto* real = std::get_if<double>(&value)) return fmt::format("{:.4g}", *real);
  return FormatValue(value);
}

// The HTML document, built in order.
class Page {
 public:
  void Raw(std::string_view html) { out_ += html; }
  void Text(std::string_view text) { out_ += HtmlEscape(text); }
  // <tag attributes>text</tag>, the text escaped; `attributes` are the page's own (never user text).
  void Element(std::string_view tag, std::string_view text, std::string_view attributes = {}) {
    out_ += fmt::format("<{}{}{}>", tag, attributes.empty() ? "" : " ", attributes);
    Text(text);
    out_ += fmt::format("</{}>", tag);
  }
  // A chart container; its spec is drawn by the page's script.
  void Chart(json spec, std::string_view caption, std::string_view wide_class = {}) {
    const std::string id = fmt::format("chart-{}", charts_.size());
    out_ += fmt::format("<figure class=\"chart-box{}{}\"><div class=\"chart\" id=\"{}\"></div>",
                        wide_class.empty() ? "" : " ", wide_class, id);
    if (!caption.empty()) Element("figcaption", caption);
    out_ += "</figure>\n";
    charts_.push_back({{"id", id}, {"spec", std::move(spec)}});
  }
  const json& charts() const { return charts_; }
  std::string& out() { return out_; }

 private:
  std::string out_;
  json charts_ = json::array();
};

constexpr const char* kStyle = R"css(
:root { --ink: #1d2329; --muted: #5b6570; --line: #d9dee3; --soft: #f5f7f9; --accent: #2f5d8a; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--ink); background: #fff; font: 15px/1.5 "DejaVu Sans", -apple-system, "Segoe UI",
       Helvetica, Arial, sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 48px; }
header.study { border-bottom: 3px solid var(--accent); margin-bottom: 8px; padding-bottom: 10px; }
header.study .kicker { color: var(--muted); font-size: 13px; letter-spacing: .04em; text-transform: uppercase; }
h1 { font-size: 28px; margin: 2px 0 4px; overflow-wrap: anywhere; }
h2 { font-size: 21px; margin: 36px 0 6px; padding-top: 8px; border-top: 1px solid var(--line); }
#record h2 { border-top: none; margin-top: 22px; }
h3 { font-size: 16px; margin: 18px 0 4px; }
p { margin: 4px 0 10px; }
p.lead { font-size: 16px; color: #333; overflow-wrap: anywhere; }
p.explain { color: var(--muted); max-width: 900px; }
nav.toc { font-size: 14px; margin: 10px 0 0; }
nav.toc a { color: var(--accent); margin-right: 14px; text-decoration: none; white-space: nowrap; }
nav.toc a:hover { text-decoration: underline; }
table { border-collapse: collapse; font-size: 14px; }
th, td { text-align: left; vertical-align: top; padding: 5px 10px; border-bottom: 1px solid var(--line); }
th { background: var(--soft); font-weight: 600; white-space: nowrap; }
table.facts th { background: none; color: var(--muted); font-weight: normal; width: 170px; }
table.facts td { overflow-wrap: anywhere; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
th.fill, td.fill { width: 100%; }
code, .mono { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 12.5px; }
.table-wrap { overflow-x: auto; max-width: 100%; }
tr.group td { background: #eef2f6; padding-top: 7px; overflow-wrap: anywhere; }
tr.trial td { border-bottom: none; padding-bottom: 2px; }
tr.detail td { padding-top: 0; font-size: 13px; color: #37424d; }
tr.detail div { display: flex; gap: 8px; align-items: baseline; margin: 1px 0; }
tr.detail .label { flex: 0 0 78px; color: var(--muted); }
tr.detail code { white-space: pre-wrap; overflow-wrap: anywhere; background: var(--soft);
                 padding: 1px 6px; border-radius: 3px; }
ol.diagnostics { list-style: none; padding: 0; margin: 0; }
ol.diagnostics li { border: 1px solid var(--line); border-left: 6px solid #9aa5b1; border-radius: 4px;
                    padding: 8px 14px; margin: 10px 0; background: #fff; }
ol.diagnostics li.problem { border-left-color: #c0392b; background: #fdf3f2; }
ol.diagnostics li.warning { border-left-color: #d68910; background: #fef9ef; }
ol.diagnostics li.info { border-left-color: #2e86c1; background: #f3f8fc; }
.badge { display: inline-block; font-size: 11px; font-weight: 700; text-transform: uppercase; letter-spacing: .05em;
         padding: 1px 7px; border-radius: 10px; color: #fff; background: #7b8794; margin-right: 8px;
         vertical-align: 2px; }
li.problem .badge { background: #c0392b; } li.warning .badge { background: #b9770e; } li.info .badge { background: #2e86c1; }
.diag-title { font-weight: 600; }
.diag-detail { margin: 4px 0; overflow-wrap: anywhere; }
.diag-suggestion { margin: 4px 0; }
.diag-suggestion::before { content: "What to do: "; font-weight: 600; }
.diag-source { color: var(--muted); font-size: 13px; margin: 2px 0 0; }
.ok { color: #1e8449; font-weight: 600; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(520px, 1fr)); gap: 14px 18px; }
figure.chart-box { margin: 0; padding: 10px 10px 6px; border: 1px solid var(--line); border-radius: 4px;
                   background: #fff; min-width: 0; overflow-x: auto; }
figure.chart-box.wide { grid-column: 1 / -1; }
figure.chart-box figcaption { color: var(--muted); font-size: 13px; margin-top: 2px; overflow-wrap: anywhere; }
.chart.failed { color: #c0392b; }
.empty { color: var(--muted); font-style: italic; }
.legend-note { font-size: 13px; color: var(--muted); }
.infeasible-mark { color: #d62728; font-weight: 700; }
footer { margin-top: 40px; color: var(--muted); font-size: 13px; border-top: 1px solid var(--line); padding-top: 8px; }
)css";

// Draws every chart: the specs are data (a JSON script element), never markup.
constexpr const char* kDrawScript = R"js(
(function () {
  'use strict';
  var charts = JSON.parse(document.getElementById('dltune-chart-specs').textContent);
  var drawn = charts.map(function (chart) {
    var element = document.getElementById(chart.id);
    return vegaEmbed(element, chart.spec, {actions: false, renderer: 'svg'}).catch(function (error) {
      element.textContent = 'This chart could not be drawn: ' + error;
      element.className += ' failed';
      console.error('dltune: ' + chart.id + ': ' + error);
    });
  });
  Promise.all(drawn).then(function () {
    document.body.setAttribute('data-charts-drawn', String(charts.length));
  });
})();
)js";

void Section(Page& page, std::string_view id, std::string_view title, std::string_view explanation) {
  page.Raw(fmt::format("<section id=\"{}\">\n", id));
  page.Element("h2", title);
  if (!explanation.empty()) page.Element("p", explanation, "class=\"explain\"");
}

void FactRow(Page& page, std::string_view label, std::string_view value, bool mono = false) {
  page.Raw("<tr>");
  page.Element("th", label);
  page.Element("td", value, mono ? "class=\"mono\"" : "");
  page.Raw("</tr>\n");
}

void RenderTracking(Page& page, const StudyData& data, const StudySummary& summary) {
  const StudyRecord& study = data.study;
  page.Raw("<section id=\"record\">\n");
  page.Element("h2", "Tracking record");
  page.Raw("<table class=\"facts\">\n");
  FactRow(page, "study", study.name);
  FactRow(page, "description", study.description.empty() ? "-" : study.description);
  FactRow(page, "spec", study.spec_path.empty() ? "-" : study.spec_path, true);
  FactRow(page, "spec sha256", study.spec_hash.empty() ? "-" : study.spec_hash, true);
  FactRow(page, "created",
          fmt::format("{} by dltune {}", FormatTime(study.created_at),
                      study.dltune_version.empty() ? "?" : study.dltune_version));
  FactRow(page, "last change", FormatTime(study.updated_at));
  FactRow(page, "git commit", study.git_commit.empty() ? "- (not created in a git checkout)" : study.git_commit, true);
  FactRow(page, "trains",
          !data.spec.workload.name.empty() ? "workload " + data.spec.workload.name
          : !data.spec.command.empty()     ? "command: " + data.spec.command
                                           : "a program using the ask/tell API");
  FactRow(page, "objective", DirectionName(summary.objective.direction) + " " + summary.objective.metric);
  FactRow(
      page, "max_train_steps",
      fmt::format("{} (evaluated every {} steps)", data.spec.max_train_steps,
                  data.spec.training.eval_every_steps > 0 ? data.spec.training.eval_every_steps
                                                          : std::max<std::int64_t>(1, data.spec.max_train_steps / 10)));
  FactRow(page, "trials", summary.StateText());
  auto best_text = [&](const BestTrial& best) {
    return fmt::format("{} {} — trial {}{}", summary.objective.metric, Format(best.value), best.number,
                       best.step ? fmt::format(" at step {}", *best.step) : "");
  };
  FactRow(page, "best", summary.best ? best_text(*summary.best) : "- (no trial completed yet)");
  if (summary.best_per_substudy.size() > 1) {
    for (const auto& best : summary.best_per_substudy) FactRow(page, "best of " + best.substudy_label, best_text(best));
  }
  FactRow(page, "created with", summary.reproduce.empty() ? "-" : summary.reproduce, true);
  page.Raw("</table>\n</section>\n");
}

void RenderDiagnostics(Page& page, const std::vector<Diagnostic>& diagnostics) {
  Section(page, "diagnostics", "Checklist",
          "The playbook's questions about a study, answered from its records: search-space boundaries, infeasible "
          "trials, overfitting, noise late in training, the step budget, input pipeline and clipping. Most serious "
          "first.");
  if (diagnostics.empty()) {
    page.Element("p", "Nothing to report: no check of the checklist found a problem in this study's records.",
                 "class=\"ok\"");
  } else {
    page.Raw("<ol class=\"diagnostics\">\n");
    for (const Diagnostic& d : diagnostics) {
      const std::string severity = SeverityName(d.severity);
      page.Raw(fmt::format("<li class=\"{}\">", HtmlEscape(severity)));
      page.Element("span", severity, "class=\"badge\"");
      page.Element("span", d.title, "class=\"diag-title\"");
      if (!d.detail.empty()) page.Element("p", d.detail, "class=\"diag-detail\"");
      if (!d.suggestion.empty()) page.Element("p", d.suggestion, "class=\"diag-suggestion\"");
      page.Raw("<p class=\"diag-source\">");
      std::string separator;
      if (!d.section.empty()) {
        page.Raw(fmt::format("Playbook: <a href=\"{}#{}\">", kPlaybookUrl, HtmlEscape(PlaybookAnchor(d.section))));
        page.Text(d.section);
        page.Raw("</a>");
        separator = " · ";
      }
      std::string more;
      auto append = [&](const std::string& part) {
        more += separator + part;
        separator = " · ";
      };
      if (!d.substudy.empty()) append("sub-study " + d.substudy);
      if (!d.param_id.empty()) append("param " + d.param_id);
      if (!d.trials.empty()) {
        constexpr std::size_t kMaxListed = 12;
        std::string list = d.trials.size() == 1 ? "trial " : "trials ";
        for (std::size_t i = 0; i < d.trials.size() && i < kMaxListed; ++i) {
          list += fmt::format("{}{}", i > 0 ? ", " : "", d.trials[i]);
        }
        if (d.trials.size() > kMaxListed) list += ", …";
        append(list);
      }
      page.Text(more);
      page.Raw("</p>");
      page.Raw("</li>\n");
    }
    page.Raw("</ol>\n");
  }
  page.Raw("</section>\n");
}

void RenderTopTrials(Page& page, const StudyData& data, const ReportOptions& options, const ObjectiveRef& objective) {
  Section(page, "best-trials", "Best trials",
          fmt::format("The {} best completed trials of each sub-study by their best {} (the value at their best step, "
                      "where the checkpoint kept for it is), with the command that trains each again.",
                      std::max<std::size_t>(options.top_trials, 1), objective.Name()));
  const auto numbers = TopTrials(data, static_cast<int>(std::max<std::size_t>(options.top_trials, 1)));
  if (numbers.empty()) {
    page.Element("p", "No trial has completed yet.", "class=\"empty\"");
    page.Raw("</section>\n");
    return;
  }
  std::map<std::uint64_t, const TrialRecord*> by_number;
  std::set<std::string> substudies;
  for (const auto& trial : data.trials) {
    by_number[trial.number] = &trial;
    substudies.insert(trial.substudy_label);
  }
  // Params that vary in the space and are set in at least one listed trial, in the spec's order; scientific ones of
  // separate sub-studies are in the sub-study's heading instead.
  std::vector<std::string> columns;
  if (data.spec.space) {
    for (const Param& param : data.spec.space->params()) {
      if (!param.Varies()) continue;
      if (param.role == Role::kScientific && data.spec.scientific_mode == ScientificMode::kSeparate) continue;
      const bool used = std::any_of(numbers.begin(), numbers.end(),
                                    [&](std::uint64_t n) { return by_number.at(n)->params.count(param.id) > 0; });
      if (used) columns.push_back(param.id);
    }
  }
  // The columns stay as narrow as their numbers; a last, empty column takes the rest of the width, which the
  // checkpoint and command lines below each trial use.
  const std::size_t width = 4 + columns.size();
  page.Raw("<div class=\"table-wrap\"><table class=\"trials\">\n<tr>");
  for (const char* header : {"trial", "best", "best step"}) page.Element("th", header, "class=\"num\"");
  for (const auto& id : columns) page.Element("th", id, "class=\"num\"");
  page.Raw("<th class=\"fill\"></th></tr>\n");
  std::optional<std::size_t> substudy;
  for (const std::uint64_t number : numbers) {
    const TrialRecord& trial = *by_number.at(number);
    if (substudies.size() > 1 && substudy != trial.substudy) {
      substudy = trial.substudy;
      page.Raw(fmt::format("<tr class=\"group\"><td colspan=\"{}\">sub-study ", width));
      page.Element("strong", trial.substudy_label);
      page.Raw("</td></tr>\n");
    }
    page.Raw("<tr class=\"trial\">");
    page.Element("td", fmt::format("{}", trial.number), "class=\"num\"");
    page.Element("td", Format(trial.best_value), "class=\"num\"");
    page.Element("td", trial.best_step ? fmt::format("{}", *trial.best_step) : "-", "class=\"num\"");
    for (const auto& id : columns) {
      const auto it = trial.params.find(id);
      if (it == trial.params.end()) {
        page.Element("td", "-", "class=\"num\"");
      } else {
        page.Raw("<td class=\"num\" title=\"");
        page.Text(FormatValue(it->second));
        page.Raw("\">");
        page.Text(ShortValue(it->second));
        page.Raw("</td>");
      }
    }
    page.Raw("<td class=\"fill\"></td></tr>\n");
    // Where its best step is kept, and how to train it again: long text, on lines of their own.
    const auto extras = options.extras.find(number);
    std::optional<CheckpointRecord> checkpoint;
    std::string reproduce;
    if (extras != options.extras.end()) {
      checkpoint = BestCheckpoint(extras->second.checkpoints, trial.best_step);
      reproduce = extras->second.reproduce;
    }
    page.Raw(fmt::format("<tr class=\"detail\"><td></td><td colspan=\"{}\">", width - 1));
    page.Raw("<div><span class=\"label\">checkpoint</span>");
    if (checkpoint) {
      page.Element("code", checkpoint->path);
      page.Text(fmt::format(" (step {})", checkpoint->step));
    } else {
      page.Text("- (none kept)");
    }
    page.Raw("</div>");
    if (!reproduce.empty()) {
      page.Raw("<div><span class=\"label\">reproduce</span>");
      page.Element("code", reproduce);
      page.Raw("</div>");
    }
    page.Raw("</td></tr>\n");
  }
  page.Raw("</table></div>\n");

  // Why trials did not complete.
  std::vector<const TrialRecord*> unfinished;
  for (const auto& trial : data.trials) {
    if (trial.state == TrialState::kInfeasible || trial.state == TrialState::kFailed) unfinished.push_back(&trial);
  }
  if (!unfinished.empty()) {
    page.Element("h3", fmt::format("Infeasible and failed trials ({})", unfinished.size()));
    page.Raw("<div class=\"table-wrap\"><table>\n<tr>");
    for (const char* header : {"trial", "sub-study", "state", "reason"}) page.Element("th", header);
    page.Raw("</tr>\n");
    constexpr std::size_t kMaxRows = 50;
    for (std::size_t i = 0; i < unfinished.size() && i < kMaxRows; ++i) {
      const TrialRecord& trial = *unfinished[i];
      page.Raw("<tr>");
      page.Element("td", fmt::format("{}", trial.number), "class=\"num\"");
      page.Element("td", trial.substudy_label);
      page.Element("td", TrialStateName(trial.state));
      page.Element("td", trial.reason.empty() ? "-" : trial.reason);
      page.Raw("</tr>\n");
    }
    page.Raw("</table></div>\n");
    if (unfinished.size() > kMaxRows) {
      page.Element("p",
                   fmt::format("… and {} more (dltune show {} lists every trial).", unfinished.size() - kMaxRows,
                               data.study.name),
                   "class=\"empty\"");
    }
  }
  page.Raw("</section>\n");
}

// A curve's series and where its points come from (training steps or evaluations: both may be "train/loss").
struct SeriesKey {
  std::string name;
  CurveSource source = CurveSource::kEvaluation;
  bool operator==(const SeriesKey&) const = default;
  bool operator<(const SeriesKey& other) const { return std::tie(name, source) < std::tie(other.name, other.source); }
};

// The series in the order the report shows them: the objective, the training loss of every step, then the
// evaluations by name.
std::vector<SeriesKey> SeriesOrder(const std::vector<TrainingCurve>& curves, const ObjectiveRef& objective) {
  std::set<SeriesKey> found;
  for (const auto& curve : curves) found.insert({curve.series, curve.source});
  std::vector<SeriesKey> order;
  for (const SeriesKey& first :
       {SeriesKey{objective.Name(), CurveSource::kEvaluation}, SeriesKey{"train/loss", CurveSource::kTrainingSteps}}) {
    if (found.erase(first) > 0) order.push_back(first);
  }
  order.insert(order.end(), found.begin(), found.end());
  return order;
}

std::string SeriesCaption(const SeriesKey& series, const ObjectiveRef& objective) {
  if (series.source == CurveSource::kTrainingSteps) return series.name + ", every training step";
  if (series.name == objective.Name()) return series.name + ", the objective, at each evaluation";
  return series.name + ", at each evaluation";
}

}  // namespace

std::optional<CheckpointRecord> BestCheckpoint(const std::vector<CheckpointRecord>& checkpoints,
                                               std::optional<std::int64_t> best_step) {
  std::optional<CheckpointRecord> found;
  auto rank = [&](const CheckpointRecord& c) {
    // Higher is better: at the best step, then in the best pool, then newer.
    return std::make_tuple(best_step && c.step == *best_step, c.pool == CheckpointPool::kBest, c.step);
  };
  for (const auto& c : checkpoints) {
    if (c.deleted) continue;
    if (!(best_step && c.step == *best_step) && c.pool != CheckpointPool::kBest) continue;
    if (!found || rank(c) > rank(*found)) found = c;
  }
  return found;
}

fs::path FindWebDir() {
  std::vector<std::string> looked;
  if (const char* env = std::getenv("DLTUNE_WEB_DIR"); env != nullptr && *env != '\0') {
    if (auto dir = WebDirAt(env)) return *dir;
    throw Error(fmt::format(
        "DLTUNE_WEB_DIR={} holds no vega/build/vega.min.js, vega-lite/build/vega-lite.min.js and "
        "vega-embed/build/vega-embed.min.js, nor does its node_modules/ (point it at the source tree's web/ after "
        "running scripts/setup, or unset it)",
        env));
  }
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    const fs::path installed = exe.parent_path().parent_path() / "share" / "dltune" / "web";
    if (auto dir = WebDirAt(installed)) return *dir;
    looked.push_back(installed.string());
  }
#ifdef DLTUNE_SOURCE_WEB_DIR
  if (auto dir = WebDirAt(DLTUNE_SOURCE_WEB_DIR)) return *dir;
  looked.emplace_back(DLTUNE_SOURCE_WEB_DIR);
#endif
  std::string where;
  for (const auto& dir : looked) where += (where.empty() ? "" : ", ") + dir;
  throw Error(
      fmt::format("the report's charting libraries (vega, vega-lite, vega-embed) are not installed: looked in "
                  "{}; run scripts/setup (npm ci --prefix web) or set DLTUNE_WEB_DIR to a directory holding "
                  "them",
                  where.empty() ? "no directory" : where));
}

std::string CurveTrialsNote(const StudyData& shown, const StudyData& all) {
  if (shown.trials.size() >= all.trials.size()) return "";
  return fmt::format("{} of the {} trials: the running ones and each sub-study's best", shown.trials.size(),
                     all.trials.size());
}

std::string HtmlEscape(std::string_view text) {
  const std::string clean = SanitizeUtf8(text);
  std::string escaped;
  escaped.reserve(clean.size() + clean.size() / 8);
  for (const char c : clean) {
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&#39;"; break;
      default: escaped += c;
    }
  }
  return escaped;
}

std::string ScriptJson(const json& value) {
  const std::string text = value.dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '<': safe += "\\u003c"; break;
      case '>': safe += "\\u003e"; break;
      case '&': safe += "\\u0026"; break;
      default: safe += c;
    }
  }
  return safe;
}

std::string InlineScript(std::string_view source) {
  std::string safe;
  safe.reserve(source.size());
  for (std::size_t i = 0; i < source.size(); ++i) {
    if (source.compare(i, 4, "<!--") == 0) {
      safe += "\\x3C!--";
      i += 3;
      continue;
    }
    if (source[i] == '<' && source.size() - i >= 8 && source[i + 1] == '/') {
      std::string word(source.substr(i + 2, 6));
      std::transform(word.begin(), word.end(), word.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      if (word == "script") {
        safe += "<\\/";
        ++i;
        continue;
      }
    }
    safe += source[i];
  }
  return safe;
}

std::string RenderReport(const StudyData& data, const ReportOptions& options) {
  // The libraries first: a missing install is the likeliest failure, and it needs no analysis to report.
  const fs::path web_dir = options.web_dir.empty() ? FindWebDir() : options.web_dir;
  if (!HoldsLibraries(web_dir)) {
    throw Error(fmt::format("{} does not hold the charting libraries ({}, ...); run scripts/setup to install them",
                            web_dir.string(), kLibraries[0]));
  }
  std::string libraries;
  for (const char* file : kLibraries) {
    libraries += fmt::format("<script>/* {} */\n{}\n</script>\n", file, InlineScript(ReadFile(web_dir / file)));
  }

  const ObjectiveRef objective = ObjectiveOf(data.spec);
  const StudySummary summary = SummarizeStudy(data.study, data.trials);
  ChartOptions chart;
  std::set<std::string> seen;
  for (const auto& trial : data.trials) {
    if (seen.insert(trial.substudy_label).second) chart.substudies.push_back(trial.substudy_label);
  }
  ChartOptions wide = chart;
  wide.width = 980;
  wide.height = 300;
  ChartOptions small_curves = chart;
  small_curves.width = 400;
  small_curves.height = 210;

  Page page;
  page.Raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
  page.Raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
  page.Raw("<meta name=\"generator\" content=\"dltune ");
  page.Text(kVersion);
  page.Raw("\">\n");
  page.Element("title", fmt::format("{} — dltune report", data.study.name));
  page.Raw("\n<style>");
  page.Raw(kStyle);
  page.Raw("</style>\n</head>\n<body>\n<main>\n");

  page.Raw("<header class=\"study\"><div class=\"kicker\">dltune study report</div>");
  page.Element("h1", data.study.name);
  if (!data.study.description.empty()) page.Element("p", data.study.description, "class=\"lead\"");
  page.Raw(
      "<nav class=\"toc\"><a href=\"#record\">Record</a><a href=\"#diagnostics\">Checklist</a>"
      "<a href=\"#best-trials\">Best trials</a><a href=\"#isolation\">Isolation plots</a>"
      "<a href=\"#axis-plots\">Axis plots</a><a href=\"#curves\">Training curves</a>"
      "<a href=\"#best-steps\">Best steps</a><a href=\"#gradients\">Gradient norms</a>"
      "<a href=\"#enough\">Have we sampled enough?</a></nav></header>\n");

  RenderTracking(page, data, summary);
  RenderDiagnostics(page, Diagnose(data));
  RenderTopTrials(page, data, options, objective);

  // Isolation plots.
  Section(page, "isolation", "Isolation plots: is the change useful?",
          "For each value of a scientific hyperparameter, the best trial once the nuisance hyperparameters are "
          "optimized away (the best trial among those sharing the value). Compare these, not individual trials.");
  const auto isolation = IsolationPlots(data);
  if (isolation.empty()) {
    page.Element("p", "This study has no scientific hyperparameter to compare.", "class=\"empty\"");
  } else {
    page.Raw("<div class=\"charts\">\n");
    for (const auto& plot : isolation) {
      page.Chart(IsolationPlotSpec(plot, objective, chart),
                 fmt::format("best {} per {}", objective.Name(), plot.param_name));
    }
    page.Raw("</div>\n");
  }
  page.Raw("</section>\n");

  // Axis plots.
  Section(page, "axis-plots", "Hyperparameter axis plots: are the search space's boundaries good?",
          "Each point is a trial's best objective against one hyperparameter; dashed lines are the search space's "
          "bounds. When the best trials crowd against a bound, the space should be expanded that way. Red crosses "
          "are infeasible trials, at their value (along the edge of worse values when they never produced an "
          "objective).");
  const auto axis_plots = HyperparameterAxisPlots(data);
  if (axis_plots.empty()) {
    page.Element("p", "No hyperparameter varies in this study.", "class=\"empty\"");
  } else {
    page.Raw("<div class=\"charts\">\n");
    for (const auto& plot : axis_plots) {
      page.Chart(
          AxisPlotSpec(plot, objective, chart),
          fmt::format(
              "{} ({}{}{})", plot.param_name, RoleName(plot.role),
              plot.param_id != plot.param_name ? ", id " + plot.param_id : "",
              plot.lower && plot.upper ? fmt::format(", searched in [{:g}, {:g}]", *plot.lower, *plot.upper) : ""));
    }
    page.Raw("</div>\n");
  }
  page.Raw("</section>\n");

  // Training curves: of the best trials only when there are too many to draw one line each.
  const StudyData shown = SubsetOfTrials(data, CurveTrials(data, options.max_curve_trials));
  const std::string drawn = CurveTrialsNote(shown, data);
  Section(page, "curves", "Training curves",
          "Every trial's curves against the step: the 3 best trials of each sub-study drawn strong, the others faint, "
          "colored by sub-study; diamonds mark each trial's best step (the checkpoint retrospective selection keeps). "
          "A \"zoomed\" axis covers the strong curves and clips the others. "
          "Look for overfitting (the validation objective getting worse after its best step), high step-to-step "
          "variance late in training, and a training loss that rises (often a pipeline bug)." +
              (drawn.empty() ? "" : " Drawn: " + drawn + "."));
  const auto curves = TrainingCurves(shown);
  if (curves.empty()) {
    page.Element("p", "No trial has reported measurements yet.", "class=\"empty\"");
  } else {
    // Wide: the objective, the training loss and the objective's metric on the training split (the generalization
    // gap); the other evaluations smaller, below.
    const std::vector<SeriesKey> order = SeriesOrder(curves, objective);
    const SeriesKey train_objective{"train/" + objective.metric, CurveSource::kEvaluation};
    auto primary = [&](const SeriesKey& series) {
      return series == SeriesKey{objective.Name(), CurveSource::kEvaluation} ||
             series == SeriesKey{"train/loss", CurveSource::kTrainingSteps} || series == train_objective;
    };
    page.Raw("<div class=\"charts\">\n");
    for (const SeriesKey& series : order) {
      if (!primary(series)) continue;
      const bool is_objective = series.source == CurveSource::kEvaluation && series.name == objective.Name();
      page.Chart(TrainingCurvesSpec(curves, series.name, series.source, is_objective, wide),
                 SeriesCaption(series, objective), "wide");
    }
    page.Raw("</div>\n");
    const auto others = std::count_if(order.begin(), order.end(), [&](const SeriesKey& k) { return !primary(k); });
    if (others > 0) {
      page.Element("h3", fmt::format("Other evaluations ({})", others));
      page.Raw("<div class=\"charts\">\n");
      for (const SeriesKey& series : order) {
        if (primary(series)) continue;
        page.Chart(TrainingCurvesSpec(curves, series.name, series.source, false, small_curves),
                   SeriesCaption(series, objective));
      }
      page.Raw("</div>\n");
    }
  }
  page.Raw("</section>\n");

  // Best steps.
  Section(page, "best-steps", "Best step vs max_train_steps: is the step budget right?",
          "Where in training each completed trial reached its best objective. Best steps in the last 25% of training "
          "mean the trials are likely compute-bound (train longer); all of them in the first 10% mean "
          "max_train_steps is higher than needed.");
  const auto best_steps = BestSteps(data);
  if (best_steps.empty()) {
    page.Element("p", "No completed trial has a best step yet.", "class=\"empty\"");
  } else {
    page.Raw("<div class=\"charts\">\n");
    page.Chart(BestStepSpec(best_steps, data.spec.max_train_steps, objective, chart),
               fmt::format("{} completed trials", best_steps.size()));
    page.Raw("</div>\n");
  }
  page.Raw("</section>\n");

  // Gradient norms.
  const GradientNorms norms = GradientNormAnalysis(data);
  std::string gradient_text =
      "The global gradient norm before clipping. The playbook suggests clipping at about the 90th percentile of "
      "the norms, and lowering the learning rate instead when clipping would act on most steps.";
  if (norms.p90) gradient_text += fmt::format(" Here: 90th percentile {:.4g} over {} steps.", *norms.p90, norms.steps);
  if (norms.clipped_fraction) {
    gradient_text += fmt::format(" Steps clipped: {:.1f}%.", 100 * *norms.clipped_fraction);
  }
  Section(page, "gradients", "Gradient norms: how to clip", gradient_text);
  if (norms.steps == 0 || (norms.curves.empty() && norms.histogram.empty())) {
    page.Element("p", "No trial reported gradient norms.", "class=\"empty\"");
  } else {
    page.Raw("<div class=\"charts\">\n");
    if (!norms.curves.empty()) {
      GradientNorms with_shown_curves = norms;
      if (!drawn.empty()) with_shown_curves.curves = GradientNormAnalysis(shown).curves;
      page.Chart(GradientNormCurvesSpec(with_shown_curves, chart),
                 fmt::format("gradient norm by step, {}; dashed red: the 90th percentile",
                             drawn.empty() ? "every trial" : "the trials of the training curves"));
    }
    if (!norms.histogram.empty()) page.Chart(GradientNormHistogramSpec(norms, chart), "every recorded gradient norm");
    page.Raw("</div>\n");
  }
  page.Raw("</section>\n");

  // Bootstrap.
  Section(page, "enough", "Have we sampled enough?",
          "For each number of trials, the best objective of that many trials drawn (with replacement) from the "
          "completed ones, over many draws: whiskers from the least to the most, boxes the middle half, ticks the "
          "median. When the boxes still move or stay wide at the right, more trials would likely find better "
          "results.");
  const auto bootstrap = BootstrapBestObjective(data, options.bootstrap_resamples, options.bootstrap_seed);
  bool any_box = false;
  page.Raw("<div class=\"charts\">\n");
  for (const auto& plot : bootstrap) {
    if (plot.boxes.empty()) continue;
    any_box = true;
    page.Chart(BootstrapSpec(plot, objective, chart),
               fmt::format("sub-study {}: {} completed trial{}", plot.substudy, plot.boxes.back().budget,
                           plot.boxes.back().budget == 1 ? "" : "s"));
  }
  page.Raw("</div>\n");
  if (!any_box) page.Element("p", "No trial has completed yet.", "class=\"empty\"");
  page.Raw("</section>\n");

  page.Raw("<footer>");
  page.Text(fmt::format("Made by dltune {}{}{}. Charts drawn with Vega-Lite; this file needs no network.", kVersion,
                        *kBuildCommit != '\0' ? fmt::format(" ({})", kBuildCommit) : "",
                        options.generated_at.empty() ? "" : " on " + options.generated_at));
  page.Raw("</footer>\n</main>\n");

  page.Raw(libraries);
  page.Raw("<script type=\"application/json\" id=\"dltune-chart-specs\">");
  page.Raw(ScriptJson(page.charts()));
  page.Raw("</script>\n<script>");
  page.Raw(kDrawScript);
  page.Raw("</script>\n</body>\n</html>\n");
  return std::move(page.out());
}

}  // namespace dltune
