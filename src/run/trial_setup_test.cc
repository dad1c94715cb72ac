#include "run/trial_setup.h"

#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "dltune/workloads/train.h"
#include "run/run_test_util.h"
#include "train/torch_build.h"
#include "trial/checkpoint_owner.h"

namespace dltune {
namespace {

using test::TempStore;

TEST(TrialSetup, WritesTheTrialsFilesAndEnvironment) {
  TempStore temp;
  const StudySpec spec = test::CommandSpec("s", "python3 train.py --lr {learning_rate} --out {trial_dir}", temp.dir(),
                                           1, "training: {threads: 3}\n");
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  auto trial = session.Ask("w:1");
  const PreparedTrial prepared = PrepareTrial(spec, session.study(), *trial, "/usr/bin/dltune");
  ASSERT_EQ(session.study().uid.size(), 12u);
  EXPECT_EQ(prepared.trial_dir, temp.dir() / "runs" / session.study().uid / "trial_0");
  EXPECT_FALSE(prepared.resuming);
  const std::string lr = FormatValue(trial->record().params.at("learning_rate"));
  // A simple command replaces the shell, so signals reach the program itself.
  EXPECT_EQ(prepared.command.shell_command,
            "exec python3 train.py --lr " + lr + " --out " + prepared.trial_dir.string());
  EXPECT_EQ(prepared.command.environment.at("DLTUNE_THREADS"), "3");
  EXPECT_EQ(prepared.command.environment.at("OMP_NUM_THREADS"), "3");
  EXPECT_EQ(prepared.command.environment.at("DLTUNE_RESUMING"), "0");
  EXPECT_EQ(prepared.command.environment.at("DLTUNE_MAX_TRAIN_STEPS"), "4");
  std::ifstream params_file(prepared.trial_dir / "params.json");
  const auto params = nlohmann::json::parse(params_file);
  EXPECT_EQ(FormatValue(*ValueFromJson(params.at("learning_rate"))), lr);
  std::ifstream trial_file(prepared.trial_dir / "trial.json");
  const auto description = nlohmann::json::parse(trial_file);
  EXPECT_EQ(description.at("protocol"), 1);
  EXPECT_EQ(description.at("training").at("eval_every_steps"), 1);  // max_train_steps / 10, at least 1
  EXPECT_EQ(description.at("training").at("threads"), 3);
  EXPECT_EQ(description.at("seed").get<std::uint64_t>(), trial->record().seed);
  EXPECT_EQ(description.at("study_uid"), session.study().uid);
  EXPECT_EQ(description.at("checkpoint_owner"),
            TrialCheckpointOwner(session.study(), trial->record(), trial->ParamsByName()));
  // A second attempt knows it resumes.
  EXPECT_TRUE(PrepareTrial(spec, session.study(), *trial, "/usr/bin/dltune").resuming);
}

// With training.threads left to auto, a trial gets the layout's threads when it starts and keeps them when it
// resumes under another layout (resuming is bit-exact only with the same threads).
// A trial, its checkpoint's evaluation and a layout probe get their variables from one builder: each sets only what
// it is given, and the built-in trainer's processes get what its trial server was started with.
TEST(TrialSetup, OneBuilderGivesEveryTrialProcessItsVariables) {
  const std::filesystem::path dir = "/runs/abc/trial_3";
  const auto trial = TrialEnvironment({.trial_dir = dir, .seed = 7, .max_train_steps = 500, .threads = 2});
  EXPECT_EQ(trial.at("DLTUNE_TRIAL_DIR"), dir.string());
  EXPECT_EQ(trial.at("DLTUNE_PARAMS"), (dir / "params.json").string());
  EXPECT_EQ(trial.at("DLTUNE_TRIAL"), (dir / "trial.json").string());
  EXPECT_EQ(trial.at("DLTUNE_SEED"), "7");
  EXPECT_EQ(trial.at("DLTUNE_MAX_TRAIN_STEPS"), "500");
  for (const char* threads : {"DLTUNE_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"})
    EXPECT_EQ(trial.at(threads), "2");
  const auto evaluation = TrialEnvironment({.trial_dir = dir, .seed = 7});
  EXPECT_FALSE(evaluation.contains("DLTUNE_THREADS")) << "set only when given";
  EXPECT_FALSE(evaluation.contains("DLTUNE_MAX_TRAIN_STEPS"));
  const auto probe = TrialEnvironment({.builtin = true, .trial_json = "/tmp/probe/trial.json", .threads = 4});
  EXPECT_EQ(probe.at("DLTUNE_TRIAL"), "/tmp/probe/trial.json");
  EXPECT_FALSE(probe.contains("DLTUNE_TRIAL_DIR"));
  for (const auto& [name, value] : SharedTrialEnvironment(/*builtin=*/true)) EXPECT_EQ(probe.at(name), value) << name;
}

TEST(TrialSetup, AnAutoTrialKeepsItsThreadsWhenItResumes) {
  TempStore temp;
  const StudySpec spec = test::CommandSpec("s", "python3 train.py", temp.dir());
  ASSERT_EQ(spec.training.threads, 0);
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  auto trial = session.Ask("w:1");
  const auto threads_of = [](const PreparedTrial& prepared) {
    std::ifstream in(prepared.trial_dir / "trial.json");
    return nlohmann::json::parse(in).at("training").at("threads").get<int>();
  };
  const PreparedTrial first = PrepareTrial(spec, session.study(), *trial, "dltune", 2);
  EXPECT_EQ(threads_of(first), 2);
  EXPECT_EQ(first.command.environment.at("DLTUNE_THREADS"), "2");
  EXPECT_EQ(TrialThreads(spec, session.study(), trial->number()), 2);
  const PreparedTrial resumed = PrepareTrial(spec, session.study(), *trial, "dltune", 1);
  EXPECT_TRUE(resumed.resuming);
  EXPECT_EQ(threads_of(resumed), 2);
  EXPECT_EQ(resumed.command.environment.at("DLTUNE_THREADS"), "2");
  // Another trial, not started before, gets the new layout's.
  auto next = session.Ask("w:1");
  EXPECT_EQ(threads_of(PrepareTrial(spec, session.study(), *next, "dltune", 1)), 1);
}

TEST(TrialSetup, CompoundCommandsKeepTheirShell) {
  TempStore temp;
  const StudySpec spec = test::CommandSpec("s", "cd sub && python3 t.py {learning_rate}", temp.dir());
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  auto trial = session.Ask("w:1");
  EXPECT_EQ(PrepareTrial(spec, session.study(), *trial, "dltune")
                .command.shell_command.rfind("trap : TERM; cd sub && python3 t.py ", 0),
            0u);
}

TEST(TrialSetup, BuiltinTrialsRunDltuneAndReproduceWithTrain) {
  TempStore temp;
  const StudySpec spec =
      ParseStudySpec("name: b\nworkload: {name: synthetic, args: {hidden_sizes: [8]}}\nmax_train_steps: 50\nrun_dir: " +
                         (temp.dir() / "runs").string() +
                         "\nobjective: {metric: valid/accuracy, direction: maximize}\n"
                         "training: {eval_every_steps: 10, test_at_end: true, keep_best_checkpoints: 3}\n"
                         "space:\n  learning_rate: {min: 0.01, max: 0.1}\n  optimizer: adam\n",
                     "b.yaml");
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  auto trial = session.Ask("w:1");
  const PreparedTrial prepared = PrepareTrial(spec, session.study(), *trial, "/opt/bin/dltune");
  EXPECT_EQ(prepared.command.argv, (std::vector<std::string>{"/opt/bin/dltune", "run-trial"}));
  const std::string reproduce = ReproduceCommand(spec, session.study(), trial->record());
  EXPECT_EQ(reproduce.rfind("dltune train synthetic --set 'hidden_sizes=[8]' --set learning_rate=", 0), 0u)
      << reproduce;
  for (const std::string& flag :
       std::vector<std::string>{"--set optimizer=adam", "--steps 50", "--seed " + std::to_string(trial->record().seed),
                                "--eval-every 10", "--test", "--objective valid/accuracy --maximize", "--keep-best 3",
                                "--out " + (temp.dir() / "runs" / session.study().uid / "trial_0-again").string()}) {
    EXPECT_NE(reproduce.find(flag), std::string::npos) << flag << " missing from: " << reproduce;
  }
}

// A built-in trainer asked for CUDA by a dltune whose LibTorch has none is refused before any trial starts (each would
// fail alike at its start); a command: trial, or the trainer on auto, is not.
TEST(TrialSetup, TheBuiltinTrainerOnCudaNeedsALibTorchWithCuda) {
  try {
    WorkloadNames();
  } catch (const Error& e) {
    GTEST_SKIP() << "a dltune built without its trainer refuses every built-in workload: " << e.what();
  }
  const std::string common =
      "name: g\nmax_train_steps: 50\nobjective: {metric: valid/accuracy, direction: maximize}\n"
      "space:\n  learning_rate: {min: 0.01, max: 0.1}\n";
  const StudySpec builtin =
      ParseStudySpec(common + "workload: {name: synthetic}\ntraining: {device: cuda}\n", "g.yaml");
  if (LibTorchHasCuda()) {
    EXPECT_NO_THROW(CheckWorkerCanTrain(builtin));
  } else {
    try {
      CheckWorkerCanTrain(builtin);
      ADD_FAILURE() << "a study on CUDA was accepted by a dltune without CUDA";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("g.yaml: study 'g' sets training.device: cuda"), std::string::npos) << what;
      EXPECT_NE(what.find("has no CUDA"), std::string::npos) << what;
      EXPECT_NE(what.find("set training.device to auto"), std::string::npos) << what;
    }
  }
  EXPECT_NO_THROW(CheckWorkerCanTrain(
      ParseStudySpec(common + "workload: {name: synthetic}\ntraining: {device: auto}\n", "g.yaml")));
  EXPECT_NO_THROW(CheckWorkerCanTrain(
      ParseStudySpec(common + "command: ./train.sh {params_file}\ntraining: {device: cuda}\n", "g.yaml")));
}

// Two studies with the same run_dir, or the same name in two stores, never share a trial directory; a directory
// claimed by another study is refused.
TEST(TrialSetup, StudiesNeverShareTrialDirectories) {
  TempStore first, second;
  const StudySpec a = test::CommandSpec("a", "true", first.dir());
  const StudySpec b = ParseStudySpec(
      "name: b\ncommand: 'true'\nmax_train_steps: 4\ntrials: 2\nrun_dir: " + (first.dir() / "runs").string() +
          "\nspace:\n  learning_rate: {min: 0.01, max: 1, scale: log}\n",
      "b.yaml");
  StudySession session_a = StudySession::OpenOrCreate(first.store(), a, "");
  StudySession session_b = StudySession::OpenOrCreate(first.store(), b, "");
  StudySession same_name_elsewhere = StudySession::OpenOrCreate(second.store(), a, "");
  const auto dir_a = PrepareTrial(a, session_a.study(), *session_a.Ask("w:1"), "dltune").trial_dir;
  const auto dir_b = PrepareTrial(b, session_b.study(), *session_b.Ask("w:1"), "dltune").trial_dir;
  const auto dir_a2 = PrepareTrial(a, same_name_elsewhere.study(), *same_name_elsewhere.Ask("w:1"), "dltune").trial_dir;
  EXPECT_NE(dir_a, dir_b);
  EXPECT_NE(dir_a, dir_a2);
  EXPECT_EQ(dir_a.parent_path().parent_path(), dir_b.parent_path().parent_path());  // the same run_dir

  // A study directory whose study.json names another study is not touched.
  std::filesystem::copy_file(dir_b.parent_path() / "study.json", dir_a.parent_path() / "study.json",
                             std::filesystem::copy_options::overwrite_existing);
  try {
    PrepareTrial(a, session_a.study(), *session_a.Ask("w:1"), "dltune");
    FAIL() << "a directory of study b was used by study a";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("belongs to study 'b'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dltune
