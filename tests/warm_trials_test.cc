// Warm trial processes (src/trial/trial_server.h): built-in trials forked by the worker's trial server train
// exactly as exec'd ones do, and one that crashes, is killed or leaks memory touches no other trial, and no process
// outlives the run. Faults are injected with DLTUNE_INJECT_FAULT (docs/trial-protocol.md, "Testing").
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
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
using ::testing::Not;

class WarmTrials : public test::InOwnDirectory {
 protected:
  WarmTrials() : InOwnDirectory("warm") {}
  void SetUp() override {
    InOwnDirectory::SetUp();
    // Six Fashion-MNIST trials of 20 steps, one at a time (so that trial n + 1 starts after trial n ended).
    std::ofstream(dir_ / "study.yaml") << "name: warm\n"
                                          "workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [32]}}\n"
                                          "max_train_steps: 20\n"
                                          "training: {eval_every_steps: 10, train_eval_examples: 1000}\n"
                                          "trials: 6\n"
                                          "space:\n"
                                          "  optimizer: adam\n"
                                          "  learning_rate: {min: 0.0001, max: 0.01, scale: log}\n"
                                          "  batch_size: 64\n";
  }

  // Runs the study in directory `name` (its store, runs and output there) with `environment` (VAR=value ...) before
  // the command; returns its exit code.
  int RunStudy(const std::string& name, const std::string& environment) {
    fs::create_directories(dir_ / name);
    fs::copy_file(dir_ / "study.yaml", dir_ / name / "study.yaml", fs::copy_options::overwrite_existing);
    const std::string command = "cd '" + (dir_ / name).string() + "' && env DLTUNE_CACHE_DIR='" +
                                (dir_ / "cache").string() + "' " + environment + " " + DLTUNE_CLI +
                                " run study.yaml --parallel 1 --no-report --storage sqlite://" +
                                (dir_ / name / "dltune.db").string() + " > run.out 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  std::map<std::uint64_t, test::TrialResult> Results(const std::string& name) const {
    return test::StudyResults("sqlite://" + (dir_ / name / "dltune.db").string(), "warm");
  }

  std::string TrialLog(const std::string& name, std::uint64_t number) {
    for (const auto& entry : fs::recursive_directory_iterator(dir_ / name)) {
      if (entry.path().filename() == "stdout.log" &&
          entry.path().parent_path().filename() == "trial_" + std::to_string(number)) {
        return Slurp(entry.path());
      }
    }
    return "";
  }

  // The peak memory a trial printed at its end, in MiB (-1 if it did not).
  long PeakMemory(const std::string& name, std::uint64_t number) {
    std::smatch match;
    const std::string log = TrialLog(name, number);
    return std::regex_search(log, match, std::regex("peak memory: (\\d+) MiB")) ? std::stol(match[1]) : -1;
  }
};

TEST_F(WarmTrials, AreForkedByTheServerAndTrainExactlyAsExecdOnes) {
  ASSERT_EQ(RunStudy("warm", ""), 0) << Slurp(dir_ / "warm" / "run.out");
  ASSERT_EQ(RunStudy("cold", "DLTUNE_WARM_TRIALS=0"), 0) << Slurp(dir_ / "cold" / "run.out");
  const auto warm = Results("warm");
  const auto cold = Results("cold");
  ASSERT_EQ(warm.size(), 6U);
  for (const auto& [number, result] : warm) {
    SCOPED_TRACE("trial " + std::to_string(number));
    EXPECT_EQ(result.state, TrialState::kCompleted) << result.reason;
    EXPECT_FALSE(result.evals.empty());
    EXPECT_EQ(result.evals, cold.at(number).evals);  // bit for bit: the same numbers printed the same way
    EXPECT_THAT(TrialLog("warm", number), HasSubstr("started warm: forked by trial server"));
    EXPECT_THAT(TrialLog("cold", number), Not(HasSubstr("started warm")));
  }
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
}

TEST_F(WarmTrials, ACrashKillOrLeakTouchesNoOtherTrial) {
  ASSERT_EQ(RunStudy("cold", "DLTUNE_WARM_TRIALS=0"), 0) << Slurp(dir_ / "cold" / "run.out");
  // Trial 1 segfaults at step 5, trial 2 is SIGKILLed at step 5, trial 3 leaks 64 MiB per step from step 15 on.
  const int status = RunStudy("faults", "DLTUNE_INJECT_FAULT=segv@1:5,kill@2:5,leak@3:15");
  EXPECT_NE(status, 0) << Slurp(dir_ / "faults" / "run.out");  // some trials failed
  const auto faults = Results("faults");
  const auto cold = Results("cold");
  EXPECT_EQ(faults.at(1).state, TrialState::kFailed);
  EXPECT_THAT(faults.at(1).reason, HasSubstr("SIGSEGV"));
  EXPECT_EQ(faults.at(2).state, TrialState::kFailed);
  EXPECT_THAT(faults.at(2).reason, HasSubstr("SIGKILL"));
  for (const std::uint64_t number : {0, 3, 4, 5}) {
    SCOPED_TRACE("trial " + std::to_string(number));
    EXPECT_EQ(faults.at(number).state, TrialState::kCompleted) << faults.at(number).reason;
    EXPECT_EQ(faults.at(number).evals, cold.at(number).evals);
    EXPECT_THAT(TrialLog("faults", number), HasSubstr("started warm"));
  }
  // The leak (6 x 64 MiB) died with its process: the next trial, forked from the same server, starts without it.
  const long leaky = PeakMemory("faults", 3);
  const long next = PeakMemory("faults", 4);
  ASSERT_GT(next, 0);
  EXPECT_GE(leaky, next + 300) << "trial 3 peaked at " << leaky << " MiB, trial 4 at " << next;
  EXPECT_LT(next, PeakMemory("faults", 0) + 64);
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
}

// A Python program on the client's dltune.run (examples/external/train.py): its first trial starts cold and answers
// the offer, and the worker then starts the program once as its trials' server; every later trial is forked from
// there, and each trains exactly as the same trial started cold (DLTUNE_WARM_TRIALS=0).
TEST_F(WarmTrials, APythonProgramsTrialsStartWarmAfterItsFirstAndTrainAsColdOnes) {
  std::ofstream(dir_ / "study.yaml") << "name: warm\n"
                                        "command: /usr/bin/python3 "
                                     << DLTUNE_SOURCE_DIR
                                     << "/examples/external/train.py --hidden {hidden}\n"
                                        "max_train_steps: 40\n"
                                        "training: {eval_every_steps: 20, threads: 1, valid_sample_examples: 0}\n"
                                        "trials: 4\n"
                                        "space:\n"
                                        "  optimizer: nesterov\n"
                                        "  learning_rate: {min: 0.01, max: 0.3, scale: log}\n"
                                        "  one_minus_momentum: 0.1\n"
                                        "  hidden: 32\n"
                                        "  batch_size: 64\n";
  ASSERT_EQ(RunStudy("warm", ""), 0) << Slurp(dir_ / "warm" / "run.out");
  ASSERT_EQ(RunStudy("cold", "DLTUNE_WARM_TRIALS=0"), 0) << Slurp(dir_ / "cold" / "run.out");
  const auto warm = Results("warm");
  const auto cold = Results("cold");
  ASSERT_EQ(warm.size(), 4U);
  int started_warm = 0;
  for (const auto& [number, result] : warm) {
    SCOPED_TRACE("trial " + std::to_string(number));
    EXPECT_EQ(result.state, TrialState::kCompleted) << result.reason;
    EXPECT_EQ(result.losses, cold.at(number).losses);  // bit for bit
    EXPECT_EQ(result.evals, cold.at(number).evals);
    EXPECT_THAT(TrialLog("cold", number), Not(HasSubstr("started warm")));
    started_warm += TrialLog("warm", number).find("started warm: forked by program server") != std::string::npos;
  }
  EXPECT_THAT(TrialLog("warm", 0), Not(HasSubstr("started warm")));  // the first answers the offer, cold
  EXPECT_EQ(started_warm, 3);
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
}

// A program that served its trials warm once is known to the machine (warm-programs.json in dltune's cache): a later
// study that runs it the same way starts its server with its first trial, so that no trial of it starts cold; not
// after its file changed, and not after a server started so failed before it forked a trial.
TEST_F(WarmTrials, ALaterStudyOfAProgramThatServedWarmStartsWarmFromItsFirstTrial) {
  const fs::path project = dir_ / "project";
  fs::create_directories(project);
  // A client program of a few steps, without torch; its set-up makes the trial first when `make-trial-first` exists,
  // and then serves no warm trial.
  const auto write_program = [&](const std::string& extra) {
    std::ofstream(project / "train.py") << "import os\n"
                                           "import dltune\n"
                                           "if os.path.exists('make-trial-first'):\n"
                                           "    dltune.trial()\n"
                                           "def train(trial):\n"
                                           "    x = trial.params['x']\n"
                                           "    for step in range(1, trial.max_train_steps + 1):\n"
                                           "        trial.report(step, loss=(x - 0.3) ** 2 + 1.0 / step)\n"
                                           "    trial.record_evaluation(trial.max_train_steps, 'valid', "
                                           "error_rate=(x - 0.3) ** 2)\n"
                                        << extra << "dltune.run(train)\n";
  };
  write_program("");
  // Each study of the program in the same directory, with a store of its own; its trials' first log lines.
  const auto run_study = [&](const std::string& name) {
    std::ofstream(project / (name + ".yaml")) << "name: " << name
                                              << "\n"
                                                 "command: /usr/bin/python3 train.py\n"
                                                 "max_train_steps: 5\n"
                                                 "objective: {metric: valid/error_rate, direction: minimize}\n"
                                                 "trials: 3\n"
                                                 "space:\n"
                                                 "  x: {min: 0.0, max: 1.0}\n";
    const std::string command = "cd '" + project.string() + "' && env DLTUNE_CACHE_DIR='" + (dir_ / "cache").string() +
                                "' " + DLTUNE_CLI + " run " + name +
                                ".yaml --parallel 1 --no-report --storage sqlite://" +
                                (project / (name + ".db")).string() + " > " + name + ".out 2>&1";
    const int status = std::system(command.c_str());
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 0) << Slurp(project / (name + ".out"));
    std::vector<bool> started_warm;
    for (std::uint64_t number = 0; number < 3; ++number) {
      std::string log;
      for (const auto& entry : fs::recursive_directory_iterator(project / "runs" / name)) {
        if (entry.path().filename() == "stdout.log" &&
            entry.path().parent_path().filename() == "trial_" + std::to_string(number)) {
          log = Slurp(entry.path());
        }
      }
      started_warm.push_back(log.starts_with("started warm: forked by program server"));
    }
    return started_warm;
  };
  const std::vector<bool> cold_first{false, true, true};
  const std::vector<bool> all_warm{true, true, true};
  EXPECT_EQ(run_study("first"), cold_first);  // the first answers the offer
  EXPECT_THAT(Slurp(dir_ / "cache" / "warm-programs.json"), HasSubstr("\"serves\": true"));
  EXPECT_EQ(run_study("second"), all_warm);
  write_program("# changed\n");
  EXPECT_EQ(run_study("third"), cold_first);  // its file changed: not known until it answers again
  EXPECT_EQ(run_study("fourth"), all_warm);
  std::ofstream(project / "make-trial-first") << "";
  const std::vector<bool> all_cold{false, false, false};
  EXPECT_EQ(run_study("fifth"), all_cold);  // its server exits as it starts: every trial by exec
  EXPECT_THAT(Slurp(dir_ / "cache" / "warm-programs.json"), HasSubstr("\"serves\": false"));
  std::string server_log;
  for (const auto& entry : fs::recursive_directory_iterator(project / "runs" / "fifth")) {
    if (entry.path().filename() == "warm-server.log") server_log = Slurp(entry.path());
  }
  EXPECT_THAT(server_log, HasSubstr("serves no warm trials"));
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
}

// The first line of a trial's stdout.log in a program server's own process: "started warm: in program server PID's own
// process, its trial K"; {PID, K}, or {-1, -1} for a trial that did not start so.
std::pair<long, long> InProcessStart(const std::string& log) {
  std::smatch match;
  if (!std::regex_search(log, match,
                         std::regex("^started warm: in program server (\\d+)'s own process, its trial (\\d+)"))) {
    return {-1, -1};
  }
  return {std::stol(match[1]), std::stol(match[2])};
}

// dltune.run(train, reuse_process=True): after the first trial (cold, it answers the offer), the slot's trials run one
// after the other in one program server's own process, and train exactly as cold ones.
TEST_F(WarmTrials, AProgramThatReusesItsProcessRunsItsTrialsThereAndTheyTrainAsColdOnes) {
  std::ofstream(dir_ / "study.yaml") << "name: warm\n"
                                        "command: /usr/bin/python3 "
                                     << DLTUNE_SOURCE_DIR
                                     << "/examples/external/train.py --hidden {hidden} --reuse-process\n"
                                        "max_train_steps: 40\n"
                                        "training: {eval_every_steps: 20, threads: 1, valid_sample_examples: 0}\n"
                                        "trials: 4\n"
                                        "space:\n"
                                        "  optimizer: {values: [nesterov, adam], role: nuisance}\n"
                                        "  learning_rate: {min: 0.001, max: 0.1, scale: log}\n"
                                        "  hidden: 32\n"
                                        "  batch_size: 64\n";
  ASSERT_EQ(RunStudy("reused", ""), 0) << Slurp(dir_ / "reused" / "run.out");
  ASSERT_EQ(RunStudy("cold", "DLTUNE_WARM_TRIALS=0"), 0) << Slurp(dir_ / "cold" / "run.out");
  const auto reused = Results("reused");
  const auto cold = Results("cold");
  ASSERT_EQ(reused.size(), 4U);
  for (const auto& [number, result] : reused) {
    SCOPED_TRACE("trial " + std::to_string(number));
    EXPECT_EQ(result.state, TrialState::kCompleted) << result.reason;
    EXPECT_EQ(result.losses, cold.at(number).losses);  // bit for bit, though earlier trials ran in the process
    EXPECT_EQ(result.evals, cold.at(number).evals);
  }
  EXPECT_EQ(InProcessStart(TrialLog("reused", 0)).first, -1);  // the first answers the offer, cold
  const long server = InProcessStart(TrialLog("reused", 1)).first;
  EXPECT_GT(server, 0) << TrialLog("reused", 1);
  for (std::uint64_t number = 1; number <= 3; ++number) {
    EXPECT_EQ(InProcessStart(TrialLog("reused", number)), std::make_pair(server, static_cast<long>(number)));
  }
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
}

// A crash in a trial run in its server's process takes the server with it: that trial fails, saying so, and the slot's
// next trial runs in a new server. A stop (SIGTERM) reaches the trial through its stand-in: it stops (75), and the
// next run resumes it, in a server started with its first trial.
TEST_F(WarmTrials, ACrashInAReusedProcessFailsOnlyItsTrialAndAStopReachesIt) {
  const auto write_spec = [&](const std::string& name, const std::string& params) {
    std::ofstream(dir_ / (name + ".yaml")) << "name: " << name << "\ncommand: /usr/bin/python3 " << DLTUNE_SOURCE_DIR
                                           << "/tests/fixtures/reuse_process_trial.py\n"
                                              "max_train_steps: 30\n"
                                              "objective: {metric: valid/error_rate, direction: minimize}\n"
                                              "trials: 4\n"
                                              "space:\n"
                                              "  x: {min: 0.0, max: 1.0}\n"
                                           << params;
  };
  const auto run = [&](const std::string& name, const std::string& then) {
    const std::string command =
        "cd '" + dir_.string() + "' && (env DLTUNE_CACHE_DIR='" + (dir_ / "cache").string() + "' " + DLTUNE_CLI +
        " run " + name + ".yaml --parallel 1 --no-report --storage sqlite://" + (dir_ / (name + ".db")).string() +
        " >> " + name + ".out 2>&1 & run=$!; " + then + " wait $run; echo $? > " + name + ".status)";
    EXPECT_EQ(std::system(command.c_str()), 0);
    return std::stoi(Slurp(dir_ / (name + ".status")));
  };
  const auto log = [&](const std::string& name, std::uint64_t number, const std::string& file) {
    for (const auto& entry : fs::recursive_directory_iterator(dir_ / "runs" / name)) {
      if (entry.path().filename() == file &&
          entry.path().parent_path().filename() == "trial_" + std::to_string(number)) {
        return Slurp(entry.path());
      }
    }
    return std::string();
  };
  const auto states = [&](const std::string& name) {
    std::vector<TrialState> result;
    for (const auto& [number, trial] : test::StudyResults("sqlite://" + (dir_ / (name + ".db")).string(), name)) {
      result.push_back(trial.state);
    }
    return result;
  };

  write_spec("crash", "  crash_trials: '2'\n");
  EXPECT_NE(run("crash", ""), 0) << Slurp(dir_ / "crash.out");
  const std::vector<TrialState> crashed{TrialState::kCompleted, TrialState::kCompleted, TrialState::kFailed,
                                        TrialState::kCompleted};
  EXPECT_EQ(states("crash"), crashed) << Slurp(dir_ / "crash.out");
  EXPECT_THAT(log("crash", 2, "stderr.log"),
              HasSubstr("which ran this trial in its own process (reuse_process), died"));
  const long first_server = InProcessStart(log("crash", 1, "stdout.log")).first;
  const long second_server = InProcessStart(log("crash", 3, "stdout.log")).first;
  EXPECT_GT(first_server, 0);
  EXPECT_GT(second_server, 0);
  EXPECT_NE(first_server, second_server);

  // Trial 1 is slow (3 s): the runner is stopped once it started in the server, and resumed.
  write_spec("stop", "  slow_trials: '1'\n");
  const std::string stop_once_trial_1_runs =
      "for i in $(seq 600); do grep -qs 'started warm: in program server' runs/stop/*/trial_1/stdout.log && break; "
      "sleep 0.1; done; sleep 0.5; kill -TERM $run;";
  EXPECT_EQ(run("stop", stop_once_trial_1_runs), 75) << Slurp(dir_ / "stop.out");
  EXPECT_THAT(log("stop", 1, "stdout.log"), HasSubstr("started warm: in program server"));
  ASSERT_EQ(states("stop").size(), 4U);
  EXPECT_EQ(states("stop")[0], TrialState::kCompleted);
  EXPECT_EQ(states("stop")[1], TrialState::kStopped);
  EXPECT_EQ(run("stop", ""), 0) << Slurp(dir_ / "stop.out");
  EXPECT_EQ(states("stop"), std::vector<TrialState>(4, TrialState::kCompleted));
  EXPECT_FALSE(SomeProcessWorksIn(dir_));
}

}  // namespace
}  // namespace dltune
