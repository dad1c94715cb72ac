// `dltune report`: a study's HTML report, written by the run module (WriteStudyReport).
#include <cstdio>
#include <memory>

#include "commands.h"
#include "dltune/analyze/trial_variance.h"
#include "dltune/report/study_data.h"
#include "report/study_text.h"
#include "run/study_report.h"

namespace dltune::cli {
namespace {

struct ReportArgs {
  std::string study;
  std::string output;
  std::string storage;
  std::size_t top = 5;
};

}  // namespace

void PrintWrittenReport(Store& store, const std::string& study, const std::string& output, std::size_t top) {
  const WrittenReport report = WriteStudyReport(store, study, output, top);
  std::printf("wrote %s: study %s, %zu trials, %zu open finding%s of the checklist\n", report.path.c_str(),
              report.study.c_str(), report.trials, report.findings, report.findings == 1 ? "" : "s");
}

namespace {

void WriteReport(const ReportArgs& args) {
  auto store = OpenStoreReadOnly(StoreUrlOrDefault(args.storage));
  PrintWrittenReport(*store, args.study, args.output, args.top);
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

void RegisterCompareCommand(CLI::App& app) {
  struct Args {
    std::string a, b, output, storage;
  };
  auto args = std::make_shared<Args>();
  auto* command = app.add_subcommand(
      "compare",
      "Two studies side by side, such as a study with and without a change (the playbook's with/without figures), "
      "or round 1 and round 2: their best results, the best of an equal number of trials from each (so the larger "
      "study does not win by budget), isolation plots and trial variance side by side, and the best trials' "
      "curves overlaid. Prints the summary and writes it as one HTML file.\n\n"
      "Example:\n  dltune compare quickstart quickstart-retrain      # writes ./quickstart-vs-quickstart-retrain.html");
  command->add_option("A", args->a, "The first study")->required();
  command->add_option("B", args->b, "The second study")->required();
  command->add_option("-o,--output", args->output, "The HTML file to write (default: ./A-vs-B.html)");
  AddStorageOption(command, args->storage);
  command->callback([args] {
    auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const StudyData a = LoadStudyData(*store, args->a);
    const StudyData b = LoadStudyData(*store, args->b);
    std::fputs(ComparisonText(args->a, args->b, CompareStudies(a, b)).c_str(), stdout);
    const auto path = WriteComparison(*store, args->a, args->b, args->output);
    std::printf("wrote %s\n", path.c_str());
  });
}

}  // namespace dltune::cli
