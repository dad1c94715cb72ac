// Writing a study's HTML report from its store: the report module renders the page; this adds what only the run
// module knows (the best trials' checkpoints and the commands that train them again).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>

#include "dltune/store/store.h"

namespace dltune {

struct WrittenReport {
  std::filesystem::path path;  // absolute
  std::string study;
  std::size_t trials = 0;
  std::size_t findings = 0;  // of the playbook checklist (Diagnose) still open: not marked handled by a note
};

// Renders the report of study `study` (`top` best trials listed per sub-study) and writes it whole to `output`, or to
// ./<study>-report.html when `output` is empty. Throws Error when the study is missing or too large to read whole,
// IoError when the file cannot be written (an earlier file stays as it was).
WrittenReport WriteStudyReport(Store& store, const std::string& study, const std::filesystem::path& output,
                               std::size_t top = 5);

// Two studies compared (RenderComparison), written whole to `output`, or to ./<a>-vs-<b>.html when it is empty.
// Returns the absolute path. Throws Error for a missing study or different objectives, IoError for the file.
std::filesystem::path WriteComparison(Store& store, const std::string& a, const std::string& b,
                                      const std::filesystem::path& output);

}  // namespace dltune
