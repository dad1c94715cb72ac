// A study's recorded spec, read back: the one reader of StudyRecord::spec_text, for every command and the runner.
#pragma once

#include <string>

#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// The spec `study` was made from, parsed from its record. Errors name the spec's file as it was run (or the study
// when it was made without one). Throws SpecError when this dltune cannot read it.
StudySpec RecordedSpec(const StudyRecord& study);

// The spec's file for commands that print one: the path it was run from, or "<name>.yaml".
std::string SpecFileOf(const StudyRecord& study);

}  // namespace dltune
