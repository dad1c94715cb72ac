// `dltune doctor STUDY`: the playbook's checklist run over a study, most serious finding first.
#include <cstdio>

#include <fmt/format.h>

#include "commands.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/analyze/next_step.h"
#include "dltune/core/strings.h"
#include "dltune/report/study_data.h"

namespace dltune::cli {
namespace {

// Wraps `text` at `width` columns, every line after the first indented by `indent` spaces.
std::string Wrap(const std::string& text, std::size_t indent, std::size_t width = 100) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line;
}

}  // namespace

std::string RenderDiagnostics(const std::string& study, const std::vector<Diagnostic>& diagnostics) {
  int counts[3] = {};
  for (const auto& d : diagnostics) ++counts[static_cast<int>(d.severity)];
  std::string out;
  if (diagnostics.empty()) {
    return fmt::format("study {}: no finding — none of the playbook's checks applies to it\n", study);
  }
  out += fmt::format("study {}: {} finding{} ({} problem{}, {} warning{}, {} note{})\n", study, diagnostics.size(),
                     diagnostics.size() == 1 ? "" : "s", counts[2], counts[2] == 1 ? "" : "s", counts[1],
                     counts[1] == 1 ? "" : "s", counts[0], counts[0] == 1 ? "" : "s");
  constexpr std::size_t kIndent = 10;
  for (const auto& d : diagnostics) {
    std::string label = SeverityName(d.severity);
    for (auto& c : label) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::string& title = d.title;  // names the sub-study when there are several
    out += fmt::format("\n{:<{}}{}\n", label, kIndent, Wrap(title, kIndent));
    const std::string pad(kIndent, ' ');
    if (!d.detail.empty()) out += pad + Wrap(d.detail, kIndent) + "\n";
    if (!d.suggestion.empty()) out += pad + Wrap("Suggestion: " + d.suggestion, kIndent) + "\n";
    if (!d.section.empty()) out += pad + Wrap("Playbook: \"" + d.section + "\"", kIndent) + "\n";
  }
  return out;
}

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
    std::fputs(TerminalSafe(RenderDiagnostics(args->study, diagnostics)).c_str(), stdout);
    const NextStep next = RecommendNextStep(data, diagnostics);
    std::fputs(
        TerminalSafe(fmt::format("\nNext: {}{}\n", next.title, next.command.empty() ? "" : "\n  " + next.command))
            .c_str(),
        stdout);
  });

  struct NextArgs {
    std::string study;
    std::string storage;
  };
  auto next_args = std::make_shared<NextArgs>();
  auto* next = app.add_subcommand(
      "next",
      "The playbook's next step after a study, and the exact command that takes it: finish it, retry failures, fix "
      "instability, expand the search space, retrain the best from several seeds, decide, train longer (round 2), "
      "launch. Reads the study's state, its checklist findings (dltune doctor) and what was decided and launched.\n\n"
      "Example:\n  dltune next quickstart");
  next->add_option("STUDY", next_args->study, "The study's name (see dltune studies)")->required();
  AddStorageOption(next, next_args->storage);
  next->callback([next_args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(next_args->storage));
    const StudyData data = LoadStudyData(*store, next_args->study);
    const NextStep step = RecommendNextStep(data, Diagnose(data));
    std::string out = fmt::format("study {}: {}\n  because: {}\n", data.study.name, step.title, step.why);
    if (!step.command.empty()) out += "  run:     " + step.command + "\n";
    if (!step.section.empty()) out += "  playbook: \"" + step.section + "\"\n";
    std::fputs(TerminalSafe(out).c_str(), stdout);
  });
}

}  // namespace dltune::cli
