#include "store/recorded_spec.h"

namespace dltune {

StudySpec RecordedSpec(const StudyRecord& study) {
  return ParseStudySpec(study.spec_text, study.spec_path.empty() ? study.name : study.spec_path);
}

std::string SpecFileOf(const StudyRecord& study) {
  return study.spec_path.empty() ? study.name + ".yaml" : study.spec_path;
}

}  // namespace dltune
