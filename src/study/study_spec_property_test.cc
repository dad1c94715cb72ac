// Property tests of the spec parser over random input: whatever the text, parsing either succeeds or throws
// dltune::Error with a located message; it never crashes, hangs or lets another exception escape.
#include <chrono>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "core/rng.h"
#include "dltune/study/study_spec.h"

namespace dltune {
namespace {

std::string ReadQuickstart() {
  std::ifstream in(DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Parses `text`; returns "" when it parsed or failed with a dltune::Error, else what went wrong.
std::string ParseOutcome(const std::string& text) {
  const auto start = std::chrono::steady_clock::now();
  try {
    const StudySpec spec = ParseStudySpec(text, "fuzz.yaml");
    const StudyPlan plan(spec);
    for (std::uint64_t n = 0; n < std::min<std::uint64_t>(plan.TrialCount(), 4); ++n) plan.Trial(n);
  } catch (const SpecError& e) {
    if (std::string(e.what()).rfind("fuzz.yaml", 0) != 0) return std::string("error without location: ") + e.what();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    return std::string("escaped exception: ") + e.what();
  }
  const auto elapsed = std::chrono::steady_clock::now() - start;
  if (elapsed > std::chrono::seconds(2)) return "took longer than 2 s";
  return "";
}

TEST(StudySpecProperty, MutatedQuickstartNeverCrashes) {
  const std::string original = ReadQuickstart();
  ASSERT_EQ(ParseOutcome(original), "");
  const std::string alphabet = "[]{}:,-#&*!|>'\"%@`?\n \t0123456789.eE+-abcdefghijklmnopqrstuvwxyz_";
  Rng rng(2024);
  int parsed = 0;
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string text = original;
    const int edits = 1 + static_cast<int>(rng.Below(6));
    for (int e = 0; e < edits && !text.empty(); ++e) {
      const std::size_t at = rng.Below(text.size());
      switch (rng.Below(5)) {
        case 0: text.erase(at, 1 + rng.Below(8)); break;
        case 1: text.insert(at, 1, alphabet[rng.Below(alphabet.size())]); break;
        case 2: text[at] = alphabet[rng.Below(alphabet.size())]; break;
        case 3: text.insert(at, text.substr(rng.Below(text.size()), rng.Below(40))); break;
        default: text.insert(at, std::string(1 + rng.Below(4), "[{-&"[rng.Below(4)])); break;
      }
    }
    const std::string outcome = ParseOutcome(text);
    ASSERT_EQ(outcome, "") << "input:\n" << text;
    try {
      ParseStudySpec(text, "fuzz.yaml");
      ++parsed;
    } catch (const Error&) {
    }
  }
  // Some mutations (inside comments and descriptions) must still parse: the test exercises both outcomes.
  EXPECT_GT(parsed, 10);
}

// Random documents built from the spec's own vocabulary, so they get deep into validation.
std::string RandomDocument(Rng& rng, int depth) {
  static const std::vector<std::string> keys = {
      "name",   "workload", "max_train_steps", "trials", "seed",      "sampler", "space", "min",
      "max",    "scale",    "values",          "value",  "role",      "when",    "type",  "configs",
      "points", "lr",       "optimizer",       "args",   "objective", "metric"};
  static const std::vector<std::string> scalars = {"0",
                                                   "-1",
                                                   "1e-3",
                                                   "log",
                                                   "linear",
                                                   "int",
                                                   "scientific",
                                                   "fixed",
                                                   "halton",
                                                   "grid",
                                                   "list",
                                                   "adam",
                                                   "true",
                                                   "'3'",
                                                   "1e400",
                                                   ".nan",
                                                   "9999999999999999999999",
                                                   "x",
                                                   "joint"};
  const auto kind = depth > 4 ? 2 : rng.Below(3);
  if (kind == 0) {
    std::string text = "{";
    const std::uint64_t count = rng.Below(4);
    for (std::uint64_t i = 0; i < count; ++i) {
      text += (i ? ", " : "") + keys[rng.Below(keys.size())] + ": " + RandomDocument(rng, depth + 1);
    }
    return text + "}";
  }
  if (kind == 1) {
    std::string text = "[";
    const std::uint64_t count = rng.Below(4);
    for (std::uint64_t i = 0; i < count; ++i) text += (i ? ", " : "") + RandomDocument(rng, depth + 1);
    return text + "]";
  }
  return scalars[rng.Below(scalars.size())];
}

TEST(StudySpecProperty, RandomDocumentsNeverCrash) {
  Rng rng(7);
  for (int iteration = 0; iteration < 3000; ++iteration) {
    std::string text = "name: s\nworkload: w\nmax_train_steps: 10\n";
    text += "space: " + RandomDocument(rng, 1) + "\n";
    if (rng.Below(2) == 0) text += "sampler: " + RandomDocument(rng, 2) + "\n";
    if (rng.Below(2) == 0) text += "trials: " + RandomDocument(rng, 4) + "\n";
    ASSERT_EQ(ParseOutcome(text), "") << "input:\n" << text;
  }
}

}  // namespace
}  // namespace dltune
