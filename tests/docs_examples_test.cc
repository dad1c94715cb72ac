// Keeps docs/study-spec.md true: every YAML example marked `# example: valid` parses and plans all its trials, and
// every example marked `# example: error: TEXT` is refused with a SpecError whose message contains TEXT.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "dltune/core/error.h"
#include "dltune/study/study_spec.h"

namespace dltune {
namespace {

constexpr const char* kDocPath = DLTUNE_SOURCE_DIR "/docs/study-spec.md";
constexpr const char* kMarker = "# example: ";
constexpr const char* kErrorPrefix = "error: ";

// One marked example of the doc.
struct DocExample {
  int line = 0;        // line of the opening fence in the doc, for messages
  bool valid = false;  // `# example: valid`
  std::string error;   // `# example: error: <error>`: text the error message must contain
  std::string text;    // the whole block, marker line included (so line numbers match the doc's)
  std::string marker;  // the marker line as written
};

std::string ReadDoc() {
  std::ifstream in(kDocPath, std::ios::binary);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

bool StartsWith(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }

// Every ```yaml block whose first line is a `# example: ` marker. A block whose marker is neither `valid` nor
// `error: <text>` is returned with valid == false and an empty error, and fails the test.
std::vector<DocExample> ExtractExamples(const std::string& doc) {
  std::vector<DocExample> examples;
  std::istringstream in(doc);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line != "```yaml") continue;
    const int fence = number;
    std::vector<std::string> body;
    while (std::getline(in, line)) {
      ++number;
      if (line == "```") break;
      body.push_back(line);
    }
    if (body.empty() || !StartsWith(body.front(), kMarker)) continue;
    DocExample example;
    example.line = fence;
    example.marker = body.front();
    const std::string kind = body.front().substr(std::string(kMarker).size());
    if (kind == "valid") {
      example.valid = true;
    } else if (StartsWith(kind, kErrorPrefix)) {
      example.error = kind.substr(std::string(kErrorPrefix).size());
    }
    for (const auto& body_line : body) example.text += body_line + "\n";
    examples.push_back(std::move(example));
  }
  return examples;
}

TEST(DocsExamples, TheDocHasMarkedExamplesOfBothKinds) {
  const std::string doc = ReadDoc();
  ASSERT_FALSE(doc.empty()) << "cannot read " << kDocPath;
  const std::vector<DocExample> examples = ExtractExamples(doc);
  std::size_t valid = 0;
  std::size_t errors = 0;
  for (const auto& example : examples) {
    if (example.valid) ++valid;
    if (!example.error.empty()) ++errors;
    EXPECT_TRUE(example.valid || !example.error.empty())
        << kDocPath << ":" << example.line << ": the marker '" << example.marker
        << "' must be '# example: valid' or '# example: error: <part of the message>'";
  }
  EXPECT_GE(examples.size(), 10u) << "the marked examples of " << kDocPath << " have disappeared";
  EXPECT_GE(valid, 1u);
  EXPECT_GE(errors, 1u);
}

TEST(DocsExamples, ValidExamplesParseAndPlanEveryTrial) {
  for (const auto& example : ExtractExamples(ReadDoc())) {
    if (!example.valid) continue;
    SCOPED_TRACE(std::string(kDocPath) + ":" + std::to_string(example.line));
    try {
      const StudySpec spec = ParseStudySpec(example.text, "example.yaml");
      const StudyPlan plan(spec);
      EXPECT_GT(plan.TrialCount(), 0u);
      for (std::uint64_t number = 0; number < plan.TrialCount(); ++number) {
        const PlannedTrial trial = plan.Trial(number);
        EXPECT_EQ(trial.number, number);
        EXPECT_FALSE(trial.params.empty());
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "the example is marked valid but fails: " << e.what();
    }
  }
}

TEST(DocsExamples, ErrorExamplesFailWithTheDocumentedMessage) {
  for (const auto& example : ExtractExamples(ReadDoc())) {
    if (example.error.empty()) continue;
    SCOPED_TRACE(std::string(kDocPath) + ":" + std::to_string(example.line));
    try {
      ParseStudySpec(example.text, "example.yaml");
      ADD_FAILURE() << "the example is marked as an error but parses; expected: " << example.error;
    } catch (const SpecError& e) {
      EXPECT_NE(std::string(e.what()).find(example.error), std::string::npos)
          << "expected the message to contain: " << example.error << "\nactual message: " << e.what();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "expected a dltune::SpecError, got another exception: " << e.what();
    }
  }
}

}  // namespace
}  // namespace dltune
