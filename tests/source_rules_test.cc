// Rules the sources keep, checked by reading them: what may live where. Each rule names the files it looks at and what
// it refuses, so a failure says which line broke it.
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

namespace fs = std::filesystem;

struct Hit {
  std::string file;
  int line = 0;
  std::string text;
};

// The lines of the C++ files under `dir` (relative to the source tree) matching `pattern`, comments left out.
std::vector<Hit> Grep(const std::string& dir, const std::regex& pattern) {
  std::vector<Hit> hits;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(DLTUNE_SOURCE_DIR) / dir)) {
    const std::string extension = entry.path().extension().string();
    if (extension != ".cc" && extension != ".h") continue;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::string code = line.substr(0, line.find("//"));
      if (std::regex_search(code, pattern)) {
        hits.push_back({fs::relative(entry.path(), DLTUNE_SOURCE_DIR).string(), number, line});
      }
    }
  }
  return hits;
}

std::string Describe(const std::vector<Hit>& hits) {
  std::string text;
  for (const auto& hit : hits) text += "\n  " + hit.file + ":" + std::to_string(hit.line) + ": " + hit.text;
  return text;
}

// The dltune command parses options, calls the library and prints: threads, sockets, processes, SQL and the choice
// of a run's layout are the library's.
TEST(SourceRules, TheCliOnlyParsesAndPrints) {
  const std::regex work(
      R"(std::thread|<thread>|std::async|<sys/socket\.h>|\bsocket\(|\bfork\(|\bexecv|\bpopen\(|httplib|\bTrialProcess\b|)"
      R"(\bTrialServer\b|BecomeSubreaper|ChooseParallelLayout|\bWorkerGang\b|\b(SELECT|INSERT|UPDATE|DELETE FROM)\b)");
  const auto hits = Grep("src/cli", work);
  EXPECT_TRUE(hits.empty()) << "work that belongs in the library:" << Describe(hits);
}

}  // namespace
