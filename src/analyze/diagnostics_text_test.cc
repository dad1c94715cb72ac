#include "analyze/diagnostics_text.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using ::testing::HasSubstr;

TEST(DiagnosticsText, CountsOpenFindingsAndWrapsEachUnderItsSeverity) {
  std::string detail;
  for (int i = 0; i < 40; ++i) detail += "word" + std::to_string(i) + " ";
  detail.pop_back();
  const std::vector<Diagnostic> diagnostics = {
      {.id = "boundary",
       .severity = Severity::kProblem,
       .title = "At the edge",
       .detail = detail,
       .suggestion = "Expand it",
       .section = "Identifying bad search space boundaries"},
      {.id = "single_runs", .severity = Severity::kInfo, .title = "Single runs", .handled = "note 2: seen"}};
  const std::string text = DiagnosticsText("s", diagnostics);
  EXPECT_THAT(text, HasSubstr("study s: 1 finding (1 problem, 0 warnings, 0 notes), and 1 marked handled\n"));
  EXPECT_THAT(text, HasSubstr("\nPROBLEM   At the edge\n          word0 word1"));
  EXPECT_THAT(text, HasSubstr("          Suggestion: Expand it\n"
                              "          Playbook: \"Identifying bad search space boundaries\"\n"
                              "          Finding: boundary\n"));
  EXPECT_THAT(text, HasSubstr("\nHANDLED   Single runs\n          Marked handled by note 2: seen (single_runs)\n"));
  std::istringstream lines(text);
  int detail_lines = 0;
  for (std::string line; std::getline(lines, line);) {
    EXPECT_LE(line.size(), 100u) << line;
    if (line.find("word") != std::string::npos) ++detail_lines;
  }
  EXPECT_GT(detail_lines, 1);
}

TEST(DiagnosticsText, SaysWhenNoCheckApplies) {
  EXPECT_EQ(DiagnosticsText("s", {}), "study s: no finding — none of the playbook's checks applies to it\n");
}

TEST(DiagnosticsText, NextStepNamesItsStudyCommandAndSection) {
  EXPECT_EQ(NextStepText({.id = "retrain",
                          .study = "s",
                          .title = "Retrain",
                          .why = "single runs",
                          .command = "dltune plan retrain --from s",
                          .section = "Trial variance"}),
            "study s: Retrain\n  because: single runs\n  run:     dltune plan retrain --from s\n"
            "  playbook: \"Trial variance\"\n");
  EXPECT_EQ(NextStepText({.title = "Edit the spec", .why = "it \x1b[2Jsays so"}),
            "Edit the spec\n  because: it \\x1b[2Jsays so\n");
}

}  // namespace
}  // namespace dltune
