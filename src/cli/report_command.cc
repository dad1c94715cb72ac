// `dltune report`: a study's HTML report (the report module renders it; this fills in what only the store and the
// run module know: the best trials' checkpoints and reproduction commands).
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "commands.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/core/files.h"
#include "dltune/core/strings.h"
#include "dltune/report/html_report.h"
#include "dltune/report/study_data.h"
#include "dltune/run/trial_setup.h"

namespace dltune::cli {
namespace {

struct ReportArgs {
  std::string study;
  std::string output;
  std::string storage;
  std::size_t top = 5;
};

std::string NowUtc() {
  return FormatClockTime(static_cast<double>(std::time(nullptr)), "%Y-%m-%d %H:%M UTC", TimeZone::kUtc);
}

}  // namespace

void WriteStudyReport(Store& store, const std::string& study, const std::string& output_path, std::size_t top) {
  const StudyData data = LoadStudyData(store, study);

  ReportOptions options;
  options.top_trials = top;
  options.generated_at = NowUtc();
  for (const std::uint64_t number : TopTrials(data, static_cast<int>(top))) {
    for (const TrialRecord& trial : data.trials) {
      if (trial.number != number) continue;
      options.extras[number] = {.checkpoints = store.ListCheckpoints(trial.id),
                                .reproduce = ReproduceCommand(data.spec, data.study, trial)};
    }
  }
  const std::string html = RenderReport(data, options);

  const std::filesystem::path output = output_path.empty() ? data.study.name + "-report.html" : output_path;
  WriteFileAtomically(output, html);

  const auto diagnostics = Diagnose(data);
  std::printf("wrote %s: study %s, %zu trials, %zu finding%s of the checklist\n",
              std::filesystem::absolute(output).lexically_normal().c_str(), data.study.name.c_str(), data.trials.size(),
              diagnostics.size(), diagnostics.size() == 1 ? "" : "s");
}

namespace {

void WriteReport(const ReportArgs& args) {
  auto store = OpenStoreReadOnly(args.storage.empty() ? DefaultStoreUrl() : args.storage);
  WriteStudyReport(*store, args.study, args.output, args.top);
}

}  // namespace

void RegisterReportCommand(CLI::App& app) {
  auto args = std::make_shared<ReportArgs>();
  auto* command = app.add_subcommand(
      "report",
      "A study's report as one HTML file that opens offline in any browser: its tracking record, the playbook "
      "checklist's findings, the best trials with their checkpoints and reproduction commands, and every plot "
      "(isolation and axis plots, training curves, best steps, gradient norms, \"have we sampled enough?\"). "
      "docs/report.md describes it.\n\n"
      "Examples:\n  dltune report quickstart                      # writes ./quickstart-report.html\n"
      "  dltune report quickstart -o /tmp/q.html --storage sqlite:///runs/dltune.db");
  command->add_option("STUDY", args->study, "Study name")->required();
  command->add_option("-o,--output", args->output, "The HTML file to write (default: ./STUDY-report.html)");
  command->add_option("--top", args->top, "Best trials listed per sub-study (default 5)")
      ->check(WholeNumberIn(1, 1000));
  AddStorageOption(command, args->storage);
  command->callback([args] { WriteReport(*args); });
}

}  // namespace dltune::cli
