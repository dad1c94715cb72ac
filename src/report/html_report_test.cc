#include "dltune/report/html_report.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/core/error.h"
#include "dltune/report/dashboard_api.h"
#include "dltune/report/study_data.h"
#include "dltune/store/store.h"
#include "report/study_page.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kHostile = "<img src=x onerror=alert(1)> & \"quotes\" </script><!--";

TEST(HtmlEscape, EscapesMarkupAndRepairsUtf8) {
  EXPECT_EQ(HtmlEscape("<a href='x'>&\"</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;");
  EXPECT_EQ(HtmlEscape(std::string("a\xff"
                                   "b\0c",
                                   5)),
            "a\xEF\xBF\xBD"
            "bc");
  EXPECT_EQ(HtmlEscape("plain ü"), "plain ü");
}

TEST(ScriptJson, CannotCloseTheScriptElementAndParsesBack) {
  const nlohmann::json value = {{"text", kHostile}, {"bad", std::string("\xff")}, {"ls", "\u2028"}};
  const std::string text = ScriptJson(value);
  EXPECT_THAT(text, Not(HasSubstr("<")));
  EXPECT_THAT(text, Not(HasSubstr(">")));
  EXPECT_THAT(text, Not(HasSubstr("&")));
  for (const char c : text) EXPECT_LT(static_cast<unsigned char>(c), 0x80);
  const auto back = nlohmann::json::parse(text);
  EXPECT_EQ(back.at("text"), kHostile);
  EXPECT_EQ(back.at("bad"), "\xEF\xBF\xBD");
  EXPECT_EQ(back.at("ls"), "\u2028");
}

TEST(InlineScript, RewritesWhatWouldEndOrConfuseTheScriptElement) {
  EXPECT_EQ(InlineScript("var a = '</script>'; var b = \"</SCRIPT \"; var c = /<!--/;"),
            "var a = '<\\/script>'; var b = \"<\\/SCRIPT \"; var c = /\\x3C!--/;");
  EXPECT_EQ(InlineScript("a </b> </scrip"), "a </b> </scrip");
}

// A web directory with stand-ins for the three libraries.
fs::path FakeWebDir() {
  const fs::path dir = fs::temp_directory_path() / ("dltune_report_test_web_" + std::to_string(::getpid()));
  for (const char* library : {"vega", "vega-lite", "vega-embed"}) {
    fs::create_directories(dir / library / "build");
    std::ofstream(dir / library / "build" / (std::string(library) + ".min.js"))
        << "/* " << library << " */ var x = '</script>';\n";
  }
  return dir;
}

class EnvGuard {
 public:
  explicit EnvGuard(const char* value) {
    if (const char* old = std::getenv("DLTUNE_WEB_DIR")) old_ = old;
    if (value) {
      ::setenv("DLTUNE_WEB_DIR", value, 1);
    } else {
      ::unsetenv("DLTUNE_WEB_DIR");
    }
  }
  ~EnvGuard() {
    if (old_) {
      ::setenv("DLTUNE_WEB_DIR", old_->c_str(), 1);
    } else {
      ::unsetenv("DLTUNE_WEB_DIR");
    }
  }
  EnvGuard(const EnvGuard&) = delete;
  EnvGuard& operator=(const EnvGuard&) = delete;

 private:
  std::optional<std::string> old_;
};

TEST(FindWebDir, HonorsTheEnvironmentAndNamesSetupWhenMissing) {
  const fs::path dir = FakeWebDir();
  {
    EnvGuard env(dir.c_str());
    EXPECT_EQ(FindWebDir(), dir);
  }
  {
    // A directory whose node_modules/ holds them counts too (DLTUNE_WEB_DIR=web).
    const fs::path parent = dir.string() + "_parent";
    fs::create_directories(parent);
    fs::rename(dir, parent / "node_modules");
    EnvGuard env(parent.c_str());
    EXPECT_EQ(FindWebDir(), parent / "node_modules");
    RemoveTree(parent);
  }
  {
    EnvGuard env("/nonexistent/dltune-web");
    try {
      (void)FindWebDir();
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("DLTUNE_WEB_DIR=/nonexistent/dltune-web"));
      EXPECT_THAT(e.what(), HasSubstr("scripts/setup"));
    }
  }
}

TEST(RenderReport, MissingLibrariesAreAUserError) {
  StudyData data;
  ReportOptions options;
  options.web_dir = "/nonexistent/dltune-web";
  try {
    (void)RenderReport(data, options);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("scripts/setup"));
  }
}

// A small study with hostile text wherever a user writes it.
StudyData HostileStudy() {
  StudyData data;
  const std::string spec_text = R"(name: hostile
description: '<img src=x onerror=alert(1)> & "quotes" </script>'
goal: 'is <i>adam</i> better?'
max_train_steps: 100
objective: valid/error_rate
trials: 2
space:
  optimizer:
    role: scientific
    values: ['<b>bold</b>', adam]
  learning_rate: {min: 0.001, max: 1.0, scale: log}
)";
  data.spec = ParseStudySpec(spec_text, "hostile.yaml");
  data.study.id = 1;
  data.study.name = "hostile";
  data.study.description = data.spec.description;
  data.study.spec_text = spec_text;
  data.study.spec_path = "specs/<hostile>.yaml";
  data.study.spec_hash = "abc123";
  data.study.dltune_version = "0.1.0";
  data.study.command_line = "dltune run '<hostile>.yaml'";
  const std::string labels[] = {"optimizer=<b>bold</b>", "optimizer=adam"};
  for (std::uint64_t n = 0; n < 4; ++n) {
    TrialRecord trial;
    trial.id = static_cast<std::int64_t>(n + 1);
    trial.study_id = 1;
    trial.number = n;
    trial.substudy = n % 2;
    trial.substudy_label = labels[n % 2];
    trial.params = {{"optimizer", n % 2 == 0 ? Value(std::string("<b>bold</b>")) : Value(std::string("adam"))},
                    {"learning_rate", 0.01 * static_cast<double>(n + 1)}};
    trial.state = n == 3 ? TrialState::kInfeasible : TrialState::kCompleted;
    if (n == 3) trial.reason = "diverged <script>alert(2)</script>";
    if (n != 3) {
      trial.best_value = 0.5 - 0.1 * static_cast<double>(n);
      trial.best_step = 50;
      trial.final_value = trial.best_value;
    }
    for (std::int64_t step = 10; step <= 100; step += 10) {
      const double error = 0.9 - 0.004 * static_cast<double>(step) * static_cast<double>(n + 1) / 4;
      data.evals[n].push_back({.step = step, .split = "valid", .metric = "error_rate", .value = error, .examples = 10});
      data.train[n].push_back({.step = step, .loss = error * 2, .grad_norm = 0.1 * static_cast<double>(step)});
    }
    data.trials.push_back(trial);
  }
  return data;
}

TEST(RenderReport, EscapesEveryUserStringAndEmbedsChartsAsData) {
  const fs::path dir = FakeWebDir();
  ReportOptions options;
  options.web_dir = dir;
  options.extras[2] = {.checkpoints = {{.step = 50, .path = "runs/<x>/ckpt", .pool = CheckpointPool::kBest}},
                       .reproduce = "dltune train x --set 'optimizer=<b>bold</b>'"};
  const std::string html = RenderReport(HostileStudy(), options);
  RemoveTree(dir);

  // No user markup anywhere: only its escaped form.
  EXPECT_THAT(html, Not(HasSubstr("<img")));
  EXPECT_THAT(html, Not(HasSubstr("<b>bold")));
  EXPECT_THAT(html, Not(HasSubstr("<script>alert")));
  EXPECT_THAT(html, HasSubstr("&lt;img src=x onerror=alert(1)&gt; &amp; &quot;quotes&quot; &lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("diverged &lt;script&gt;alert(2)&lt;/script&gt;"));
  EXPECT_THAT(html, HasSubstr("<code>runs/&lt;x&gt;/ckpt</code> (step 50)"));
  EXPECT_THAT(html, HasSubstr("--set &#39;optimizer=&lt;b&gt;bold&lt;/b&gt;&#39;"));
  EXPECT_THAT(html, HasSubstr("specs/&lt;hostile&gt;.yaml"));
  EXPECT_THAT(html, HasSubstr("<tr><th>goal</th><td>is &lt;i&gt;adam&lt;/i&gt; better?</td></tr>"));

  // Exactly our script elements, and each closes where we closed it.
  const std::regex script_open("<script[ >]");
  const auto opens = std::distance(std::sregex_iterator(html.begin(), html.end(), script_open), std::sregex_iterator());
  std::size_t closes = 0;
  for (auto at = html.find("</script>"); at != std::string::npos; at = html.find("</script>", at + 1)) ++closes;
  EXPECT_EQ(opens, 5);  // vega, vega-lite, vega-embed, the specs, the drawing script
  EXPECT_EQ(closes, 5u);
  EXPECT_THAT(html, HasSubstr("var x = '<\\/script>'"));

  // The specs parse back and hold the hostile text as data.
  const std::string marker = "<script type=\"application/json\" id=\"dltune-chart-specs\">";
  const auto begin = html.find(marker) + marker.size();
  const auto charts = nlohmann::json::parse(html.substr(begin, html.find("</script>", begin) - begin));
  ASSERT_GE(charts.size(), 5u);
  EXPECT_THAT(charts.dump(), HasSubstr("optimizer=<b>bold</b>"));
  for (const auto& chart : charts) {
    EXPECT_THAT(html, HasSubstr("id=\"" + chart.at("id").get<std::string>() + "\""));
  }
}

// The dashboard asks for the records' sections first, read without the measurements (LoadStudyData without them),
// and the measurements' second: together, the same page as the report's, each section knowing its place in it.
void ExpectTheDashboardsPartsMakeThePage(const StudyData& data) {
  StudyData records = data;
  records.evals.clear();
  records.train.clear();
  std::vector<std::string> parts;
  const std::vector<std::pair<PageParts, const StudyData*>> asked = {{PageParts::kRecords, &records},
                                                                     {PageParts::kMeasurements, &data}};
  for (const auto& [part, read] : asked) {
    for (const auto& section : StudyPageSections(*read, {}, part)) {
      const auto json = PageSectionJson(section);
      parts.push_back(json.at("id").get<std::string>() + ":" + json.at("position").dump() + ":" +
                      std::to_string(json.at("charts").size()));
    }
  }
  const auto sections = StudyPageSections(data, {});
  std::vector<std::string> whole;
  for (std::size_t i = 0; i < sections.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(sections[i - 1].position, sections[i].position) << "the report's sections in page order";
    }
    whole.push_back(sections[i].id + ":" + std::to_string(sections[i].position) + ":" +
                    std::to_string(sections[i].charts.size()));
  }
  std::sort(parts.begin(), parts.end());
  std::sort(whole.begin(), whole.end());
  EXPECT_EQ(parts, whole);
}

// The report is a loop over the study page model: every section in its order, with its title and explanation, and
// every chart under its id — or the section's empty text. The dashboard's two parts are the same sections.
TEST(StudyPage, TheReportAndTheDashboardShowTheSameSections) {
  StudyData data = HostileStudy();
  data.spec.space = ParseStudySpec("name: x\nmax_train_steps: 100\nspace:\n  learning_rate: 0.1\n", "x.yaml").space;
  for (auto& trial : data.trials) trial.params = {{"learning_rate", 0.1}};  // nothing varies: no axis plot
  const auto sections = StudyPageSections(data, {});
  std::vector<std::string> ids;
  for (const auto& section : sections) ids.push_back(section.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"isolation", "axis-plots", "interactions", "importance", "curves",
                                           "best-steps", "gradients", "enough", "pareto", "time"}));

  const fs::path dir = FakeWebDir();
  ReportOptions options;
  options.web_dir = dir;
  const std::string html = RenderReport(data, options);
  RemoveTree(dir);
  std::size_t at = 0;
  for (const auto& section : sections) {
    const auto found = html.find("<section id=\"" + section.id + "\">", at);
    ASSERT_NE(found, std::string::npos) << section.id << " missing or out of order";
    at = found;
    EXPECT_THAT(html, HasSubstr("<h2>" + HtmlEscape(section.title) + "</h2>"));
    EXPECT_THAT(html, HasSubstr("<a href=\"#" + section.id + "\">"));
    if (section.charts.empty()) {
      EXPECT_THAT(html, HasSubstr(HtmlEscape(section.empty_text))) << section.id;
    }
    for (const auto& chart : section.charts)
      EXPECT_THAT(html, HasSubstr("data-chart=\"" + HtmlEscape(chart.id) + "\""));
  }
  const auto axis = std::find_if(sections.begin(), sections.end(), [](const auto& s) { return s.id == "axis-plots"; });
  EXPECT_TRUE(axis->charts.empty());
  EXPECT_THAT(html, HasSubstr("No hyperparameter varies in this study."));

  ExpectTheDashboardsPartsMakeThePage(data);
}

// Quality against cost: the default cost (training seconds) drawn, the other recorded costs folded below, the costs
// not recorded named with the reason; a study that recorded none shows the section's empty text.
TEST(StudyPage, DrawsQualityAgainstEachRecordedCostAndNamesTheOthers) {
  const auto pareto = [](const StudyData& data) {
    const auto sections = StudyPageSections(data, {});
    const auto found = std::find_if(sections.begin(), sections.end(), [](const auto& s) { return s.id == "pareto"; });
    EXPECT_NE(found, sections.end());
    return found == sections.end() ? PageSection{} : *found;
  };
  StudyData data = HostileStudy();
  EXPECT_TRUE(pareto(data).charts.empty());
  for (TrialRecord& trial : data.trials) trial.time_split = {{"train", 10.0 * static_cast<double>(trial.number + 1)}};
  for (auto& [number, steps] : data.train) {
    for (TrainMeasurement& step : steps) step.step_time = 0.01 * static_cast<double>(number + 1);
  }
  const PageSection section = pareto(data);
  ASSERT_EQ(section.charts.size(), 1u);
  EXPECT_EQ(section.charts[0].id, "pareto_training_seconds");
  ASSERT_EQ(section.folded_charts.size(), 1u);
  EXPECT_EQ(section.folded_charts[0].id, "pareto_seconds_per_step");
  EXPECT_THAT(section.explanation, HasSubstr("Not recorded in this study: examples per second: no trial recorded"));
  EXPECT_THAT(section.explanation,
              HasSubstr("; peak GPU memory: no trial recorded a GPU's peak memory (a study on the CPU has none)."));
  // Trials 0 and 2 of sub-study <b>bold</b>: 2 is dearer and better; 1 alone in adam; 3 infeasible.
  EXPECT_THAT(section.charts[0].caption, HasSubstr("optimizer=<b>bold</b>: trials 0 and 2; optimizer=adam: trial 1"));

  const fs::path dir = FakeWebDir();
  ReportOptions options;
  options.web_dir = dir;
  const std::string html = RenderReport(data, options);
  RemoveTree(dir);
  EXPECT_THAT(html, HasSubstr("<section id=\"pareto\">"));
  EXPECT_THAT(html, HasSubstr("data-chart=\"pareto_training_seconds\""));
  EXPECT_THAT(html, HasSubstr("data-chart=\"pareto_seconds_per_step\""));
  ExpectTheDashboardsPartsMakeThePage(data);
  // One trial's page (the dashboard's trial page reads one trial's measurements) has no trade-off to draw.
  const auto alone = StudyPageSections(SubsetOfTrials(data, {2}), {}, PageParts::kMeasurements);
  EXPECT_TRUE(std::none_of(alone.begin(), alone.end(), [](const auto& s) { return s.id == "pareto"; }));
}

// A throughput sweep (dltune plan throughput) and a learning-rate sweep (dltune plan fit-steps): their sections read
// the measurements, so the dashboard's second part draws them, as the report does.
TEST(StudyPage, TheDashboardDrawsAThroughputAndAStepBudgetSweepAsTheReportDoes) {
  StudyData throughput = HostileStudy();
  const std::string sweep_yaml =
      "name: t\nworkload: synthetic\nmax_train_steps: 10\nsampler: grid\n"
      "space:\n  batch_size: {values: [32, 64, 128]}\nprocedure: {kind: throughput, parent: t.yaml}\n";
  throughput.spec = ParseStudySpec(sweep_yaml, "t.yaml");
  throughput.evals.clear();
  throughput.train.clear();
  throughput.trials.resize(3);
  for (std::uint64_t i = 0; i < 3; ++i) {
    throughput.trials[i].params = {{"batch_size", Value(std::int64_t{32} << i)}};
    throughput.trials[i].state = TrialState::kCompleted;
    throughput.trials[i].substudy = 0;
    throughput.trials[i].substudy_label = "all";
    for (std::int64_t step = 1; step <= 10; ++step) throughput.train[i].push_back({.step = step, .step_time = 0.01});
  }
  const auto sweep = StudyPageSections(throughput, {});
  ASSERT_FALSE(sweep.empty());
  EXPECT_EQ(sweep[0].id, "throughput");
  EXPECT_EQ(sweep[0].charts.size(), 3u);
  ExpectTheDashboardsPartsMakeThePage(throughput);

  StudyData fit = HostileStudy();
  fit.spec = ParseStudySpec(
      "name: f\nworkload: synthetic\nmax_train_steps: 100\ntrials: 4\n"
      "space:\n  learning_rate: {min: 0.001, max: 1.0, scale: log}\n"
      "procedure: {kind: fit-steps, parent: hostile, options: {fit: 'train/error_rate<=0.75'}}\n",
      "f.yaml");
  for (auto& [number, evals] : fit.evals) {
    for (auto& e : evals) e.split = "train";
  }
  const auto steps = StudyPageSections(fit, {});
  const auto budget = std::find_if(steps.begin(), steps.end(), [](const auto& s) { return s.id == "fit-steps"; });
  ASSERT_NE(budget, steps.end());
  ASSERT_EQ(budget->charts.size(), 1u);
  EXPECT_THAT(budget->charts[0].caption, HasSubstr("candidate max_train_steps"));
  ExpectTheDashboardsPartsMakeThePage(fit);
}

// The learning-rate schedule as training applied it, beside the loss; the per-class charts folded away until opened;
// tick labels at the precision they need.
TEST(RenderReport, DrawsTheScheduleAndFoldsThePerClassCharts) {
  StudyData data = HostileStudy();
  for (auto& [trial, steps] : data.train) {
    for (auto& m : steps) m.learning_rate = 0.1 * std::min<double>(1.0, static_cast<double>(m.step) / 50);  // warmup
  }
  for (auto& [trial, evals] : data.evals) {
    for (std::int64_t step = 10; step <= 100; step += 10) {
      for (int k = 0; k < 3; ++k) {
        evals.push_back({.step = step, .split = "valid", .metric = "correct_class_" + std::to_string(k), .value = 3});
      }
    }
  }
  const auto sections = StudyPageSections(data, {});
  const auto curves = std::find_if(sections.begin(), sections.end(), [](const auto& s) { return s.id == "curves"; });
  ASSERT_NE(curves, sections.end());
  std::vector<std::string> wide;
  for (const auto& chart : curves->charts) wide.push_back(chart.id);
  EXPECT_THAT(wide, ::testing::Contains("curves_train_learning_rate_steps"));
  ASSERT_EQ(curves->folded_charts.size(), 3u);
  EXPECT_EQ(curves->folded_charts[0].id, "curves_valid_correct_class_0");
  for (const auto& chart : curves->more_charts) EXPECT_THAT(chart.id, Not(HasSubstr("correct_class")));
  EXPECT_EQ(curves->charts[0].spec.at("config").at("axisQuantitative").at("format"), "~r");  // 150, not 1.5e+2

  const fs::path dir = FakeWebDir();
  ReportOptions options;
  options.web_dir = dir;
  const std::string html = RenderReport(data, options);
  RemoveTree(dir);
  EXPECT_THAT(html, HasSubstr("<details class=\"folded\"><summary>Correct examples of each class (3 charts)"));
  EXPECT_THAT(html, HasSubstr("data-chart=\"curves_valid_correct_class_2\""));
}

TEST(RenderReport, TooManyTrialsForOneCurveEachDrawsTheBestAndSaysSo) {
  const fs::path dir = FakeWebDir();
  ReportOptions options;
  options.web_dir = dir;
  options.max_curve_trials = 2;
  const std::string html = RenderReport(HostileStudy(), options);
  RemoveTree(dir);
  EXPECT_THAT(html, HasSubstr("Drawn: 2 of the 4 trials: the running ones and each sub-study&#39;s best."));
  // The best trial of each sub-study (0.3 and 0.4: trials 2 and 1) has curves; trial 0 (0.5) has none.
  const std::string marker = "<script type=\"application/json\" id=\"dltune-chart-specs\">";
  const auto begin = html.find(marker) + marker.size();
  const auto charts = nlohmann::json::parse(html.substr(begin, html.find("</script>", begin) - begin));
  std::set<std::int64_t> curve_trials;
  for (const auto& chart : charts) {  // curves are the line layers along steps (parallel coordinates run along params)
    for (const auto& layer : chart.at("spec").value("layer", nlohmann::json::array())) {
      if (layer.at("mark").value("type", "") != "line") continue;
      if (layer.value("encoding", nlohmann::json::object()).value("x", nlohmann::json::object()).value("field", "") ==
          "param") {
        continue;
      }
      for (const auto& row : layer.value("data", nlohmann::json::object()).value("values", nlohmann::json::array())) {
        if (row.contains("trial")) curve_trials.insert(row.at("trial").get<std::int64_t>());
      }
    }
  }
  EXPECT_EQ(curve_trials, (std::set<std::int64_t>{1, 2}));
}

// A trial's profile trace (training.profile_steps) is found beside its checkpoints, as the trainer writes it, and
// linked from the report's best trials and the dashboard's trial page only when the file exists.
TEST(RenderReport, SaysWhichGpuEachTrialUsedAndWhatTheGpusDid) {
  const fs::path web = FakeWebDir();
  ReportOptions options;
  options.web_dir = web;
  StudyData data = HostileStudy();
  EXPECT_THAT(RenderReport(data, options), Not(HasSubstr("label\">gpu<")));
  data.trials.front().resources = R"({"model": "NVIDIA <H100>", "uuids": ["GPU-1"], "peak_memory_bytes": 1073741824,
                                      "mean_utilization_percent": 50, "trials_at_once": 2})";
  data.trials.front().time_split = {{"train", 2.0}};
  const std::string html = RenderReport(data, options);
  RemoveTree(web);
  EXPECT_THAT(html, HasSubstr("<span class=\"label\">gpu</span>NVIDIA &lt;H100&gt; (GPU-1); peak memory 1.0 GiB, "
                              "mean utilization 50%, 2 trials at once"));
  EXPECT_THAT(html, HasSubstr("1 trial on GPUs (NVIDIA &lt;H100&gt;): mean utilization 50%"));
}

TEST(RenderReport, TheRecordSaysHowToReproduceTheStudy) {
  const fs::path web = FakeWebDir();
  ReportOptions options;
  options.web_dir = web;
  StudyData data = HostileStudy();
  EXPECT_THAT(RenderReport(data, options), Not(HasSubstr("--reproduce")));  // no record kept: nothing to say
  data.study.git_dirty = true;
  data.study.reproduction =
      R"({"dltune":{"version":"0.1.0","build":"abc"},"libraries":{"libtorch":"1.13"},"cpu":"AMD <EPYC>",)"
      R"("environment":{"OMP_NUM_THREADS":"1"},"git":{"patch":{"bytes":2048,"sha256":"ab","stored":true}}})";
  const std::string html = RenderReport(data, options);
  RemoveTree(web);
  EXPECT_THAT(html, HasSubstr("<th>uncommitted patch</th><td>2.0 KiB, SHA-256 ab (dltune show "));
  EXPECT_THAT(html, HasSubstr("<th>versions</th><td>dltune 0.1.0 (abc), libtorch 1.13</td>"));
  EXPECT_THAT(html, HasSubstr("CPU AMD &lt;EPYC&gt;"));
  EXPECT_THAT(html, HasSubstr("<th>environment</th><td class=\"mono\">OMP_NUM_THREADS=1</td>"));
  EXPECT_THAT(html, HasSubstr("--reproduce</td>"));
}

TEST(RenderReport, LinksAProfileTraceBesideTheTrialsCheckpoints) {
  const fs::path trial_dir =
      fs::temp_directory_path() / ("dltune_report_trace_" + std::to_string(::getpid())) / "trial 2 <x>";
  fs::create_directories(trial_dir);
  const std::vector<CheckpointRecord> checkpoints = {
      {.step = 50, .path = (trial_dir / "checkpoints" / "step_00000050").string(), .pool = CheckpointPool::kBest}};
  EXPECT_EQ(FindProfileTrace(checkpoints), std::nullopt);

  const fs::path web = FakeWebDir();
  ReportOptions options;
  options.web_dir = web;
  options.extras[2] = {.checkpoints = checkpoints, .reproduce = "dltune train x"};
  StudyData data = HostileStudy();
  data.spec.training.profile_steps = "10:20";
  EXPECT_THAT(RenderReport(data, options), Not(HasSubstr("label\">profile<")));

  std::ofstream(trial_dir / "profile.trace.json") << "{\"traceEvents\": []}\n";
  EXPECT_EQ(FindProfileTrace(checkpoints), trial_dir / "profile.trace.json");
  const std::string html = RenderReport(data, options);
  const std::string url_dir = "file://" + HtmlEscape(trial_dir.parent_path().string()) + "/trial%202%20%3Cx%3E";
  EXPECT_THAT(html, HasSubstr("<span class=\"label\">profile</span><a href=\"" + url_dir +
                              "/profile.trace.json\"><code>" + HtmlEscape((trial_dir / "profile.trace.json").string()) +
                              "</code></a> (a trace of steps 10:20: open it in ui.perfetto.dev or chrome://tracing)"));
  RemoveTree(web);

  // The dashboard's trial page says the same, and the server finds the file through the store's records alone.
  const fs::path db = trial_dir.parent_path() / "s.db";
  {
    auto store = OpenStore("sqlite://" + db.string());
    const StudyRecord study =
        store->CreateStudy({.name = "traced",
                            .spec_text = "name: traced\nmax_train_steps: 100\ntraining: {profile_steps: '10:20'}\n"
                                         "space: {lr: {min: 0.1, max: 1}}\n"});
    store->AddTrials(study.id, {{.number = 0, .substudy_label = "all", .seed = 1},
                                {.number = 1, .substudy_label = "all", .seed = 2}});
    const auto claimed = store->ClaimNext(study.id, "w");
    ASSERT_TRUE(claimed.has_value());
    store->AddCheckpoint(claimed->second, checkpoints.front());
    const nlohmann::json trial = TrialJson(*store, "traced", claimed->first.number);
    ASSERT_TRUE(trial.at("profile_trace").is_object()) << trial.dump();
    EXPECT_EQ(trial["profile_trace"]["path"], (trial_dir / "profile.trace.json").string());
    EXPECT_EQ(trial["profile_trace"]["steps"], "10:20");
    EXPECT_EQ(trial["profile_trace"]["bytes"], fs::file_size(trial_dir / "profile.trace.json"));
    EXPECT_EQ(TrialProfileTrace(*store, "traced", claimed->first.number), trial_dir / "profile.trace.json");
    const std::uint64_t other = 1 - claimed->first.number;
    EXPECT_TRUE(TrialJson(*store, "traced", other).at("profile_trace").is_null());
    EXPECT_EQ(TrialProfileTrace(*store, "traced", other), std::nullopt);
    EXPECT_THROW(TrialProfileTrace(*store, "traced", 7), Error);
  }
  RemoveTree(trial_dir.parent_path());
}

// A study too large to read whole is refused with what to use instead, before anything is read.
TEST(LoadStudyData, RefusesAStudyTooLargeToReadWhole) {
  const fs::path dir = fs::temp_directory_path() / ("dltune_study_data_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    auto store = OpenStore("sqlite://" + (dir / "s.db").string());
    const StudyRecord study = store->CreateStudy(
        {.name = "huge", .spec_text = "name: huge\nmax_train_steps: 1\nspace: {lr: {min: 0.1, max: 1}}\n"});
    std::vector<NewTrial> trials;
    for (std::uint64_t n = 0; n <= static_cast<std::uint64_t>(kMaxLoadedTrials); ++n) {
      trials.push_back({.number = n, .substudy_label = "all", .seed = n});
    }
    store->AddTrials(study.id, trials);
    try {
      LoadStudyData(*store, "huge");
      FAIL() << "a study of more than kMaxLoadedTrials trials was read whole";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("study 'huge' has 100001 trials"));
      EXPECT_THAT(e.what(), HasSubstr("dltune show huge"));
    }
  }
  RemoveTree(dir);
}

}  // namespace
}  // namespace dltune
