// `dltune train` end to end on the synthetic workload: determinism of resumption across processes, divergence, and
// hyperparameter mistakes.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace {

using dltune::test::RunDltune;
using ::testing::HasSubstr;

struct RunRecord {
  std::vector<nlohmann::json> train;  // step, loss, learning_rate, grad_norm (timings dropped)
  std::vector<nlohmann::json> evals;
  std::vector<nlohmann::json> checkpoints;  // written (not deleted) checkpoints
};

RunRecord ReadMetrics(const std::filesystem::path& dir) {
  RunRecord run;
  std::ifstream in(dir / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line);
    const std::string type = record["type"];
    if (type == "train") {
      run.train.push_back({{"step", record["step"]},
                           {"loss", record["loss"]},
                           {"lr", record["learning_rate"]},
                           {"grad_norm", record["grad_norm"]}});
    } else if (type == "eval") {
      run.evals.push_back(record);
    } else if (type == "checkpoint" && !record["deleted"].get<bool>()) {
      run.checkpoints.push_back(record);
    }
  }
  return run;
}

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dltune_train_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

// 2N steps in one process, and N steps plus a new process resuming for N more, give the same metric series and
// a bit-identical final checkpoint (model, optimizer state, step and generator state).
TEST_F(TrainCli, ResumingInANewProcessIsBitIdentical) {
  const std::vector<std::string> configs = {
      "--set optimizer=sgd --set learning_rate=0.1",
      "--set optimizer=nesterov --set learning_rate=0.05 --set one_minus_momentum=0.1",
      "--set optimizer=adam --set learning_rate=0.003 --set dropout=0.1",
      "--set optimizer=nesterov --set learning_rate=0.05 --set normalization=batch",
  };
  for (std::size_t c = 0; c < configs.size(); ++c) {
    const auto whole = dir_ / ("whole" + std::to_string(c));
    const auto split = dir_ / ("split" + std::to_string(c));
    const std::string common = "train synthetic " + configs[c] + " --steps 120 --eval-every 40 --seed 3";
    const auto a = RunDltune(common + " --out " + whole.string());
    ASSERT_EQ(a.exit_code, 0) << a.err << a.out;
    const auto first = RunDltune(common + " --stop-at-step 60 --out " + split.string());
    ASSERT_EQ(first.exit_code, 75) << first.err << first.out;  // stopped, resumable
    const auto second = RunDltune(common + " --out " + split.string());
    ASSERT_EQ(second.exit_code, 0) << second.err;
    EXPECT_THAT(second.out, HasSubstr("resumed from step 60"));

    const RunRecord x = ReadMetrics(whole);
    const RunRecord y = ReadMetrics(split);
    ASSERT_EQ(x.train.size(), 120u) << configs[c];
    EXPECT_EQ(x.train, y.train) << configs[c];
    EXPECT_EQ(x.evals, y.evals) << configs[c];
    ASSERT_FALSE(x.checkpoints.empty());
    EXPECT_EQ(x.checkpoints.back()["step"], 120);
    EXPECT_EQ(x.checkpoints.back()["checksum"], y.checkpoints.back()["checksum"]) << configs[c];
  }
}

TEST_F(TrainCli, LearnsAndEvaluatesAtStepIntervals) {
  const auto out = dir_ / "learn";
  const auto result = RunDltune(
      "train synthetic --set optimizer=adam --set learning_rate=0.01 --steps 300 "
      "--eval-every 100 --test --out " +
      out.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("completed 300 steps"));
  const RunRecord run = ReadMetrics(out);
  std::set<std::int64_t> eval_steps;
  double first_error = -1;
  double last_error = -1;
  bool test_seen = false;
  for (const auto& e : run.evals) {
    eval_steps.insert(e["step"].get<std::int64_t>());
    if (e["split"] == "valid" && e["metric"] == "error_rate") {
      if (first_error < 0) first_error = e["value"];
      last_error = e["value"];
    }
    if (e["split"] == "test") test_seen = true;
  }
  EXPECT_EQ(eval_steps, (std::set<std::int64_t>{100, 200, 300}));
  EXPECT_LT(last_error, 0.2);
  EXPECT_LE(last_error, first_error);
  EXPECT_TRUE(test_seen);
}

TEST_F(TrainCli, DivergenceEndsTheTrialAsInfeasible) {
  const auto result = RunDltune("train synthetic --set optimizer=sgd --set learning_rate=1e6 --steps 200 --out " +
                                (dir_ / "diverge").string());
  EXPECT_EQ(result.exit_code, 3) << result.err;
  EXPECT_THAT(result.out, HasSubstr("infeasible: diverged"));
  EXPECT_THAT(result.out, HasSubstr("at step"));
}

TEST_F(TrainCli, HyperparameterMistakesAreOneLine) {
  const auto typo = RunDltune("train synthetic --set lerning_rate=0.1 --steps 10 --out " + (dir_ / "t").string());
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("uses no hyperparameter named 'lerning_rate' (did you mean 'learning_rate'?)"));
  const auto kind = RunDltune("train synthetic --set optimizer=adamw --steps 10 --out " + (dir_ / "k").string());
  EXPECT_EQ(kind.exit_code, 2);
  EXPECT_THAT(kind.err, HasSubstr("adamw"));
  const auto workload = RunDltune("train fashion_mlp --steps 10 --out " + (dir_ / "w").string());
  EXPECT_EQ(workload.exit_code, 2);
  EXPECT_THAT(workload.err, HasSubstr("no workload named 'fashion_mlp'"));
}

}  // namespace

// A checkpoint whose files match their checksums but that LibTorch cannot read (written by another program, or
// damaged before it was checksummed) is skipped like a corrupt one: training resumes from the next older one.
TEST_F(TrainCli, ACheckpointLibTorchCannotReadFallsBackToAnOlderOne) {
  const std::string common = "train synthetic --set optimizer=sgd --set learning_rate=0.1 --steps 90 --eval-every 30";
  const auto out = dir_ / "run";
  ASSERT_EQ(RunDltune(common + " --stop-at-step 60 --out " + out.string()).exit_code, 75);
  // The newest checkpoint's state becomes bytes LibTorch cannot load; its meta.json and commit marker agree with them.
  const auto newest = out / "checkpoints" / "step_00000060";
  const std::string garbage = "not a torch archive";
  std::ofstream(newest / "state.pt", std::ios::trunc) << garbage;
  const auto sha256 = [&](const std::string& file) {
    const std::string command = "sha256sum " + file + " | cut -d' ' -f1 > " + (dir_ / "sum").string();
    EXPECT_EQ(std::system(command.c_str()), 0);
    std::ifstream in(dir_ / "sum");
    std::string hex;
    in >> hex;
    return hex;
  };
  auto meta = nlohmann::json::parse(std::ifstream(newest / "meta.json"));
  meta["files"]["state.pt"] = {{"sha256", sha256((newest / "state.pt").string())}, {"bytes", garbage.size()}};
  std::ofstream(newest / "meta.json", std::ios::trunc) << meta.dump(2) + "\n";
  const std::string marker = sha256((newest / "meta.json").string()) + "\n";
  std::ofstream(newest / "COMMITTED", std::ios::trunc) << marker;

  const auto resumed = RunDltune(common + " --out " + out.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err << resumed.out;
  EXPECT_THAT(resumed.err, HasSubstr("skipping the checkpoint of step 60"));
  EXPECT_THAT(resumed.out, HasSubstr("resumed from step 30"));
  EXPECT_THAT(resumed.out, HasSubstr("completed 90 steps"));
}

// Stopped right after an evaluation, training keeps that evaluation's checkpoint as it is: saving it again would
// replace it with one without its objective and take it out of the best pool.
TEST_F(TrainCli, AStopRightAfterAnEvaluationKeepsItsCheckpoint) {
  const auto out = dir_ / "stop";
  const auto stopped = RunDltune(
      "train synthetic --set optimizer=sgd --set learning_rate=0.1 --steps 60 "
      "--eval-every 20 --stop-at-step 40 --out " +
      out.string());
  ASSERT_EQ(stopped.exit_code, 75) << stopped.err;
  int saves_of_40 = 0;
  for (const auto& checkpoint : ReadMetrics(out).checkpoints) {
    if (checkpoint["step"] == 40) {
      ++saves_of_40;
      EXPECT_TRUE(checkpoint.contains("objective")) << checkpoint.dump();
    }
  }
  EXPECT_EQ(saves_of_40, 1);
  const auto meta = nlohmann::json::parse(std::ifstream(out / "checkpoints" / "step_00000040" / "meta.json"));
  EXPECT_FALSE(meta["objective"].is_null());
}
