// Writing a study's decision log: a note (`dltune note`, the dashboard's note form) and a decision (`dltune decide`,
// its decision form), each checked and recorded by one function here, so that both ways record the same rows and
// refuse the same input with the same messages.
#pragma once

#include <string>

#include "dltune/report/study_data.h"
#include "dltune/store/store.h"

namespace dltune {

struct NoteRequest {
  std::string study;
  std::string text;
  std::string resolves;  // a finding of the study the note marks handled (its id); "" for none
  std::string author;    // "user@host" (CurrentAuthor)
};

struct DecisionRequest {
  std::string study;
  std::string adopt;    // a trial (12, trial:12) or a configuration (configuration:3)
  std::string because;  // why it is adopted
  std::string author;
};

// A note or decision as recorded, with the study it was recorded on.
struct RecordedNote {
  StudyRecord study;
  StudyNote note;
  // The line `dltune note` / `dltune decide` prints: "noted on study x (note 3)", "decided on study x: adopt ...".
  std::string summary;
};

// Adds a note to the study's decision log. Throws Error (invalid input) for an empty text, an unknown study, or a
// `resolves` the study has no finding of (naming its open findings).
RecordedNote RecordNote(Store& store, const NoteRequest& request);

// Records a decision: what the study adopts (AdoptedChoice) and why. Throws Error (invalid input) for an empty
// `because`, an unknown study or choice, or a study that measures (RequireAdoptable).
RecordedNote RecordDecision(Store& store, const DecisionRequest& request);

// Refuses (Error, invalid input) to `act` ("decide on", "launch", "evaluate on the test split") a study that measures
// (ProcedureSpec::Measures: a throughput or fit-steps sweep, an instability probe, a warmup or clipping study): its
// trials are probes, never a configuration to adopt; the message says which study to act on instead.
void RequireAdoptable(const StudyData& data, const std::string& act);

}  // namespace dltune
