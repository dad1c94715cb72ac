// The dltune command run as a user runs it.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

using dltune::test::Result;
using dltune::test::RunDltune;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::string WriteSpec(const std::string& name, const std::string& text) {
  const auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

const std::string kQuickstart = DLTUNE_SOURCE_DIR "/examples/quickstart.yaml";

TEST(Cli, HelpAndVersion) {
  const Result help = RunDltune("--help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("space"));
  // One line a user command, within 100 columns; the commands dltune starts itself are not listed but still run.
  EXPECT_LT(std::count(help.out.begin(), help.out.end(), '\n'), 40) << help.out;
  for (const std::string command : {"run ", "next ", "studies ", "plan "}) {
    const auto at = help.out.find("\n  " + command);
    ASSERT_NE(at, std::string::npos) << command << " is not listed:\n" << help.out;
    EXPECT_LE(help.out.find('\n', at + 1) - at - 1, 100U) << command;
  }
  for (const std::string internal : {"trial-server", "probe-speed", "run-trial", "run-fused"}) {
    EXPECT_THAT(help.out, Not(HasSubstr(internal)));
    EXPECT_EQ(RunDltune(internal + " --help").exit_code, 0) << internal;
  }
  for (const std::string command : {"space --help", "space check --help", "space sample --help"}) {
    const Result sub = RunDltune(command);
    EXPECT_EQ(sub.exit_code, 0) << command;
    EXPECT_THAT(sub.out, HasSubstr("Example")) << command;
  }
  const Result version = RunDltune("--version");
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, StartsWith("dltune 0."));
}

TEST(Cli, UserMistakesPrintOneLineAndExitTwo) {
  const std::string bad = WriteSpec(
      "dltune_cli_bad.yaml", "name: s\nworkload: w\nmax_train_steps: 10\nspace:\n  lr: {min: 0, max: 1, scale: log}\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"space check " + bad, "dltune_cli_bad.yaml:5:13: space.lr.min must be > 0 for scale: log"},
      {"space check /nonexistent/study.yaml", "cannot read the study spec"},
      {"space sample " + kQuickstart + " --format xml", "--format"},
      {"space sample " + kQuickstart + " -n -3", "--trials: must be between 1 and 1000000, not -3"},
      {"spce", "did you mean 'space'?"},
      {"space smaple", "did you mean 'sample'?"},
      {"", "needs a command"},
      {"space check", "STUDY is required"},
      {"space check a.yaml --bogus", "--bogus"},
  };
  for (const auto& [arguments, expected] : cases) {
    const Result result = RunDltune(arguments);
    EXPECT_EQ(result.exit_code, 2) << arguments;
    EXPECT_THAT(result.err, StartsWith("dltune: error: ")) << arguments;
    EXPECT_THAT(result.err, HasSubstr(expected)) << arguments;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << arguments << ": " << result.err;
    EXPECT_EQ(result.out, "") << arguments;
  }
}

TEST(Cli, SpaceCheckDescribesParamsAndSubStudies) {
  const Result result = RunDltune("space check " + kQuickstart);
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("2 sub-studies, 32 trials in all"));
  EXPECT_THAT(result.out, HasSubstr("optimizer=adam"));
  EXPECT_THAT(result.out, HasSubstr("scientific"));
  EXPECT_THAT(result.out, HasSubstr("[1e-05, 0.01] log"));
  EXPECT_THAT(result.out, HasSubstr("the spec is valid"));
}

// The playbook's Adam budget: `space suggest` prints a space to paste, and `space check` warns about a spec that
// searches more of Adam than its trials support, naming the command that suggests one.
TEST(Cli, SpaceSuggestAndTheAdamBudget) {
  const Result suggested = RunDltune("space suggest --optimizer adam --trials 8");
  ASSERT_EQ(suggested.exit_code, 0) << suggested.err;
  EXPECT_THAT(suggested.out, HasSubstr("learning_rate: {min: 1e-05, max: 0.1, scale: log}"));
  EXPECT_THAT(suggested.out, HasSubstr("one_minus_beta1: 0.1"));
  const std::string spec = WriteSpec("dltune_cli_adam.yaml",
                                     "name: adam_budget\nworkload: synthetic\n"
                                     "max_train_steps: 100\ntrials: 8\n" +
                                         suggested.out.substr(suggested.out.find("space:")));
  const Result clean = RunDltune("space check " + spec);
  ASSERT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_THAT(clean.out, Not(HasSubstr("warning:")));
  const Result greedy = RunDltune(
      "space check " + WriteSpec("dltune_cli_greedy.yaml",
                                 "name: greedy\nworkload: synthetic\nmax_train_steps: 100\ntrials: 8\nspace:\n"
                                 "  optimizer: adam\n  learning_rate: {min: 0.0001, max: 0.1, scale: log}\n"
                                 "  one_minus_beta1: {min: 0.01, max: 0.5, scale: log}\n"));
  ASSERT_EQ(greedy.exit_code, 0) << greedy.err;
  EXPECT_THAT(greedy.out, HasSubstr("warning: The study searches more of adam than its 8 trials support"));
  EXPECT_THAT(greedy.out, HasSubstr("dltune space suggest --optimizer adam --trials 8"));
  const Result unknown = RunDltune("space suggest --optimizer adamw --trials 8");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_THAT(unknown.err, HasSubstr("did you mean 'adam'"));
}

// `space check` reads each trial's params as the workload and the trainer would, before anything trains: the
// playbook's "number of layers" example checks, and a param no one reads is named at the workload: key.
TEST(Cli, SpaceCheckReadsTheParamsAsTheWorkloadWould) {
  const std::string layers =
      "name: depth\nworkload: fashion_mnist_mlp\nmax_train_steps: 100\ntrials: 2\nspace:\n"
      "  num_layers: {values: [1, 2, 3], role: scientific}\n  width: 64\n"
      "  learning_rate: {min: 0.001, max: 0.1, scale: log}\n";
  const Result ok = RunDltune("space check " DLTUNE_SOURCE_DIR "/examples/depth.yaml");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("3 sub-studies, 36 trials in all"));
  EXPECT_THAT(ok.out, HasSubstr("num_layers=3"));
  EXPECT_THAT(ok.out, HasSubstr("goal: Does a model with more hidden layers reduce validation error?"));

  const Result typo =
      RunDltune("space check " + WriteSpec("dltune_cli_typo.yaml", layers + "  dropuot: {values: [0.0, 0.1]}\n"));
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("dltune_cli_typo.yaml:2:11: workload 'fashion_mnist_mlp' would fail these trials "
                                  "before training:"));
  EXPECT_THAT(typo.err, HasSubstr("trial 0: workload fashion_mnist_mlp with the trainer uses no hyperparameter named "
                                  "'dropuot' (did you mean 'dropout'?)"));
  EXPECT_EQ(typo.out, "");
}

TEST(Cli, SpaceSampleFormatsAgree) {
  const Result json = RunDltune("space sample " + kQuickstart + " -n 3 --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto root = nlohmann::json::parse(json.out);
  ASSERT_EQ(root["substudies"].size(), 2u);
  EXPECT_EQ(root["substudies"][1]["label"], "optimizer=adam");
  EXPECT_EQ(root["substudies"][1]["trials"].size(), 3u);
  const auto& first_adam = root["substudies"][1]["trials"][0];
  EXPECT_EQ(first_adam["number"], 1);
  EXPECT_TRUE(first_adam["params"].contains("adam_learning_rate"));
  EXPECT_FALSE(first_adam["params"].contains("one_minus_momentum"));

  const Result csv = RunDltune("space sample " + kQuickstart + " -n 3 --format csv");
  ASSERT_EQ(csv.exit_code, 0);
  std::istringstream lines(csv.out);
  std::string header;
  std::getline(lines, header);
  EXPECT_THAT(header, StartsWith("trial,substudy,index,configuration,replica,seed,optimizer,nesterov_learning_rate"));
  int rows = 0;
  for (std::string line; std::getline(lines, line);) ++rows;
  EXPECT_EQ(rows, 6);
  // The same learning rate in both formats, at full precision.
  const double lr = first_adam["params"]["adam_learning_rate"];
  EXPECT_THAT(csv.out, HasSubstr(nlohmann::json(lr).dump()));

  const Result table = RunDltune("space sample " + kQuickstart + " -n 2");
  ASSERT_EQ(table.exit_code, 0);
  EXPECT_THAT(table.out, HasSubstr("sub-study optimizer=nesterov (2 of 16 trials)"));
  EXPECT_THAT(table.out, HasSubstr("learning_rate"));
  EXPECT_THAT(table.out, HasSubstr("fixed: epsilon=1e-08, batch_size=128, weight_decay=0"));
}

}  // namespace
