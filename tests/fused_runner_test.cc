// Fused trials in the runner (training.fuse; docs/training.md, "Fused trials"): a sub-study's trials that differ
// only in fusible hyperparameters train as one group in one process (with other sub-studies' where the group has
// room and they differ only so), and each stays a trial of its own with the measurements, evaluations, checkpoints
// and state it would have had alone.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "dltune/store/store.h"
#include "own_directory.h"
#include "study_results.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using test::Slurp;
using test::SomeProcessWorksIn;
using ::testing::HasSubstr;

class FusedRunner : public test::InOwnDirectory {
 protected:
  FusedRunner() : InOwnDirectory("fused") {}

  // Nesterov vs Adam on the Fashion-MNIST MLP, `trials` per optimizer of `steps` steps (evaluated every `steps` / 3),
  // with `fuse` (empty: left out) and the Nesterov learning rates `nesterov_lr`.
  void WriteStudy(const std::string& name, const std::string& fuse, int trials, const std::string& nesterov_lr,
                  int steps = 30) {
    fs::create_directories(dir_ / name);
    std::ofstream(dir_ / name / "study.yaml")
        << "name: fused\n"
           "workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [32]}}\n"
        << "max_train_steps: " << steps << "\ntraining: {eval_every_steps: " << steps / 3
        << ", train_eval_examples: 1000, threads: 1" << (fuse.empty() ? "" : ", fuse: " + fuse) << "}\n"
        << "trials: " << trials
        << "\n"
           "sampler: halton\n"
           "space:\n"
           "  optimizer: {values: [nesterov, adam], role: scientific}\n"
           "  nesterov_learning_rate: {name: learning_rate, when: {optimizer: nesterov}, "
        << nesterov_lr
        << "}\n"
           "  momentum: {when: {optimizer: nesterov}, value: 0.9}\n"
           "  adam_learning_rate: {name: learning_rate, when: {optimizer: adam}, min: 0.0001, max: 0.01, scale: log}\n"
           "  one_minus_beta1: {when: {optimizer: adam}, min: 0.01, max: 0.5, scale: log}\n"
           "  batch_size: 64\n";
  }

  // `dltune run` of study `name` with `parallel` trials (or groups) at once.
  std::string RunCommand(const std::string& name, int parallel = 2) const {
    return "cd '" + (dir_ / name).string() + "' && DLTUNE_CACHE_DIR='" + (dir_ / "cache").string() + "' exec " +
           DLTUNE_CLI + " run study.yaml --parallel " + std::to_string(parallel) + " --no-report --storage sqlite://" +
           (dir_ / name / "dltune.db").string() + " >> run.out 2>&1";
  }
  int Run(const std::string& name, int parallel = 2) {
    const int status = std::system(RunCommand(name, parallel).c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  // Runs study `name` until `trials` of its trials have recorded `step` training steps, then interrupts it (Ctrl-C);
  // returns its exit status.
  int RunAndInterrupt(const std::string& name, int trials, std::int64_t step) {
    const std::string command = RunCommand(name);
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    const fs::path db = dir_ / name / "dltune.db";
    for (int ready = 0; ready < trials && std::chrono::steady_clock::now() < deadline;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!fs::exists(db)) continue;
      const auto store = OpenStore("sqlite://" + db.string());
      const auto study = store->FindStudy("fused");
      if (!study) continue;
      ready = 0;
      for (const TrialRecord& trial : store->ListTrials(study->id)) {
        const auto series = store->TrainSeries(trial.id);
        if (trial.state == TrialState::kRunning && !series.empty() && series.back().step >= step) ++ready;
      }
    }
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::map<std::uint64_t, test::TrialResult> Results(const std::string& name) const {
    return test::StudyResults("sqlite://" + (dir_ / name / "dltune.db").string(), "fused");
  }

  // Every trial of study `name` completed, each with the losses and evaluations of the same trial of `alone`: on the
  // CPU a member computes what its lone trial does, operation for operation.
  void ExpectEachTrialAsAlone(const std::string& name, const std::string& alone) {
    const auto fused = Results(name);
    const auto apart = Results(alone);
    ASSERT_EQ(fused.size(), 6U);
    for (const auto& [number, result] : fused) {
      SCOPED_TRACE("trial " + std::to_string(number));
      EXPECT_EQ(result.state, TrialState::kCompleted) << result.reason;
      EXPECT_EQ(result.losses, apart.at(number).losses);
      EXPECT_EQ(result.evals, apart.at(number).evals);
    }
  }

  // Runs the study with `fuse` and `parallel` groups at once, then with each trial alone, 3 trials per optimizer of
  // 30 steps.
  void RunFusedAndAlone(const std::string& fuse, int parallel = 2) {
    const std::string learning_rate = "min: 0.01, max: 0.3, scale: log";
    WriteStudy("fused", fuse, 3, learning_rate);
    WriteStudy("alone", "off", 3, learning_rate);
    ASSERT_EQ(Run("fused", parallel), 0) << Slurp(dir_ / "fused" / "run.out");
    ASSERT_EQ(Run("alone"), 0) << Slurp(dir_ / "alone" / "run.out");
  }

  // How many trial processes said they trained a fused group, and of how many trials.
  std::vector<std::string> GroupLines(const std::string& name) {
    std::vector<std::string> lines;
    for (const auto& entry : fs::recursive_directory_iterator(dir_ / name)) {
      if (entry.path().filename() != "stdout.log" || entry.is_symlink()) continue;
      std::istringstream log(Slurp(entry.path()));
      for (std::string line; std::getline(log, line);) {
        if (line.rfind("fused group of", 0) == 0) lines.push_back(line);
      }
    }
    return lines;
  }
};

TEST_F(FusedRunner, ASubstudysTrialsTrainAsOneGroupAndEachIsTheTrialItWouldBeAlone) {
  ASSERT_NO_FATAL_FAILURE(RunFusedAndAlone("3"));
  // One group per sub-study (Nesterov, Adam), of its three trials.
  EXPECT_THAT(GroupLines("fused"), ::testing::ElementsAre("fused group of 3 trials", "fused group of 3 trials"));
  EXPECT_TRUE(GroupLines("alone").empty());
  ExpectEachTrialAsAlone("fused", "alone");
  const auto alone = Results("alone");
  for (const auto& [number, result] : Results("fused")) {
    EXPECT_EQ(result.losses.size(), 30U) << number;
    EXPECT_EQ(result.checkpoints, alone.at(number).checkpoints) << number;
    EXPECT_GT(result.checkpoints, 0U) << number;
  }
  // Each member's time is its group's, split as a lone trial's is; its train lines carry a lone trial's fields,
  // timings included.
  const auto store = OpenStore("sqlite://" + (dir_ / "fused" / "dltune.db").string());
  for (const TrialRecord& trial : store->ListTrials(store->FindStudy("fused")->id)) {
    for (const char* phase : {"data_load", "train", "data_wait", "evaluation", "checkpoint"}) {
      EXPECT_TRUE(trial.time_split.contains(phase)) << "trial " << trial.number << "'s " << phase;
      if (std::string(phase) != "data_wait") {
        EXPECT_GT(trial.time_split.count(phase) ? trial.time_split.at(phase) : 0.0, 0.0)
            << "trial " << trial.number << "'s " << phase;
      }
    }
    for (const TrainMeasurement& m : store->TrainSeries(trial.id)) {
      ASSERT_TRUE(m.loss && m.learning_rate && m.grad_norm && m.step_time && m.data_wait && m.examples_per_second)
          << "trial " << trial.number << " step " << m.step;
      EXPECT_GT(*m.step_time, 0) << "trial " << trial.number << " step " << m.step;
      EXPECT_GT(*m.examples_per_second, 0) << "trial " << trial.number << " step " << m.step;
    }
  }
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
  // Which trials trained together: in show and in the export; the members' logs are their group's.
  const std::string storage = " --storage sqlite://" + (dir_ / "fused" / "dltune.db").string();
  const auto show = test::RunDltune("show fused 0" + storage);
  EXPECT_THAT(show.out, HasSubstr("trained together with trials 2 and 4 (one process, one array model)")) << show.out;
  const auto exported = test::RunDltune("export fused" + storage);
  EXPECT_THAT(exported.out, HasSubstr(",fused_group")) << exported.out;
  EXPECT_THAT(exported.out, HasSubstr("0 2 4")) << exported.out;
}

// Sub-studies whose scientific hyperparameter is fusible (the optimizer) train together: one group of both
// optimizers' trials, each still the trial it would be alone.
TEST_F(FusedRunner, BothOptimizersTrialsTrainAsOneGroupWhenTheGroupHasRoom) {
  ASSERT_NO_FATAL_FAILURE(RunFusedAndAlone("8", /*parallel=*/1));
  EXPECT_THAT(GroupLines("fused"), ::testing::ElementsAre("fused group of 6 trials"));
  ExpectEachTrialAsAlone("fused", "alone");
  const auto show = test::RunDltune("show fused 1 --storage sqlite://" + (dir_ / "fused" / "dltune.db").string());
  EXPECT_THAT(show.out, HasSubstr("trained together with trials 0, 2, 3, 4 and 5 (one process, one array model)"))
      << show.out;
}

// On the CPU a group takes one core's slot: with two slots free, the six pending trials train as two groups of
// three side by side, not one group of six beside an idle core.
TEST_F(FusedRunner, OnTheCpuTheFreeSlotsShareThePendingTrials) {
  ASSERT_NO_FATAL_FAILURE(RunFusedAndAlone("8", /*parallel=*/2));
  EXPECT_THAT(GroupLines("fused"), ::testing::ElementsAre("fused group of 3 trials", "fused group of 3 trials"));
  ExpectEachTrialAsAlone("fused", "alone");
  const auto store = OpenStore("sqlite://" + (dir_ / "fused" / "dltune.db").string());
  std::vector<TrialRecord> trials = store->ListTrials(store->FindStudy("fused")->id);
  ASSERT_EQ(trials.size(), 6U);
  std::vector<double> starts;
  for (const TrialRecord& trial : trials) starts.push_back(trial.started_at.value_or(0));
  const auto [first, last] = std::minmax_element(starts.begin(), starts.end());
  EXPECT_GT(*first, 0);
  EXPECT_LT(*last - *first, 5) << "the two groups start together";
}

TEST_F(FusedRunner, AMemberThatDivergesIsInfeasibleWhileTheOthersTrainOn) {
  // Two Nesterov trials: learning rates 0.05 and 5000 (the second diverges within a few steps).
  WriteStudy("fused", "4", 2, "values: [0.05, 5000.0]");
  ASSERT_EQ(Run("fused", /*parallel=*/1), 0) << Slurp(dir_ / "fused" / "run.out");
  const auto results = Results("fused");
  int diverged = 0, completed = 0;
  for (const auto& [number, result] : results) {
    if (result.state == TrialState::kInfeasible) {
      ++diverged;
      EXPECT_THAT(result.reason, HasSubstr("diverged")) << number;
      EXPECT_LT(result.losses.size(), 30U);
    } else {
      ++completed;
      EXPECT_EQ(result.state, TrialState::kCompleted) << result.reason;
      EXPECT_EQ(result.losses.size(), 30U);
    }
  }
  EXPECT_EQ(diverged, 1);
  EXPECT_EQ(completed, 3);
  // Both optimizers' trials in one group: the Adam members train on beside the masked Nesterov one.
  EXPECT_THAT(GroupLines("fused"), ::testing::ElementsAre("fused group of 4 trials"));
}

// Ctrl-C stops a group with a checkpoint for each member; the next run resumes the members together, as one group
// from that step, and each trial ends as it would have without the stop (and alone).
TEST_F(FusedRunner, AStoppedGroupResumesAsAGroup) {
  const std::string learning_rate = "min: 0.01, max: 0.3, scale: log";
  WriteStudy("fused", "3", 3, learning_rate, 9000);
  WriteStudy("alone", "off", 3, learning_rate, 9000);
  ASSERT_EQ(RunAndInterrupt("fused", 3, 3000), 75) << Slurp(dir_ / "fused" / "run.out");
  for (const auto& [number, result] : Results("fused")) {
    EXPECT_EQ(result.state, TrialState::kStopped) << number << ": " << result.reason;
  }
  ASSERT_EQ(Run("fused"), 0) << Slurp(dir_ / "fused" / "run.out");
  ASSERT_EQ(Run("alone"), 0) << Slurp(dir_ / "alone" / "run.out");
  // Each sub-study's group formed again: two groups at first, the same two resumed.
  EXPECT_THAT(GroupLines("fused"), ::testing::ElementsAre("fused group of 3 trials", "fused group of 3 trials",
                                                          "fused group of 3 trials", "fused group of 3 trials"));
  ExpectEachTrialAsAlone("fused", "alone");
  const auto show = test::RunDltune("show fused 0 --storage sqlite://" + (dir_ / "fused" / "dltune.db").string());
  EXPECT_THAT(show.out, HasSubstr("trained together with trials 2 and 4")) << show.out;
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
}

// training.fuse: auto measures the study's trial alone and in groups before the trials start, says what it chose
// and why, and keeps that in the study's decision log; the trials train as it chose.
TEST_F(FusedRunner, FuseAutoChoosesByMeasurementAndSaysWhy) {
  WriteStudy("fused", "auto", 2, "min: 0.01, max: 0.3, scale: log", 6000);
  ASSERT_EQ(Run("fused"), 0) << Slurp(dir_ / "fused" / "run.out");
  const std::string out = Slurp(dir_ / "fused" / "run.out");
  EXPECT_THAT(out, ::testing::ContainsRegex("training.fuse auto: (groups of up to [24]: measured|apart: no fused "
                                            "group measured).*alone [0-9]+, in groups of 2 [0-9]+, in groups of 4"))
      << out;
  const auto store = OpenStore("sqlite://" + (dir_ / "fused" / "dltune.db").string());
  const auto notes = store->ListNotes(store->FindStudy("fused")->id);
  ASSERT_EQ(notes.size(), 1U);
  EXPECT_THAT(notes.front().text, HasSubstr("training.fuse auto: "));
  for (const auto& [number, result] : Results("fused")) EXPECT_EQ(result.state, TrialState::kCompleted) << number;
  // Groups formed exactly when the probe chose them.
  EXPECT_EQ(GroupLines("fused").empty(), out.find("training.fuse auto: apart") != std::string::npos);
  // Another study of the same training on this machine takes the measurement kept, and chooses as the first did.
  WriteStudy("again", "auto", 2, "min: 0.01, max: 0.3, scale: log", 6000);
  ASSERT_EQ(Run("again"), 0) << Slurp(dir_ / "again" / "run.out");
  const std::string again = Slurp(dir_ / "again" / "run.out");
  EXPECT_THAT(again, HasSubstr("measured before on this machine, cached in")) << again;
  EXPECT_THAT(again, ::testing::Not(HasSubstr("measuring fused groups"))) << again;
  const auto choice = [](const std::string& text) {
    const auto at = text.find("training.fuse auto: ");
    return at == std::string::npos ? std::string() : text.substr(at, text.find(':', at + 20) - at);
  };
  EXPECT_EQ(choice(again), choice(out));
}

// A study on the CPU that leaves training.fuse out, long enough that the default would measure it on CUDA (2 trials
// of 10,000 steps: the probe's 1,000 steps are 5%), is neither measured nor fused, says nothing of it, and trains
// each trial as with fuse: off, bit for bit.
TEST_F(FusedRunner, TheDefaultOnTheCpuIsNeitherMeasuredNorFused) {
  const std::string learning_rate = "min: 0.01, max: 0.3, scale: log";
  WriteStudy("default", "", 1, learning_rate, 10000);
  WriteStudy("off", "off", 1, learning_rate, 10000);
  ASSERT_EQ(Run("default"), 0) << Slurp(dir_ / "default" / "run.out");
  ASSERT_EQ(Run("off"), 0) << Slurp(dir_ / "off" / "run.out");
  const std::string out = Slurp(dir_ / "default" / "run.out");
  EXPECT_THAT(out, ::testing::Not(HasSubstr("training.fuse"))) << out;
  EXPECT_THAT(out, ::testing::Not(HasSubstr("fused groups"))) << out;
  const auto store = OpenStore("sqlite://" + (dir_ / "default" / "dltune.db").string());
  EXPECT_TRUE(store->ListNotes(store->FindStudy("fused")->id).empty()) << "the decision log has nothing to say";
  EXPECT_TRUE(GroupLines("default").empty());
  const auto fused = Results("default");
  const auto apart = Results("off");
  ASSERT_EQ(fused.size(), 2U);
  for (const auto& [number, result] : fused) {
    SCOPED_TRACE("trial " + std::to_string(number));
    EXPECT_EQ(result.state, TrialState::kCompleted) << result.reason;
    EXPECT_EQ(result.losses, apart.at(number).losses);
    EXPECT_EQ(result.evals, apart.at(number).evals);
  }
}

// One fused group's process that crashes fails each of its members, and counts as one failure of the study: the
// failure breaker (here after 2 in a row) lets the run's other group train on.
TEST_F(FusedRunner, AGroupThatCrashesCountsAsOneFailure) {
  WriteStudy("fused", "3", 3, "min: 0.01, max: 0.3, scale: log", 300);
  // Trial 0 leads the Nesterov group (trials 0, 2 and 4): it crashes at step 5.
  const std::string command = "cd '" + (dir_ / "fused").string() + "' && DLTUNE_INJECT_FAULT=segv@0:5 exec " +
                              DLTUNE_CLI + " run study.yaml --parallel 2 --max-consecutive-failures 2 --no-report " +
                              "--storage sqlite://" + (dir_ / "fused" / "dltune.db").string() + " >> run.out 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "some trials failed, and the run was not halted\n"
                                    << Slurp(dir_ / "fused" / "run.out");
  EXPECT_THAT(Slurp(dir_ / "fused" / "run.out"), ::testing::Not(HasSubstr("in a row ended the same way")));
  for (const auto& [number, result] : Results("fused")) {
    EXPECT_EQ(result.state, number % 2 == 0 ? TrialState::kFailed : TrialState::kCompleted)
        << number << ": " << result.reason;
  }
}

// A member that diverges is recorded infeasible when it diverges, while its mates train on: a runner killed after
// that leaves no member running without checkpoints beside mates with some, and the run again resumes the others
// and ends (it used to refuse the group on every run, failing each member).
TEST_F(FusedRunner, AMemberThatDivergedStaysInfeasibleWhenTheRunnerIsKilled) {
  // Two Nesterov trials, learning rates 0.05 and 5000 (the second diverges within a few steps), and two Adam ones:
  // one group of 4, evaluated (and checkpointed) every 1000 steps.
  WriteStudy("fused", "4", 2, "values: [0.05, 5000.0]", 3000);
  const std::string command = RunCommand("fused", 1);
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  const fs::path db = dir_ / "fused" / "dltune.db";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
  bool past_checkpoint = false;  // the others trained past their first checkpoint; the diverged one ended long ago
  while (!past_checkpoint && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!fs::exists(db)) continue;
    const auto store = OpenStore("sqlite://" + db.string());
    const auto study = store->FindStudy("fused");
    if (!study) continue;
    int past = 0;
    for (const TrialRecord& trial : store->ListTrials(study->id)) {
      const auto series = store->TrainSeries(trial.id);
      if (trial.state == TrialState::kRunning && !series.empty() && series.back().step >= 1100) ++past;
    }
    past_checkpoint = past == 3;
  }
  ASSERT_TRUE(past_checkpoint) << Slurp(dir_ / "fused" / "run.out");
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  for (const auto& [number, result] : Results("fused")) {
    if (result.losses.size() < 100) {
      EXPECT_EQ(result.state, TrialState::kInfeasible) << number << " diverged, and is recorded so: " << result.reason;
    }
  }
  ASSERT_EQ(Run("fused", 1), 0) << Slurp(dir_ / "fused" / "run.out");
  int diverged = 0, completed = 0;
  for (const auto& [number, result] : Results("fused")) {
    diverged += result.state == TrialState::kInfeasible;
    completed += result.state == TrialState::kCompleted;
    if (result.state == TrialState::kCompleted) {
      EXPECT_EQ(result.losses.size(), 3000U) << number << ": each step recorded once";
    }
  }
  EXPECT_EQ(diverged, 1);
  EXPECT_EQ(completed, 3);
}

}  // namespace
}  // namespace dltune
