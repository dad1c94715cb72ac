// Rules the sources keep, checked by reading src/: a trial state's name appears in SQL only through the transition
// table (src/study/trial.cc), a direction ("minimize", "maximize") is parsed only by src/core/objective.cc, the
// dltune command (src/cli/) only parses and prints, trees are removed only through RemoveTree, each training rule
// the lone and fused loops share is defined once, no two files include each other, and a module includes only the
// modules added before it.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/files.h"
#include "dltune/study/trial.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;

struct Hit {
  std::string file;
  int line = 0;
  std::string text;
};

// A C++ source split into its code (comments blanked out, line breaks kept) and the contents of its string literals
// (raw ones included), each with the line it starts on.
struct Lexed {
  struct Literal {
    int line = 0;
    std::string text;
  };
  std::string code;
  std::vector<Literal> literals;
};

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// Whether the `"` at `quote` opens a raw string: R"…, u8R"…, LR"…, uR"…, UR"….
bool OpensRawString(const std::string& text, std::size_t quote) {
  if (quote == 0 || text[quote - 1] != 'R') return false;
  std::size_t start = quote - 1;
  while (start > 0 && IsIdentifierChar(text[start - 1])) --start;
  const std::string prefix = text.substr(start, quote - 1 - start);
  return prefix.empty() || prefix == "u8" || prefix == "L" || prefix == "u" || prefix == "U";
}

Lexed Lex(const std::string& text) {
  Lexed lexed;
  lexed.code.reserve(text.size());
  int line = 1;
  std::size_t i = 0;
  const auto take = [&](bool keep) {
    const char c = text[i++];
    if (c == '\n') ++line;
    lexed.code += (keep || c == '\n') ? c : ' ';
    return c;
  };
  while (i < text.size()) {
    if (text.compare(i, 2, "//") == 0) {
      while (i < text.size() && text[i] != '\n') take(false);
    } else if (text.compare(i, 2, "/*") == 0) {
      while (i < text.size() && text.compare(i, 2, "*/") != 0) take(false);
      if (i < text.size()) take(false), take(false);
    } else if (text[i] == '"' && OpensRawString(text, i)) {
      const std::size_t open = text.find('(', i);
      const std::string close = ")" + text.substr(i + 1, open - i - 1) + "\"";
      const std::size_t end = std::min(text.find(close, open), text.size());
      lexed.literals.push_back({line, text.substr(open + 1, end - open - 1)});
      while (i < std::min(end + close.size(), text.size())) take(true);
    } else if (text[i] == '"' ||
               (text[i] == '\'' && (i == 0 || !std::isdigit(static_cast<unsigned char>(text[i - 1]))))) {
      const char quote = take(true);
      const int first_line = line;
      std::string literal;
      while (i < text.size() && text[i] != quote && text[i] != '\n') {
        if (text[i] == '\\' && i + 1 < text.size()) literal += take(true);
        literal += take(true);
      }
      if (i < text.size() && text[i] == quote) take(true);
      if (quote == '"') lexed.literals.push_back({first_line, literal});
    } else {
      take(true);
    }
  }
  return lexed;
}

// Every C++ file under `folders` of the source tree (default src/), by its path relative to the source tree.
std::map<std::string, Lexed> Sources(const std::vector<std::string>& folders = {"src"}) {
  std::map<std::string, Lexed> sources;
  for (const std::string& folder : folders) {
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(DLTUNE_SOURCE_DIR) / folder)) {
      const std::string extension = entry.path().extension().string();
      if (extension != ".cc" && extension != ".h") continue;
      sources[fs::relative(entry.path(), DLTUNE_SOURCE_DIR).generic_string()] = Lex(ReadWholeFile(entry.path()));
    }
  }
  return sources;
}

std::string Describe(const std::vector<Hit>& hits) {
  std::string text;
  for (const auto& hit : hits) text += "\n  " + hit.file + ":" + std::to_string(hit.line) + ": " + hit.text;
  return text;
}

// The dltune command parses options, calls the library and prints: threads, sockets, processes, SQL and the choice
// of a run's layout are the library's. Read in the code with comments blanked.
TEST(SourceRules, TheCliOnlyParsesAndPrints) {
  const std::regex work(
      R"(std::thread|<thread>|std::async|<sys/socket\.h>|\bsocket\(|\bfork\(|\bexecv|\bpopen\(|httplib|\bTrialProcess\b|)"
      R"(\bTrialServer\b|BecomeSubreaper|ChooseParallelLayout|\bWorkerGang\b|\b(SELECT|INSERT|UPDATE|DELETE FROM)\b)");
  std::vector<Hit> hits;
  for (const auto& [file, lexed] : Sources()) {
    if (file.rfind("src/cli/", 0) != 0) continue;
    std::istringstream code(lexed.code);
    std::string line;
    for (int number = 1; std::getline(code, line); ++number) {
      if (std::regex_search(line, work)) hits.push_back({file, number, line});
    }
  }
  EXPECT_TRUE(hits.empty()) << "work that belongs in the library:" << Describe(hits);
}

// A program linked with a pip LibTorch may resolve std::filesystem::remove_all to that library's copy, which jumps
// to address 0 (torch 2.11 on the GPU machine): trees are removed through RemoveTree (src/core/files.h), in the tests
// and benchmarks too, which link LibTorch as the trial program does.
TEST(SourceRules, TreesAreRemovedOnlyThroughRemoveTree) {
  const std::regex removing_a_tree(R"(\bremove_all\s*\()");
  std::vector<Hit> hits;
  for (const auto& [file, lexed] : Sources({"src", "tests", "bench"})) {
    std::istringstream code(lexed.code);
    std::string line;
    for (int number = 1; std::getline(code, line); ++number) {
      if (std::regex_search(line, removing_a_tree)) hits.push_back({file, number, line});
    }
  }
  EXPECT_TRUE(hits.empty()) << "std::filesystem::remove_all called, not RemoveTree:" << Describe(hits);
}

// The modules in the order the top-level CMakeLists.txt adds them (src/<module>): each may use only those before it.
std::vector<std::string> ModuleOrder() {
  const std::string cmake = ReadWholeFile(fs::path(DLTUNE_SOURCE_DIR) / "CMakeLists.txt");
  const std::regex added(R"(\badd_subdirectory\(src/(\w+)\))");
  std::vector<std::string> order;
  for (auto it = std::sregex_iterator(cmake.begin(), cmake.end(), added); it != std::sregex_iterator(); ++it) {
    order.push_back((*it)[1]);
  }
  return order;
}

// The file of the source tree that `#include "included"` in `from` names: a header beside `from`, of include/ or of
// src/; "" for any other (generated, such as dltune/version.h, or outside src/ and include/).
std::string IncludedFile(const std::string& from, const std::string& included) {
  const fs::path root(DLTUNE_SOURCE_DIR);
  for (const fs::path& candidate :
       {fs::path(from).parent_path() / included, fs::path("include") / included, fs::path("src") / included}) {
    const std::string path = candidate.lexically_normal().generic_string();
    if ((path.rfind("src/", 0) == 0 || path.rfind("include/", 0) == 0) && fs::is_regular_file(root / path)) {
      return path;
    }
  }
  return "";
}

// The module of a file: "run" for src/run/worker.cc and include/dltune/run/run_study.h; "" for the umbrella
// include/dltune/dltune.h.
std::string ModuleOf(const std::string& file) {
  const fs::path path(file);
  auto part = path.begin();
  if (*part == "include") ++part;  // include/dltune/<module>/...
  if (++part == path.end() || std::next(part) == path.end()) return "";
  return part->string();
}

// A file and its header are one: "run/run_study" for src/run/run_study.cc and include/dltune/run/run_study.h.
std::string UnitOf(const std::string& file) { return ModuleOf(file) + "/" + fs::path(file).stem().string(); }

struct Include {
  std::string from;
  int line = 0;
  std::string to;  // the included file, as IncludedFile names it
};

// Every `#include "..."` of src/ and include/ that names a file of the source tree (comments left out).
std::vector<Include> IncludesOfTheTree() {
  const std::regex directive(R"re(^\s*#\s*include\s*"([^"]+)")re");
  std::vector<Include> includes;
  for (const auto& [file, lexed] : Sources({"src", "include"})) {
    std::istringstream code(lexed.code);
    std::string line;
    std::smatch match;
    for (int number = 1; std::getline(code, line); ++number) {
      if (!std::regex_search(line, match, directive)) continue;
      if (const std::string to = IncludedFile(file, match[1]); !to.empty()) includes.push_back({file, number, to});
    }
  }
  return includes;
}

bool IsTest(const std::string& file) {
  return std::regex_search(file, std::regex(R"((_test|_fuzz)\.cc$|_test_util\.h$)"));
}

// Dependencies point one way: no two files include each other, a file and its header counting as one (run_study.cc
// including worker.h, whose worker.h includes run_study.h, is such a pair). Two files that need each other's
// declarations share a third header that both include (as run_types.h holds the run's vocabulary for run_study.h and
// the worker).
TEST(SourceRules, NoTwoFilesIncludeEachOther) {
  std::map<std::pair<std::string, std::string>, Hit> edges;  // (including unit, included unit) -> where
  for (const Include& include : IncludesOfTheTree()) {
    const std::string from = UnitOf(include.from);
    const std::string to = UnitOf(include.to);
    if (from != to) edges.emplace(std::pair(from, to), Hit{include.from, include.line, include.to});
  }
  std::vector<Hit> hits;
  for (const auto& [edge, where] : edges) {
    const auto& [from, to] = edge;
    const auto back = edges.find({to, from});
    if (from > to || back == edges.end()) continue;
    hits.push_back({where.file, where.line,
                    "includes " + where.text + ", and " + back->second.file + ":" + std::to_string(back->second.line) +
                        " includes " + back->second.text});
  }
  EXPECT_TRUE(hits.empty()) << "files that include each other (move what both need into a header of its own):"
                            << Describe(hits);
}

// A module includes only itself and the modules added before it (the order of the top-level CMakeLists.txt, which
// is the order of their dependencies); every folder of src/ is one of them. Its tests may use later ones through
// TEST_DEPS (cmake/dltune_module.cmake), where the build says so.
TEST(SourceRules, AModuleIncludesOnlyTheModulesBeforeIt) {
  const std::vector<std::string> order = ModuleOrder();
  const auto position = [&](const std::string& module) {
    return std::find(order.begin(), order.end(), module) - order.begin();
  };
  for (const auto& folder : fs::directory_iterator(fs::path(DLTUNE_SOURCE_DIR) / "src")) {
    if (folder.is_directory()) {
      EXPECT_NE(position(folder.path().filename().string()), static_cast<long>(order.size()))
          << "src/" << folder.path().filename().string() << " is not added by CMakeLists.txt";
    }
  }
  std::vector<Hit> hits;
  for (const Include& include : IncludesOfTheTree()) {
    const std::string from = ModuleOf(include.from);
    const std::string to = ModuleOf(include.to);
    if (from.empty() || to.empty() || from == to || IsTest(include.from)) continue;
    if (position(to) > position(from)) hits.push_back({include.from, include.line, "includes " + include.to});
  }
  EXPECT_TRUE(hits.empty() && order.size() > 10) << "a module including one added after it:" << Describe(hits);
}

// The training rules the lone trainer (src/train/trainer.cc) and a fused group (src/train/fused_training.cc) share
// (docs/training.md): each is defined in one file, which holds its tell-tale (a message, a key, a decision), and both
// loops call it rather than say it again. Read in the trainer's modules, tests left out.
struct TrainingRule {
  std::string name;
  std::string file;      // where it is defined
  std::regex tell_tale;  // a line of code (comments blanked) that only its definition has
  std::regex call;       // how each loop calls it
};

std::vector<TrainingRule> TrainingRules() {
  return {
      {"divergence", "src/train/training_rules.cc", std::regex(R"("diverged: training loss)"),
       std::regex(R"(\bDivergence\s*\()")},
      {"metrics from sums", "src/train/training_rules.cc", std::regex(R"("correct_class_|"error_rate"\s*,\s*1)"),
       std::regex(R"(\bAddMetricsFromSums\s*\()")},
      {"the objective or its sample", "src/train/training_rules.cc", std::regex(R"("_sample")"),
       std::regex(R"(\bObjectiveValue\s*\()")},
      {"the best step", "src/train/training_rules.cc", std::regex(R"(\bIsBetter\s*\()"),
       std::regex(R"(\bRecord\s*\(\s*step_)")},
      {"the splits to evaluate", "src/train/training_rules.cc",
       std::regex(R"(\blast\b[^;]*\btest_at_end\b|\btest_at_end\b[^;]*\blast\b)"),
       std::regex(R"(\bSplitsToEvaluate\s*\()")},
      {"the checkpoint archive", "src/train/checkpoint_state.cc",
       std::regex(R"re(\.(write|read|try_read)\s*\(\s*"(model|optimizer|step|best_step|best_value|initial_loss)")re"),
       std::regex(R"(\b(Write|Read)TrainingState\s*\()")},
      {"when a CUDA graph is refused", "src/train/cuda_graph.cc",
       std::regex(R"(built without CUDA graphs|exchange their gradients through the host|draws its masks on the host|)"
                  R"(records the eager step's operators)"),
       std::regex(R"(\bCaptureUnlessRefused\s*\()")},
  };
}

TEST(SourceRules, EachTrainingRuleIsDefinedOnceAndBothLoopsCallIt) {
  const std::vector<TrainingRule> rules = TrainingRules();
  ASSERT_EQ(rules.size(), 7u);
  std::map<std::string, std::vector<Hit>> found;  // by rule: the lines of its tell-tale
  std::map<std::string, Lexed> loops;
  for (const auto& [file, lexed] : Sources({"src/train", "src/workloads"})) {
    if (file.ends_with("_test.cc") || file.ends_with("_test_util.h")) continue;
    if (file == "src/train/trainer.cc" || file == "src/train/fused_training.cc") loops[file] = lexed;
    std::istringstream code(lexed.code);
    std::string line;
    for (int number = 1; std::getline(code, line); ++number) {
      for (const TrainingRule& rule : rules) {
        if (std::regex_search(line, rule.tell_tale)) found[rule.name].push_back({file, number, line});
      }
    }
  }
  ASSERT_EQ(loops.size(), 2u);
  for (const TrainingRule& rule : rules) {
    std::vector<Hit> elsewhere;
    for (const Hit& hit : found[rule.name]) {
      if (hit.file != rule.file) elsewhere.push_back(hit);
    }
    EXPECT_FALSE(found[rule.name].empty()) << rule.name << ": its tell-tale is not in " << rule.file;
    EXPECT_TRUE(elsewhere.empty()) << rule.name << " is defined in " << rule.file
                                   << " and said again:" << Describe(elsewhere);
    for (const auto& [file, lexed] : loops) {
      EXPECT_TRUE(std::regex_search(lexed.code, rule.call)) << file << " does not call the rule of " << rule.name;
    }
  }
}

// The tell-tales catch the code the loops held before the rules were shared, so that they cannot quietly match
// nothing.
TEST(SourceRules, TheTrainingRulesTellTalesCatchARepeatedRule) {
  const std::vector<TrainingRule> rules = TrainingRules();
  const std::vector<std::string> repeated = {
      R"(diverged = fmt::format("diverged: training loss is {} at step {}", m.loss, m.step);)",
      R"(metrics.push_back({name, fmt::format("correct_class_{}", k), per_class[k].item<double>(), examples});)",
      R"(for (const std::string& split : {wanted.split, wanted.split + "_sample"}) {)",
      R"(const bool better = !best_value_ || IsBetter(*objective, *best_value_, wanted.direction);)",
      R"(if (last && settings_.test_at_end) AddSplitMetrics("test", test_, metrics);)",
      R"(archive.write("model", model_archive);)",
      R"(if (why_not.empty() && DropoutOf(lone) > 0) why_not = "dropout draws its masks on the host";)",
  };
  ASSERT_EQ(repeated.size(), rules.size());
  for (std::size_t i = 0; i < rules.size(); ++i) {
    EXPECT_TRUE(std::regex_search(Lex(repeated[i]).code, rules[i].tell_tale)) << rules[i].name << ": " << repeated[i];
  }
  EXPECT_FALSE(std::regex_search(Lex("if (settings_.test_at_end) test_ = OnDevice(data.test, device_);").code,
                                 rules[4].tell_tale));
}

TEST(SourceLiterals, TheLexerSeparatesStringsFromComments) {
  const Lexed lexed =
      Lex("int a = 1'000; // 'x' \"not a string\"\nchar q = '\"'; auto s = \"a \\\"b\\\"\";\n"
          "/* \"gone\" */ auto r = R\"sql(x = 'y'\n)\" still)sql\";\n");
  ASSERT_EQ(lexed.literals.size(), 2u);
  EXPECT_EQ(lexed.literals[0].text, "a \\\"b\\\"");
  EXPECT_EQ(lexed.literals[0].line, 2);
  EXPECT_EQ(lexed.literals[1].text, "x = 'y'\n)\" still");
  EXPECT_EQ(lexed.literals[1].line, 3);
  EXPECT_EQ(lexed.code.find("not a string"), std::string::npos);
  EXPECT_EQ(lexed.code.find("gone"), std::string::npos);
}

// SQL names a state only as the transition table gives it (TrialStateName, TransitionRule): a quoted state name
// ('pending', 'running', ...) inside a string literal of any other file is SQL written by hand.
TEST(SourceLiterals, StateNamesReachSqlOnlyThroughTheTransitionTable) {
  // Files allowed to quote a state name, each with why. (A released schema migration that must stay byte for byte
  // would be listed here.)
  const std::map<std::string, std::string> allowed = {
      {"src/study/trial.cc", "the transition table and the states' names themselves"},
  };
  std::vector<std::string> needles;
  for (const TrialState state : {TrialState::kPending, TrialState::kRunning, TrialState::kCompleted,
                                 TrialState::kInfeasible, TrialState::kFailed, TrialState::kStopped}) {
    needles.push_back("'" + TrialStateName(state) + "'");
  }
  std::vector<Hit> hits;
  for (const auto& [file, lexed] : Sources()) {
    if (allowed.contains(file)) continue;
    for (const auto& literal : lexed.literals) {
      for (const std::string& needle : needles) {
        const std::size_t at = literal.text.find(needle);
        if (at == std::string::npos) continue;
        const auto line = literal.line + static_cast<int>(std::count(
                                             literal.text.begin(), literal.text.begin() + static_cast<long>(at), '\n'));
        hits.push_back({file, line, needle + " in \"" + literal.text + "\""});
      }
    }
  }
  EXPECT_TRUE(hits.empty()) << "state names written into SQL by hand (use TrialStateName / TransitionRule):"
                            << Describe(hits);
}

// A direction word used as a parse: compared with == or != (either side), passed to a string comparison (compare,
// starts_with, ends_with), paired with a Direction in a lookup table, or offered as a typo candidate
// ({"minimize", "maximize"}). It allows the words anywhere else: messages and help texts ("must be minimize or
// maximize"), option names (--maximize), specs in tests ("direction: maximize"), JSON keys such as checkpoint
// meta.json's "minimize" field, and comments.
std::regex DirectionParse() {
  const std::string word = R"re("(minimize|maximize)")re";
  const std::string compared = R"((==|!=)\s*)" + word + "|" + word + R"(\s*(==|!=))";
  const std::string passed = R"(\b(compare|starts_with|ends_with)\s*\(\s*)" + word;
  const std::string paired = word + R"(\s*,\s*Direction::|Direction::\w+\s*,\s*)" + word;
  const std::string candidates = R"(\{\s*)" + word + R"(\s*,\s*)" + word + R"(\s*\})";
  return std::regex(compared + "|" + passed + "|" + paired + "|" + candidates);
}

TEST(SourceLiterals, OnlyTheObjectiveParsesADirection) {
  // This file is left out too: its samples below show what the pattern catches.
  const std::string self = "src/store/source_literals_test.cc";
  const std::regex parse = DirectionParse();
  std::vector<Hit> hits;
  for (const auto& [file, lexed] : Sources()) {
    if (file == "src/core/objective.cc" || file == self) continue;
    std::istringstream code(lexed.code);
    std::string line;
    for (int number = 1; std::getline(code, line); ++number) {
      if (std::regex_search(line, parse)) hits.push_back({file, number, line});
    }
  }
  EXPECT_TRUE(hits.empty()) << "a direction parsed outside src/core/objective.cc (use ParseDirection or "
                               "ObjectiveFromJson):"
                            << Describe(hits);
}

TEST(SourceLiterals, TheDirectionPatternCatchesParses) {
  // The same checks as above, on lines that must and must not count, so the pattern cannot quietly match nothing.
  const std::regex parse = DirectionParse();
  for (const std::string parses :
       {R"(if (text == "maximize") {)", R"(text != "minimize")", R"("maximize" == text)",
        R"({"maximize", Direction::kMaximize},)", R"(DidYouMean(text, {"minimize", "maximize"}))",
        R"(text.compare("minimize") == 0)"}) {
    EXPECT_TRUE(std::regex_search(parses, parse)) << parses;
  }
  for (const std::string allowed :
       {R"(throw Error("must be minimize or maximize");)", R"(add_flag("--maximize,!--minimize", ...))",
        R"(json.at("minimize").get<bool>())", R"({"minimize", options_.direction == Direction::kMinimize},)",
        R"(Study("maximize"))"}) {
    EXPECT_FALSE(std::regex_search(allowed, parse)) << allowed;
  }
}

}  // namespace
}  // namespace dltune
