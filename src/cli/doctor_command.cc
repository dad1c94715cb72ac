// `dltune doctor STUDY`: the playbook's checklist run over a study, most serious finding first.
#include <cstdio>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "analyze/diagnostics_text.h"
#include "commands.h"
#include "core/strings.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/next_step.h"
#include "dltune/report/study_data.h"

namespace dltune::cli {

void RegisterDoctorCommand(CLI::App& app) {
  struct Args {
    std::string study;
    std::string storage;
  };
  auto args = std::make_shared<Args>();
  auto* doctor = app.add_subcommand(
      "doctor",
      "Check a study against the playbook's checklist: best trials at a search-space boundary, infeasible trials and "
      "instability, overfitting, noisy objectives, best steps that say train longer or shorter, a rising training "
      "loss, input-bound training, aggressive gradient clipping. Prints each finding, most serious first, with its "
      "evidence, a suggestion and the playbook section it comes from (docs/analyses.md).\n\n"
      "Example:\n  dltune doctor quickstart");
  doctor->add_option("STUDY", args->study, "The study's name (see dltune studies)")->required();
  AddStorageOption(doctor, args->storage);
  doctor->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const StudyData data = LoadStudyData(*store, args->study);
    const std::vector<Diagnostic> diagnostics = Diagnose(data);
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
      "Examples:\n  dltune next examples/quickstart.yaml\n  dltune next quickstart\n  dltune next");
  next->add_option("STUDY", next_args->target,
                   "A study of the lineage, or the spec file the project starts from (default: the study changed "
                   "last)");
  AddStorageOption(next, next_args->storage);
  next->callback([next_args] {
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
        std::fputs(NextStepText(StartOfProject(next_args->target, spec)).c_str(), stdout);
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
        std::fputs(NextStepText(start).c_str(), stdout);
        return;
      }
      root = LineageRootOf(*store, latest->name);
    }
    std::fputs(NextStepText(RecommendNextStep(LoadLineage(*store, *root))).c_str(), stdout);
  });
}

}  // namespace dltune::cli
