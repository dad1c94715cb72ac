#include "report/decision_log.h"

#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/strings.h"
#include "dltune/analyze/diagnostics.h"
#include "dltune/core/error.h"
#include "report/study_text.h"
#include "store/tracking.h"

namespace dltune {

RecordedNote RecordNote(Store& store, const NoteRequest& request) {
  if (request.text.empty()) throw Error("a note needs some text");
  const StudyRecord study = RequireStudy(store, request.study);
  if (!request.resolves.empty()) {
    // Only a finding the study has: a typo must not leave the real one open while seeming to close it.
    std::set<std::string> open;
    bool found = false;
    for (const Diagnostic& d : Diagnose(LoadStudyData(store, study.name))) {
      found = found || d.id == request.resolves;
      if (d.handled.empty()) open.insert(d.id);
    }
    if (!found) {
      throw Error(fmt::format("--resolves {}: study {} has no such finding (its open findings: {})", request.resolves,
                              study.name, open.empty() ? "none" : fmt::format("{}", fmt::join(open, ", "))));
    }
  }
  const StudyNote stored = store.AddNote(
      study.id,
      {.kind = NoteKind::kNote, .text = request.text, .author = request.author, .resolves = request.resolves});
  std::string summary = fmt::format("noted on study {} (note {})", study.name, stored.id);
  if (!request.resolves.empty()) summary += fmt::format(": finding {} handled", request.resolves);
  return {study, stored, std::move(summary)};
}

RecordedNote RecordDecision(Store& store, const DecisionRequest& request) {
  if (request.because.empty()) throw Error("a decision needs --because: why it is taken");
  const StudyData data = LoadStudyData(store, request.study, /*with_measurements=*/false);
  RequireAdoptable(data, "decide on");
  const std::string adopt = AdoptedChoice(data, request.adopt);
  const StudyNote stored = store.AddNote(
      data.study.id, {.kind = NoteKind::kDecision, .adopt = adopt, .text = request.because, .author = request.author});
  return {data.study, stored,
          fmt::format("decided on study {}: adopt {}, because {}", data.study.name, adopt, request.because)};
}

void RequireAdoptable(const StudyData& data, const std::string& act) {
  const ProcedureSpec& procedure = data.spec.procedure;
  if (!procedure.Measures()) return;
  throw Error(fmt::format(
      "study '{}' is a {} measurement (dltune plan {}): its trials measure something for the studies after it and "
      "are never adopted, so dltune does not {} it; dltune next {} says the step it leads to",
      data.study.name, procedure.kind, procedure.kind, act, ShellQuote(data.study.name)));
}

}  // namespace dltune
