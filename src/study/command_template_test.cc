#include "study/command_template.h"

#include <gtest/gtest.h>

#include "dltune/core/error.h"
#include "dltune/study/study_spec.h"

namespace dltune {
namespace {

TEST(CommandTemplate, FindsPlaceholdersAndLiteralBraces) {
  EXPECT_EQ(CommandPlaceholders("python3 t.py --lr {learning_rate} --json '{{\"a\": 1}}' {trial_dir} {learning_rate}"),
            (std::vector<std::string>{"learning_rate", "trial_dir", "learning_rate"}));
  EXPECT_THROW(CommandPlaceholders("run {lr"), Error);
  EXPECT_THROW(CommandPlaceholders("run lr}"), Error);
  EXPECT_THROW(CommandPlaceholders("run {}"), Error);
  EXPECT_THROW(CommandPlaceholders("run {a b}"), Error);
}

TEST(CommandTemplate, RendersWithShellQuoting) {
  EXPECT_EQ(RenderCommand("t.py --lr {lr} --name {name} {{x}}", {{"lr", "0.001"}, {"name", "it's a b"}}),
            "t.py --lr 0.001 --name 'it'\\''s a b' {x}");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("/a/b-c_d.e:f,g@h%i+j=k"), "/a/b-c_d.e:f,g@h%i+j=k");
  EXPECT_EQ(ShellQuote("$(rm -rf ~)"), "'$(rm -rf ~)'");
  try {
    (void)RenderCommand("t.py {momentum}", {});
    FAIL() << "a missing value must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("momentum"), std::string::npos) << e.what();
  }
}

TEST(CommandTemplate, SpecRefusesUnknownPlaceholdersAndBothTrialKinds) {
  const std::string space = "max_train_steps: 10\nspace:\n  learning_rate: {min: 0.1, max: 1}\n";
  const StudySpec spec = ParseStudySpec("name: s\ncommand: t.py {learning_rate} {trial_dir}\n" + space, "s.yaml");
  EXPECT_EQ(spec.command, "t.py {learning_rate} {trial_dir}");
  EXPECT_TRUE(spec.workload.name.empty());
  EXPECT_EQ(spec.run_dir, "runs/s");
  EXPECT_THROW(ParseStudySpec("name: s\ncommand: t.py {lr}\n" + space, "s.yaml"), SpecError);
  EXPECT_THROW(ParseStudySpec("name: s\ncommand: t.py {lr\n" + space, "s.yaml"), SpecError);
  EXPECT_THROW(ParseStudySpec("name: s\ncommand: t.py\nworkload: synthetic\n" + space, "s.yaml"), SpecError);
  // Neither: the trials are trained through the ask/tell API.
  const StudySpec ask_tell = ParseStudySpec("name: s\n" + space, "s.yaml");
  EXPECT_TRUE(ask_tell.command.empty() && ask_tell.workload.name.empty());
}

TEST(CommandTemplate, TrainingSettingsParseWithDefaults) {
  const std::string base = "name: s\nworkload: synthetic\nmax_train_steps: 100\nspace:\n  lr: {min: 0.1, max: 1}\n";
  const StudySpec defaults = ParseStudySpec(base, "s.yaml");
  EXPECT_EQ(defaults.training.eval_every_steps, 0);
  EXPECT_EQ(defaults.training.keep_latest_checkpoints, 2);
  const StudySpec spec = ParseStudySpec(
      base +
          "run_dir: /shared/runs\ntraining: {eval_every_steps: 10, threads: 2, keep_best_checkpoints: 0, "
          "test_at_end: true, divergence_factor: 10}\n",
      "s.yaml");
  EXPECT_EQ(spec.run_dir, "/shared/runs");
  EXPECT_EQ(spec.training.eval_every_steps, 10);
  EXPECT_EQ(spec.training.threads, 2);
  EXPECT_EQ(spec.training.keep_best_checkpoints, 0);
  EXPECT_TRUE(spec.training.test_at_end);
  EXPECT_DOUBLE_EQ(spec.training.divergence_factor, 10);
  EXPECT_THROW(ParseStudySpec(base + "training: {threads: 0}\n", "s.yaml"), SpecError);
  EXPECT_THROW(ParseStudySpec(base + "training: {keep_latest_checkpoints: 0}\n", "s.yaml"), SpecError);
  EXPECT_THROW(ParseStudySpec(base + "training: {divergence_factor: 1}\n", "s.yaml"), SpecError);
  EXPECT_THROW(ParseStudySpec(base + "training: {eval_every: 1}\n", "s.yaml"), SpecError);
}

}  // namespace
}  // namespace dltune
