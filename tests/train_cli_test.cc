// `dltune train` end to end on the synthetic workload: determinism of resumption across processes, divergence, and
// hyperparameter mistakes.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/files.h"

namespace {

using dltune::test::RunDltune;
using dltune::test::Slurp;
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
    dltune::RemoveTree(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { dltune::RemoveTree(dir_); }
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
    // One thread: auto takes the cores other processes leave idle, which a busy machine (the tests themselves) moves.
    const std::string common = "train synthetic " + configs[c] + " --steps 120 --eval-every 40 --seed 3 --threads 1";
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
  EXPECT_EQ(result.exit_code, 4) << result.err;  // infeasible (docs/exit-statuses.md)
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

// The step numbers of a profile trace's step spans (docs/training.md, "DIR/profile.trace.json").
static std::set<std::int64_t> TracedSteps(const nlohmann::json& trace) {
  std::set<std::int64_t> steps;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("cat", "") == "dltune" && event.at("args").contains("step")) {
      steps.insert(event["args"]["step"].get<std::int64_t>());
    }
  }
  return steps;
}

// `dltune train --profile-steps A:B` writes DIR/profile.trace.json of steps A+1 to B and says where it is.
TEST_F(TrainCli, AProfileWindowIsTracedBesideTheMetrics) {
  const auto out = dir_ / "profiled";
  const auto result = RunDltune(
      "train synthetic --set optimizer=adam --set learning_rate=0.01 --steps 40 --eval-every 10 "
      "--profile-steps 9:11 --out " +
      out.string());
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("profile trace of steps 9:11 in " + (out / "profile.trace.json").string()));
  const auto trace = nlohmann::json::parse(std::ifstream(out / "profile.trace.json"));
  EXPECT_EQ(TracedSteps(trace), (std::set<std::int64_t>{10, 11}));
  bool addmm = false;
  for (const auto& event : trace["traceEvents"]) addmm = addmm || event["name"] == "aten::addmm";
  EXPECT_TRUE(addmm);
  // scripts/trace-summary sums it by operator: its two steps, their parts, and their operators' own CPU time.
  const auto summary = dir_ / "summary.txt";
  ASSERT_EQ(std::system(("python3 " DLTUNE_SOURCE_DIR "/scripts/trace-summary " +
                         (out / "profile.trace.json").string() + " > " + summary.string() + " 2>&1")
                            .c_str()),
            0)
      << Slurp(summary);
  const std::string text = Slurp(summary);
  EXPECT_THAT(text, HasSubstr("steps 10-11 (2), device cpu"));
  EXPECT_THAT(text, ::testing::ContainsRegex("its parts \\(wall time, ms a step\\): .*forward [0-9]+\\.[0-9]{3}"));
  EXPECT_THAT(text, HasSubstr("operators' own CPU time"));
  EXPECT_THAT(text, ::testing::ContainsRegex("aten::addmm +[0-9]+\\.[0-9] +[0-9]+\\.[0-9]+ "))
      << "its calls and time a step";
}

TEST_F(TrainCli, ABadProfileWindowIsRefusedNamingTheSetting) {
  const auto past = RunDltune("train synthetic --steps 20 --profile-steps 5:50 --out " + (dir_ / "p").string());
  EXPECT_EQ(past.exit_code, 2);
  EXPECT_THAT(past.err, HasSubstr("training.profile_steps must end at step 20 (max_train_steps) or before, not 5:50"));
  const auto reversed = RunDltune("train synthetic --steps 20 --profile-steps 9:3 --out " + (dir_ / "r").string());
  EXPECT_EQ(reversed.exit_code, 2);
  EXPECT_THAT(reversed.err, HasSubstr("--profile-steps: must be A:B with A < B"));
  const auto word = RunDltune("train synthetic --steps 20 --profile-steps 5 --out " + (dir_ / "w").string());
  EXPECT_EQ(word.exit_code, 2);
  EXPECT_THAT(word.err, HasSubstr("--profile-steps: must be A:B, from step A to step B"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "p" / "profile.trace.json"));
}

// Ctrl-C inside the window: the run stops after a checkpoint (75), and the trace of the steps it did is whole JSON.
TEST_F(TrainCli, CtrlCInsideTheProfileWindowStillWritesAValidTrace) {
  const auto out = dir_ / "interrupted";
  const auto log = dir_ / "interrupted.log";
  const std::string cli = DLTUNE_CLI;
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(cli.c_str(), cli.c_str(), "train", "synthetic", "--set", "optimizer=adam", "--steps", "1000000",
            "--log-every", "5", "--eval-every", "1000000", "--profile-steps", "0:1000000", "--out", out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // The first progress line: training runs, inside the window (its handler for SIGINT is in place).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (Slurp(log).find("step ") == std::string::npos && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGINT);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  const std::string output = Slurp(log);
  ASSERT_TRUE(WIFEXITED(status)) << output;
  EXPECT_EQ(WEXITSTATUS(status), 75) << output;
  const auto stopped_at = output.find("stopped at step ");
  ASSERT_NE(stopped_at, std::string::npos) << output;
  const std::int64_t last = std::stoll(output.substr(stopped_at + std::string("stopped at step ").size()));
  EXPECT_GE(last, 5);

  std::ifstream in(out / "profile.trace.json");
  ASSERT_TRUE(in.good()) << output;
  const auto trace = nlohmann::json::parse(in);  // the whole file: a torn one throws
  EXPECT_EQ(trace["otherData"]["dltune"]["ended"], "stopped");
  std::set<std::int64_t> expected;
  for (std::int64_t step = 1; step <= last; ++step) expected.insert(step);
  EXPECT_EQ(TracedSteps(trace), expected);
}
