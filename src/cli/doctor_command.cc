// `dltune doctor STUDY`: the playbook's checklist run over a study, most serious finding first.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include <fmt/format.h>

#include "analyze/diagnostics_text.h"
#include "commands.h"
#include "core/strings.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/next_step.h"
#include "dltune/report/study_data.h"
#include "report/study_page.h"
#include "store/json_output.h"

namespace dltune::cli {
namespace {

nlohmann::json NextStepJson(const NextStep& next) {
  return {{"id", next.id},
          {"study", next.study},
          {"title", next.title},
          {"why", next.why},
          {"command", next.command},
          {"section", next.section},
          {"alternatives", next.alternatives}};
}

// The findings, one row each (docs/json-output.md).
ExportedTable FindingsTable(const std::string& study, const std::vector<Diagnostic>& diagnostics) {
  ExportedTable table;
  table.columns = {"study",   "id",       "severity", "title",  "detail",    "suggestion",
                   "section", "substudy", "param",    "trials", "expand_to", "handled"};
  for (const Diagnostic& d : diagnostics) {
    nlohmann::json row = FindingJson(d);
    row["study"] = study;
    table.rows.push_back(std::move(row));
  }
  return table;
}

}  // namespace

void RegisterDoctorCommand(CLI::App& app) {
  struct Args {
    std::string study;
    std::string storage;
    std::string format = "text";
  };
  auto args = std::make_shared<Args>();
  auto* doctor = app.add_subcommand(
      "doctor",
      "Check a study against the playbook's checklist: best trials at a search-space boundary, infeasible trials and "
      "instability, overfitting, noisy objectives, best steps that say train longer or shorter, a rising training "
      "loss, input-bound training, aggressive gradient clipping. Prints each finding, most serious first, with its "
      "evidence, a suggestion and the playbook section it comes from (docs/analyses.md).\n\n"
      "Examples:\n  dltune doctor quickstart\n  dltune doctor quickstart --format json   # for scripts: "
      "docs/json-output.md");
  doctor->add_option("STUDY", args->study, "The study's name (see dltune studies)")->required();
  AddStorageOption(doctor, args->storage);
  AddFormatOption(doctor, args->format, true);
  doctor->callback([args] {
    const OutputFormat output = ParseOutputFormat(args->format, "dltune doctor", true);
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const StudyData data = LoadStudyData(*store, args->study);
    const std::vector<Diagnostic> diagnostics = Diagnose(data);
    if (output == OutputFormat::kCsv) {
      std::cout << FindingsTable(args->study, diagnostics).Render(ExportFormat::kCsv);
      return;
    }
    if (output == OutputFormat::kJson) {
      const nlohmann::json out = {{"study", args->study},
                                  {"findings", FindingsTable(args->study, diagnostics).rows},
                                  {"next", NextStepJson(RecommendNextStep(data, diagnostics))}};
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::fputs(DiagnosticsText(args->study, diagnostics).c_str(), stdout);
    const NextStep next = RecommendNextStep(data, diagnostics);
    std::fputs(
        TerminalSafe(fmt::format("\nNext: {}{}\n", next.title, next.command.empty() ? "" : "\n  " + next.command))
            .c_str(),
        stdout);
  });

  struct NextArgs {
    std::string target;
    std::string storage;
    std::string format = "text";
  };
  auto next_args = std::make_shared<NextArgs>();
  auto* next = app.add_subcommand(
      "next",
      "The playbook's next step, and the exact command that takes it. Reads a lineage whole — every study planned "
      "from the first, their trials, findings (dltune doctor), notes, decisions and launches — and follows the "
      "playbook's decision procedure over it (docs/analyses.md, \"The next step\"): at the start of a project a "
      "throughput sweep, then the step budget, then the first study; possible bugs first; then instability, the "
      "search space, more replicas, retraining, round 2, deciding and launching. A plan is printed with the run that "
      "carries it out. Given a spec file, the lineage that started from it (or its start); given nothing, the lineage "
      "of the study changed last.\n\n"
      "Examples:\n  dltune next examples/quickstart.yaml\n  dltune next quickstart\n  dltune next\n"
      "  dltune next quickstart --format json   # for scripts: docs/json-output.md");
  next->add_option("STUDY", next_args->target,
                   "A study of the lineage, or the spec file the project starts from (default: the study changed "
                   "last)");
  AddStorageOption(next, next_args->storage);
  AddFormatOption(next, next_args->format, false);
  next->callback([next_args] {
    const bool json = ParseOutputFormat(next_args->format, "dltune next", false) == OutputFormat::kJson;
    const auto print = [json](const NextStep& step) {
      if (json) {
        std::cout << NextStepJson(step).dump(2) << "\n";
      } else {
        std::fputs(NextStepText(step).c_str(), stdout);
      }
    };
    const std::string url = StoreUrlOrDefault(next_args->storage);
    std::error_code error;
    const bool spec_file = !next_args->target.empty() && std::filesystem::is_regular_file(next_args->target, error);
    const auto store = StoreMayExist(url) ? OpenStoreReadOnly(url) : nullptr;
    std::optional<std::string> root;
    if (spec_file) {
      // The lineage that started from this spec: the newest study planned from the file, or the spec's own study.
      const StudySpec spec = LoadStudySpec(next_args->target);
      if (store != nullptr) {
        for (const StudyRecord& study : store->ListStudies()) {
          if (study.parent == next_args->target || (study.name == spec.name && study.parent.empty())) root = study.name;
        }
      }
      if (!root) {
        print(StartOfProject(next_args->target, spec));
        return;
      }
    } else if (!next_args->target.empty()) {
      if (store == nullptr) throw Error(fmt::format("{}: no store there, so no study {}", url, next_args->target));
      root = LineageRootOf(*store, next_args->target);
    } else {
      std::optional<StudyRecord> latest;
      for (const StudyRecord& study : store ? store->ListStudies() : std::vector<StudyRecord>{}) {
        if (!latest || study.updated_at >= latest->updated_at) latest = study;
      }
      if (!latest) {
        const NextStep start = {
            .id = "start",
            .title = "No study yet: start the project from its spec",
            .why = fmt::format("{} holds no study", url),
            .command = "dltune next SPEC.yaml   # your spec: dltune space check SPEC.yaml checks it first",
            .section = "Choosing the initial configuration"};
        print(start);
        return;
      }
      root = LineageRootOf(*store, latest->name);
    }
    print(RecommendNextStep(LoadLineage(*store, *root)));
  });
}

}  // namespace dltune::cli
