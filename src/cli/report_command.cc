// `dltune report`: a study's HTML report, written by the run module (WriteStudyReport).
#include <cstdio>
#include <memory>

#include "commands.h"
#include "dltune/run/study_report.h"

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
  std::printf("wrote %s: study %s, %zu trials, %zu finding%s of the checklist\n", report.path.c_str(),
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

}  // namespace dltune::cli
