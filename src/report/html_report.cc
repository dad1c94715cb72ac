#include "dltune/report/html_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/files.h"
#include "core/strings.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/throughput.h"
#include "dltune/analyze/trial_variance.h"
#include "dltune/core/error.h"
#include "dltune/core/training_settings.h"
#include "dltune/version.h"
#include "report/reproduce_text.h"
#include "report/study_page.h"
#include "report_assets.h"
#include "store/tracking.h"
#include "store/trial_resources.h"
#include "vega_specs.h"

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

// A file:// URL of `path` (made absolute), every byte but unreserved ones and '/' percent-encoded.
std::string FileUrl(const fs::path& path) {
  std::string url = "file://";
  for (const char c : fs::absolute(path).lexically_normal().string()) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) != 0 || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
      url += c;
    } else {
      url += fmt::format("%{:02X}", byte);
    }
  }
  return url;
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
  void Chart(std::string_view name, json spec, std::string_view caption, bool wide) {
    const std::string id = fmt::format("chart-{}", charts_.size());
    out_ += fmt::format("<figure class=\"chart-box{}\" data-chart=\"{}\"><div class=\"chart\" id=\"{}\"></div>",
                        wide ? " wide" : "", HtmlEscape(name), id);
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

void Section(Page& page, std::string_view id, std::string_view title, std::string_view explanation) {
  page.Raw(fmt::format("<section id=\"{}\">\n", id));
  page.Element("h2", title);
  if (!explanation.empty()) page.Element("p", explanation, "class=\"explain\"");
}

void RenderCharts(Page& page, const std::vector<PageChart>& charts) {
  page.Raw("<div class=\"charts\">\n");
  for (const PageChart& chart : charts) page.Chart(chart.id, chart.spec, chart.caption, chart.wide);
  page.Raw("</div>\n");
}

void RenderSection(Page& page, const PageSection& section) {
  Section(page, section.id, section.title, section.explanation);
  if (section.charts.empty() && section.more_charts.empty() && section.folded_charts.empty()) {
    page.Element("p", section.empty_text, "class=\"empty\"");
  } else {
    RenderCharts(page, section.charts);
    if (!section.more_charts.empty()) {
      page.Element("h3", section.more_title);
      RenderCharts(page, section.more_charts);
    }
    if (!section.folded_charts.empty()) {
      page.Raw("<details class=\"folded\">");
      page.Element("summary", section.folded_title);
      RenderCharts(page, section.folded_charts);
      page.Raw("</details>\n");
    }
  }
  page.Raw("</section>\n");
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
  if (!data.spec.goal.empty()) FactRow(page, "goal", data.spec.goal);
  FactRow(page, "spec", study.spec_path.empty() ? "-" : study.spec_path, true);
  FactRow(page, "spec sha256", study.spec_hash.empty() ? "-" : study.spec_hash, true);
  FactRow(page, "created",
          fmt::format("{} by dltune {}", FormatTime(study.created_at),
                      study.dltune_version.empty() ? "?" : study.dltune_version));
  FactRow(page, "last change", FormatTime(study.updated_at));
  FactRow(page, "git commit",
          study.git_commit.empty()
              ? "- (not created in a git checkout)"
              : study.git_commit + (study.git_dirty.value_or(false) ? " (with uncommitted changes)" : ""),
          true);
  if (!data.spec.procedure.empty()) {
    FactRow(page, "planned from",
            fmt::format("study {} (dltune plan {})", data.spec.procedure.parent, data.spec.procedure.kind));
  }
  if (!data.children.empty()) FactRow(page, "planned from it", fmt::format("{}", fmt::join(data.children, ", ")));
  FactRow(page, "trains",
          !data.spec.workload.name.empty() ? "workload " + data.spec.workload.name
          : !data.spec.command.empty()     ? "command: " + data.spec.command
                                           : "a program using the ask/tell API");
  FactRow(page, "objective", summary.objective.Describe());
  FactRow(page, "max_train_steps",
          fmt::format("{} (evaluated every {} steps)", data.spec.max_train_steps,
                      data.spec.training.Resolved(data.spec.max_train_steps).eval_every_steps));
  FactRow(page, "trials", summary.StateText());
  auto best_text = [&](const BestTrial& best) {
    return fmt::format("{} {} — trial {}{}{}", summary.objective.Name(), best.ValueText(), best.number,
                       best.stats ? " (median replica)" : "", best.step ? fmt::format(" at step {}", *best.step) : "");
  };
  if (data.spec.procedure.kind == "throughput") {
    const Throughput throughput = AnalyzeThroughput(data);
    FactRow(page, "batch size",
            !throughput.untrustworthy.empty() ? "none recommended: " + throughput.untrustworthy
            : throughput.worth_using
                ? fmt::format("at most {}, the largest whose doubling still paid", *throughput.worth_using)
                : "- (not measured yet)");
  } else {
    FactRow(page, "best", summary.best ? best_text(*summary.best) : "- (no trial completed yet)");
  }
  if (summary.best_per_substudy.size() > 1 && data.spec.procedure.kind != "throughput") {
    for (const auto& best : summary.best_per_substudy) FactRow(page, "best of " + best.substudy_label, best_text(best));
  }
  FactRow(page, "created with", summary.reproduce.empty() ? "-" : summary.reproduce, true);
  for (const auto& [label, text] : ReproductionFacts(study)) FactRow(page, label, text, label == "environment");
  if (const std::string runtimes = TrialRuntimesText(data.trials); !runtimes.empty()) {
    FactRow(page, "trial runtimes", runtimes);
  }
  if (!study.reproduction.empty()) {
    FactRow(page, "reproduce", fmt::format("dltune show {} --reproduce", ShellQuote(study.name)), true);
  }
  for (const StudyNote& note : data.notes) {
    FactRow(page, fmt::format("{} {}", NoteKindName(note.kind), FormatTime(note.created_at)),
            (note.kind == NoteKind::kDecision ? "adopt " + note.adopt + ": " : std::string()) + note.text +
                (note.author.empty() ? "" : " (" + note.author + ")"));
  }
  const auto tests = std::count_if(data.evaluations.begin(), data.evaluations.end(),
                                   [](const CheckpointEvaluation& e) { return e.split == "test"; });
  for (const LaunchRecord& launch : data.launches) {
    const auto metric = launch.evaluation.metrics.find(summary.objective.metric);
    FactRow(page, fmt::format("launch {}", launch.id),
            fmt::format("{} by {}: trial {} at step {}, test {} {}; {} — model {}", FormatTime(launch.created_at),
                        launch.author, launch.evaluation.trial, launch.evaluation.step, summary.objective.metric,
                        metric == launch.evaluation.metrics.end() ? "-" : Format(metric->second), launch.reason,
                        launch.export_path));
  }
  if (tests > 0) FactRow(page, "test evaluations", fmt::format("{} (the playbook checks the test set once)", tests));
  page.Raw("</table>\n</section>\n");
}

void RenderDiagnostics(Page& page, const std::vector<Diagnostic>& diagnostics) {
  Section(page, "diagnostics", "Checklist",
          "The playbook's questions about a study, answered from its records: search-space boundaries, infeasible "
          "trials, overfitting, noise late in training, the step budget, input pipeline and clipping. Most serious "
          "first; those a note marks handled (dltune note STUDY --resolves ID) last.");
  if (diagnostics.empty()) {
    page.Element("p", "Nothing to report: no check of the checklist found a problem in this study's records.",
                 "class=\"ok\"");
  } else {
    page.Raw("<ol class=\"diagnostics\">\n");
    for (const Diagnostic& d : diagnostics) {
      // A finding a note marks handled (dltune note --resolves) is shown as doctor shows it: handled, by that note.
      const std::string severity = d.handled.empty() ? SeverityName(d.severity) : "handled";
      page.Raw(fmt::format("<li class=\"{}\" data-finding=\"{}\">", HtmlEscape(severity), HtmlEscape(d.id)));
      page.Element("span", severity, "class=\"badge\"");
      page.Element("span", d.title, "class=\"diag-title\"");
      if (!d.handled.empty()) {
        page.Element("p", fmt::format("Marked handled by {} ({})", d.handled, d.id), "class=\"diag-handled\"");
        page.Raw("</li>\n");
        continue;
      }
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

void RenderTopTrials(Page& page, const StudyData& data, const ReportOptions& options, const Objective& objective) {
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
    std::optional<fs::path> trace;
    if (extras != options.extras.end()) {
      checkpoint = BestCheckpoint(extras->second.checkpoints, trial.best_step);
      reproduce = extras->second.reproduce;
      trace = FindProfileTrace(extras->second.checkpoints);
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
    if (const std::string group = DescribeFusedGroup(FusedGroupOf(trial.resources), trial.number); !group.empty()) {
      page.Raw("<div><span class=\"label\">fused</span>");
      page.Text(group);
      page.Raw("</div>");
    }
    if (const auto gpu = ParseGpuUsage(trial.resources)) {
      page.Raw("<div><span class=\"label\">gpu</span>");
      page.Text(DescribeGpuUsage(*gpu));
      page.Raw("</div>");
    }
    if (trace) {
      page.Raw("<div class=\"profile\"><span class=\"label\">profile</span>");
      page.Raw(fmt::format("<a href=\"{}\">", HtmlEscape(FileUrl(*trace))));
      page.Element("code", trace->string());
      page.Raw("</a> ");
      page.Text(fmt::format("(a trace of steps {}: open it in ui.perfetto.dev or chrome://tracing)",
                            data.spec.training.profile_steps.empty() ? "?" : data.spec.training.profile_steps));
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

}  // namespace

std::optional<fs::path> FindProfileTrace(const std::vector<CheckpointRecord>& checkpoints) {
  std::set<fs::path> looked;
  for (const CheckpointRecord& checkpoint : checkpoints) {
    const fs::path step_dir = fs::path(checkpoint.path).lexically_normal();
    if (!step_dir.has_filename() || !step_dir.has_parent_path()) continue;
    const fs::path trace = ProfileTracePath(step_dir.parent_path());
    if (!looked.insert(trace).second) continue;
    std::error_code error;
    if (fs::is_regular_file(trace, error)) return trace;
  }
  return std::nullopt;
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

namespace {

// The charting libraries, inlined; throws Error naming scripts/setup when they are not installed.
std::string InlinedLibraries(const fs::path& given) {
  // The libraries first: a missing install is the likeliest failure, and it needs no analysis to report.
  const fs::path web_dir = given.empty() ? FindWebDir() : given;
  if (!HoldsLibraries(web_dir)) {
    throw Error(fmt::format("{} does not hold the charting libraries ({}, ...); run scripts/setup to install them",
                            web_dir.string(), kLibraries[0]));
  }
  std::string libraries;
  for (const char* file : kLibraries) {
    libraries += fmt::format("<script>/* {} */\n{}\n</script>\n", file, InlineScript(ReadWholeFile(web_dir / file)));
  }
  return libraries;
}

// The document's head, up to the start of <main>.
void BeginPage(Page& page, const std::string& title) {
  page.Raw("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
  page.Raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
  page.Raw("<meta name=\"generator\" content=\"dltune ");
  page.Text(kVersion);
  page.Raw("\">\n");
  page.Element("title", title);
  page.Raw("\n<style>");
  page.Raw(internal::kReportCss);
  page.Raw("</style>\n</head>\n<body>\n<main>\n");
}

// The footer, the libraries and the charts' specs, and the end of the document.
std::string EndPage(Page& page, const std::string& libraries, const std::string& generated_at) {
  page.Raw("<footer>");
  page.Text(fmt::format("Made by dltune {}{}{}. Charts drawn with Vega-Lite; this file needs no network.", kVersion,
                        *kBuildCommit != '\0' ? fmt::format(" ({})", kBuildCommit) : "",
                        generated_at.empty() ? "" : " on " + generated_at));
  page.Raw("</footer>\n</main>\n");
  page.Raw(libraries);
  page.Raw("<script type=\"application/json\" id=\"dltune-chart-specs\">");
  page.Raw(ScriptJson(page.charts()));
  page.Raw("</script>\n<script>");
  page.Raw(internal::kReportJs);
  page.Raw("</script>\n</body>\n</html>\n");
  return std::move(page.out());
}

}  // namespace

std::string RenderReport(const StudyData& data, const ReportOptions& options) {
  const std::string libraries = InlinedLibraries(options.web_dir);
  const Objective objective = data.spec.objective;
  const StudySummary summary = SummarizeStudy(data.study, data.trials);

  Page page;
  BeginPage(page, fmt::format("{} — dltune report", data.study.name));
  page.Raw("<header class=\"study\"><div class=\"kicker\">dltune study report</div>");
  page.Element("h1", data.study.name);
  if (!data.study.description.empty()) page.Element("p", data.study.description, "class=\"lead\"");
  const StudyPage study_page = BuildStudyPage(data, {.max_curve_trials = options.max_curve_trials,
                                                     .bootstrap_resamples = options.bootstrap_resamples,
                                                     .bootstrap_seed = options.bootstrap_seed});
  const std::vector<PageSection>& sections = study_page.sections;
  // A throughput sweep measures speed: ranking its batch sizes by validation quality is the playbook's "tuning the
  // batch size for validation performance" mistake.
  const bool ranked = data.spec.procedure.kind != "throughput";
  page.Raw(std::string("<nav class=\"toc\"><a href=\"#record\">Record</a><a href=\"#diagnostics\">Checklist</a>") +
           (ranked ? "<a href=\"#best-trials\">Best trials</a>" : ""));
  for (const PageSection& section : sections) {
    page.Raw(fmt::format("<a href=\"#{}\">", section.id));
    page.Text(section.title.substr(0, section.title.find(':')));
    page.Raw("</a>");
  }
  page.Raw("</nav></header>\n");

  RenderTracking(page, data, summary);
  RenderDiagnostics(page, study_page.diagnostics);
  if (ranked) RenderTopTrials(page, data, options, objective);

  for (const PageSection& section : sections) RenderSection(page, section);
  return EndPage(page, libraries, options.generated_at);
}

std::string RenderComparison(const StudyData& a, const StudyData& b, const ReportOptions& options) {
  const std::string libraries = InlinedLibraries(options.web_dir);
  const StudyComparison comparison = CompareStudies(a, b, options.bootstrap_resamples, options.bootstrap_seed);
  const Objective& objective = comparison.objective;
  Page page;
  BeginPage(page, fmt::format("{} vs {} — dltune comparison", a.study.name, b.study.name));
  page.Raw("<header class=\"study\"><div class=\"kicker\">dltune comparison</div>");
  page.Element("h1", fmt::format("{} vs {}", a.study.name, b.study.name));
  page.Raw(
      "<nav class=\"toc\"><a href=\"#record\">Records</a><a href=\"#budget\">At equal budget</a>"
      "<a href=\"#isolation\">Isolation plots</a><a href=\"#variance\">Trial variance</a>"
      "<a href=\"#curves\">Curves</a></nav></header>\n");

  // The two records side by side.
  page.Raw("<section id=\"record\">\n");
  page.Element("h2", "Records");
  page.Raw("<table class=\"facts\">\n<tr><th></th>");
  page.Element("th", a.study.name);
  page.Element("th", b.study.name);
  page.Raw("</tr>\n");
  const auto row = [&](std::string_view label, const std::string& left, const std::string& right) {
    page.Raw("<tr>");
    page.Element("th", label);
    page.Element("td", left);
    page.Element("td", right);
    page.Raw("</tr>\n");
  };
  const StudySummary sa = SummarizeStudy(a.study, a.trials);
  const StudySummary sb = SummarizeStudy(b.study, b.trials);
  row("description", a.study.description, b.study.description);
  row("goal", a.spec.goal.empty() ? "-" : a.spec.goal, b.spec.goal.empty() ? "-" : b.spec.goal);
  row("planned from", a.spec.procedure.parent.empty() ? "-" : a.spec.procedure.parent,
      b.spec.procedure.parent.empty() ? "-" : b.spec.procedure.parent);
  row("max_train_steps", std::to_string(a.spec.max_train_steps), std::to_string(b.spec.max_train_steps));
  row("trials", sa.StateText(), sb.StateText());
  const auto best = [&](const StudySummary& s) { return s.best ? s.best->ValueText() : std::string("-"); };
  row("best " + objective.Name(), best(sa), best(sb));
  const auto box = [&](const ComparedStudy& c) {
    if (c.completed == 0) return std::string("-");
    return fmt::format("median {} (middle half {} to {})", Format(c.at_equal_budget.median),
                       Format(c.at_equal_budget.q1), Format(c.at_equal_budget.q3));
  };
  row(fmt::format("best of {} trials", comparison.budget), box(comparison.a), box(comparison.b));
  const auto decision = [](const StudyData& d) {
    std::string text = "-";
    for (const StudyNote& note : d.notes) {
      if (note.kind == NoteKind::kDecision) text = "adopt " + note.adopt + ": " + note.text;
    }
    return text;
  };
  row("decision", decision(a), decision(b));
  page.Raw("</table>\n");
  if (!comparison.no_verdict.empty()) {
    page.Element("p", fmt::format("No verdict: {}.", comparison.no_verdict), "class=\"explain\"");
  } else if (comparison.by_means) {
    page.Element("p",
                 fmt::format("{}'s best configuration has the better mean {}{}.", comparison.better, objective.Name(),
                             comparison.overlap ? ", but the 95% intervals of the means overlap: within the noise"
                                                : ", beyond the noise: the 95% intervals of the means do not overlap"),
                 "class=\"explain\"");
  } else {
    page.Element("p",
                 fmt::format("At equal budget ({} trials each, resampled), {} finds the better {}{}.",
                             comparison.budget, comparison.better, objective.Name(),
                             comparison.overlap ? ", but the middle halves of their outcomes overlap: the choice of "
                                                  "trials alone (study variance) could explain the difference"
                                                : ", and the middle halves of their outcomes do not overlap"),
                 "class=\"explain\"");
  }
  page.Raw("</section>\n");

  Section(page, "budget", "At equal budget: which study finds the better result?",
          "The best objective of as many trials as the smaller study completed, drawn again and again from each "
          "study's completed trials: a study with more trials does not win by its budget alone.");
  page.Raw("<div class=\"charts\">\n");
  page.Chart("budget", EqualBudgetSpec(comparison),
             fmt::format("best {} of {} trials", objective.Name(), comparison.budget), false);
  page.Raw("</div>\n</section>\n");

  // The studies' own sections, side by side.
  const auto sections_of = [&](const StudyData& data, const std::string& id) {
    std::vector<PageChart> charts;
    for (const PageSection& section : StudyPageSections(data, {.max_curve_trials = 0}, PageParts::kRecords)) {
      if (section.id != id) continue;
      for (PageChart chart : section.charts) {
        chart.caption = data.study.name + ": " + chart.caption;
        charts.push_back(std::move(chart));
      }
    }
    return charts;
  };
  for (const auto& [id, title, explanation] :
       {std::tuple<std::string, std::string, std::string>{
            "isolation", "Isolation plots, side by side",
            "Each study's best result per scientific value, its nuisance hyperparameters optimized away."},
        {"variance", "Trial variance, side by side",
         "Each study's configurations trained several times (when it has replicas), with their 95% intervals."}}) {
    Section(page, id, title, explanation);
    std::vector<PageChart> charts = sections_of(a, id);
    for (PageChart& chart : sections_of(b, id)) charts.push_back(std::move(chart));
    if (charts.empty()) page.Element("p", "Neither study has these.", "class=\"empty\"");
    RenderCharts(page, charts);
    page.Raw("</section>\n");
  }

  // The best trial of each sub-study of both studies, their objective curves on one chart.
  Section(page, "curves", "Training curves, overlaid",
          "The objective of each sub-study's best trial of both studies against the step: the playbook's with and "
          "without comparison.");
  std::vector<TrainingCurve> curves;
  std::vector<std::string> labels;
  for (const StudyData* data : {&a, &b}) {
    const auto best_numbers = TopTrials(*data, 1);
    for (TrainingCurve& curve : TrainingCurves(*data, 1)) {
      if (std::find(best_numbers.begin(), best_numbers.end(), curve.trial) == best_numbers.end()) continue;
      curve.substudy = data->study.name + ": " + curve.substudy;
      curve.highlighted = true;
      if (std::find(labels.begin(), labels.end(), curve.substudy) == labels.end()) labels.push_back(curve.substudy);
      curves.push_back(std::move(curve));
    }
  }
  page.Raw("<div class=\"charts\">\n");
  page.Chart("curves",
             TrainingCurvesSpec(curves, objective.Name(), CurveSource::kEvaluation, true,
                                {.width = 900, .height = 300, .substudies = labels}),
             objective.Name() + " of the best trials", true);
  page.Raw("</div>\n</section>\n");
  return EndPage(page, libraries, options.generated_at);
}

}  // namespace dltune
