// `dltune run` as a user runs it, on the synthetic workload: a whole study, resuming, a changed spec, Ctrl-C, a
// killed run, and a trial that fails.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyze/time_split.h"
#include "cli_runner.h"
#include "dltune/store/store.h"
#include "own_directory.h"

extern char** environ;

namespace dltune {
namespace {

using test::Result;
using test::Slurp;
using ::testing::HasSubstr;
using ::testing::Not;

class RunCli : public test::InOwnDirectory {
 protected:
  RunCli() : InOwnDirectory("run_cli") {}

  std::string StoreUrl() const { return "sqlite://" + (dir_ / "dltune.db").string(); }

  // A synthetic study: `trials` per optimizer, `steps` steps, evaluated (and checkpointed) every `eval_every`.
  std::filesystem::path WriteSpec(int trials, int steps, int eval_every, const std::string& extra_space = "") {
    const auto path = dir_ / "study.yaml";
    std::ofstream(path) << "name: smoke\nworkload: {name: synthetic, args: {hidden_sizes: [16]}}\n"
                        << "max_train_steps: " << steps << "\ntrials: " << trials
                        << "\ntraining: {eval_every_steps: " << eval_every << "}\n"
                        << "space:\n  optimizer: {values: [sgd, adam], role: scientific}\n"
                        << "  learning_rate: {min: 0.001, max: 0.05, scale: log}\n  batch_size: 32\n"
                        << extra_space;
    return path;
  }

  // Runs dltune in the test's directory.
  Result Dltune(const std::string& arguments) { return test::RunDltune(arguments + " --storage " + StoreUrl(), dir_); }

  // Starts `dltune run SPEC` in the background, its output in files; returns its pid.
  pid_t StartRun(const std::filesystem::path& spec) {
    const std::string command = "cd " + dir_.string() + " && exec " + DLTUNE_CLI + " run " + spec.string() +
                                " --storage " + StoreUrl() + " > run.out 2> run.err";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t pid = 0;
    EXPECT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    return pid;
  }

  static int Wait(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // Waits until `count` running trials of the study have recorded at least `step` training steps.
  void WaitForRunningTrials(int count, std::int64_t step, const std::string& name = "smoke") {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (!std::filesystem::exists(dir_ / "dltune.db")) continue;
      const auto store = OpenStore(StoreUrl());
      const auto study = store->FindStudy(name);
      if (!study) continue;
      int ready = 0;
      for (const auto& trial : store->ListTrials(study->id)) {
        if (trial.state != TrialState::kRunning) continue;
        const auto series = store->TrainSeries(trial.id);
        if (!series.empty() && series.back().step >= step) ++ready;
      }
      if (ready >= count) return;
    }
    FAIL() << "trials did not reach step " << step << "; output:\n"
           << Slurp(dir_ / "run.out") << Slurp(dir_ / "run.err");
  }

  // Every trial completed, with exactly the steps 1..steps recorded once each.
  void ExpectCompleteSeries(int trials, std::int64_t steps) {
    const auto store = OpenStore(StoreUrl());
    const auto study = store->FindStudy("smoke");
    ASSERT_TRUE(study);
    const auto records = store->ListTrials(study->id);
    ASSERT_EQ(records.size(), static_cast<std::size_t>(trials));
    for (const auto& trial : records) {
      EXPECT_EQ(trial.state, TrialState::kCompleted) << "trial " << trial.number << ": " << trial.reason;
      const auto series = store->TrainSeries(trial.id);
      ASSERT_EQ(series.size(), static_cast<std::size_t>(steps)) << "trial " << trial.number;
      for (std::size_t i = 0; i < series.size(); ++i) {
        ASSERT_EQ(series[i].step, static_cast<std::int64_t>(i + 1))
            << "trial " << trial.number << ": a gap or a duplicate";
      }
      EXPECT_TRUE(trial.best_step.has_value());
    }
  }

  // The directory of trial `number` of the study `study`: <run_dir>/<study uid>/trial_<number>, run_dir being
  // runs/<study> unless given.
  std::filesystem::path TrialDir(int number, const std::string& study = "smoke",
                                 const std::string& run_dir = "") const {
    const auto store = OpenStore(StoreUrl());
    return dir_ / (run_dir.empty() ? "runs/" + study : run_dir) / store->FindStudy(study)->uid /
           ("trial_" + std::to_string(number));
  }
};

TEST_F(RunCli, RunsAStudyAndPrintsItsBestTrials) {
  const auto spec = WriteSpec(2, 60, 20);
  const Result result = Dltune("run " + spec.string() + " --parallel 2");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("study smoke: 4 trials"));
  EXPECT_THAT(result.out, HasSubstr("best of optimizer=sgd: trial"));
  EXPECT_THAT(result.out, HasSubstr("best of optimizer=adam: trial"));
  EXPECT_THAT(result.out, HasSubstr("checkpoint: " + (TrialDir(0).parent_path() / "trial_").string()));
  EXPECT_THAT(result.out, HasSubstr("reproduce:  dltune train synthetic"));
  // It ends with the study's report.
  EXPECT_THAT(result.out, HasSubstr("wrote " + (dir_ / "smoke-report.html").string()));
  EXPECT_THAT(Slurp(dir_ / "smoke-report.html"), HasSubstr("vega"));
  EXPECT_THAT(Slurp(dir_ / "smoke-report.html"), HasSubstr("data-chart=\"time_totals\""));
  ExpectCompleteSeries(4, 60);

  // Where each trial's time went: every phase measured, and the process's phases add up to its lifetime, which
  // lies within the trial's recorded start (its claim) and end.
  {
    const auto store = OpenStore(StoreUrl());
    for (const TrialRecord& trial : store->ListTrials(store->FindStudy("smoke")->id)) {
      for (const char* phase :
           {"scheduling", "startup", "data_load", "train", "data_wait", "evaluation", "checkpoint", "other", "store"}) {
        EXPECT_EQ(trial.time_split.count(phase), 1u) << "trial " << trial.number << " has no " << phase;
      }
      EXPECT_GT(trial.time_split.at("train"), 0);
      EXPECT_GT(trial.time_split.at("startup"), 0);
      EXPECT_LE(trial.time_split.at("data_wait"), trial.time_split.at("train"));
      const double process = TotalSeconds(trial.time_split) - trial.time_split.at("scheduling");
      const double recorded = *trial.ended_at - *trial.started_at;
      EXPECT_LE(process, recorded + 0.05) << "trial " << trial.number;
      EXPECT_GE(process, 0.5 * recorded) << "trial " << trial.number;
    }
  }
  const Result shown = Dltune("show smoke 0");
  EXPECT_THAT(shown.out, HasSubstr("training steps"));
  EXPECT_THAT(shown.out, HasSubstr("store writes"));
  EXPECT_THAT(Dltune("show smoke").out, HasSubstr("time of all trials"));

  // The reproduction command trains the same trial again to the same result.
  const std::smatch match = [&] {
    std::smatch m;
    std::regex_search(result.out, m,
                      std::regex("best of optimizer=adam: trial (\\d+), valid/error_rate ([0-9.e-]+) \\(single run, "
                                 "variance unknown\\), best step (\\d+)[^\\n]*\\n[^\\n]*\\n[^\\n]*\\n  "
                                 "reproduce:  dltune (.*)"));
    return m;
  }();
  ASSERT_EQ(match.size(), 5u) << result.out;
  const Result again = test::RunDltune(match[4].str(), dir_);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("at step " + match[3].str()));

  // Running it again resumes: nothing is left to do and nothing changes.
  const Result rerun = Dltune("run " + spec.string());
  ASSERT_EQ(rerun.exit_code, 0) << rerun.err;
  EXPECT_THAT(rerun.out, HasSubstr("study smoke: resuming"));
  EXPECT_THAT(rerun.out, Not(HasSubstr("starts")));
  ExpectCompleteSeries(4, 60);
}

TEST_F(RunCli, AChangedSpecIsRefusedWithTheDifference) {
  ASSERT_EQ(Dltune("run " + WriteSpec(1, 20, 10).string()).exit_code, 0);
  const Result changed = Dltune("run " + WriteSpec(2, 20, 10).string());
  EXPECT_EQ(changed.exit_code, 76);  // a conflict with what the store records, not a typo
  EXPECT_THAT(changed.err, HasSubstr("study 'smoke' already exists"));
  EXPECT_THAT(changed.err, HasSubstr("- trials: 1"));
  EXPECT_THAT(changed.err, HasSubstr("+ trials: 2"));
  EXPECT_THAT(changed.err, HasSubstr("run with --extend"));
  EXPECT_THAT(changed.err, Not(HasSubstr("--name")));  // no such flag

  // The recorded spec, byte for byte, to restore or compare.
  const std::string recorded = Slurp(WriteSpec(1, 20, 10));
  const Result shown = Dltune("show smoke --spec");
  EXPECT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_EQ(shown.out, recorded);
}

// Raising trials: with --extend appends exactly the trials a study that large would have made from the start: the
// same numbers, sub-studies, params and seeds; the finished ones stay as they were.
TEST_F(RunCli, ExtendAppendsTheTrialsALargerStudyWouldHaveMade) {
  ASSERT_EQ(Dltune("run " + WriteSpec(1, 20, 10).string() + " --no-report").exit_code, 0);
  auto store = OpenStore(StoreUrl());
  const auto before = store->ListTrials(store->FindStudy("smoke")->id);
  ASSERT_EQ(before.size(), 2u);
  const Result extended = Dltune("run " + WriteSpec(3, 20, 10).string() + " --no-report --extend");
  ASSERT_EQ(extended.exit_code, 0) << extended.out << extended.err;
  const auto after = store->ListTrials(store->FindStudy("smoke")->id);
  ASSERT_EQ(after.size(), 6u);
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].best_value, before[i].best_value);  // not trained again
    EXPECT_EQ(after[i].ended_at, before[i].ended_at);
  }
  // The same study made with trials: 3 from the start, in a store of its own.
  const std::string fresh_url = "sqlite://" + (dir_ / "fresh.db").string();
  ASSERT_EQ(
      test::RunDltune("run " + WriteSpec(3, 20, 10).string() + " --no-report --storage " + fresh_url, dir_).exit_code,
      0);
  auto fresh_store = OpenStore(fresh_url);
  const auto fresh = fresh_store->ListTrials(fresh_store->FindStudy("smoke")->id);
  ASSERT_EQ(fresh.size(), after.size());
  for (std::size_t i = 0; i < fresh.size(); ++i) {
    EXPECT_EQ(after[i].number, fresh[i].number);
    EXPECT_EQ(after[i].substudy_label, fresh[i].substudy_label);
    EXPECT_EQ(after[i].params, fresh[i].params) << "trial " << i;
    EXPECT_EQ(after[i].seed, fresh[i].seed) << "trial " << i;
    EXPECT_EQ(after[i].state, TrialState::kCompleted) << after[i].reason;
  }
  EXPECT_EQ(Dltune("show smoke --spec").out, Slurp(WriteSpec(3, 20, 10)));
}

TEST_F(RunCli, CtrlCStopsTrialsWithACheckpointAndTheNextRunResumesThem) {
  const auto spec = WriteSpec(1, 6000, 500);
  const pid_t run = StartRun(spec);
  WaitForRunningTrials(2, 1000);
  kill(run, SIGINT);
  EXPECT_EQ(Wait(run), 75) << Slurp(dir_ / "run.out") << Slurp(dir_ / "run.err");
  EXPECT_THAT(Slurp(dir_ / "run.out"), HasSubstr("run the same command again to resume"));
  {
    const auto store = OpenStore(StoreUrl());
    for (const auto& trial : store->ListTrials(store->FindStudy("smoke")->id)) {
      EXPECT_EQ(trial.state, TrialState::kStopped) << trial.reason;
    }
  }
  const Result resumed = Dltune("run " + spec.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_THAT(resumed.out, HasSubstr("2 stopped trials will resume"));
  EXPECT_THAT(resumed.out, HasSubstr("resumes"));
  ExpectCompleteSeries(2, 6000);
  for (int n = 0; n < 2; ++n) {
    EXPECT_THAT(Slurp(TrialDir(n) / "stdout.log"), HasSubstr("resuming from the checkpoint of step"));
  }
}

TEST_F(RunCli, AKilledRunLosesNothing) {
  const auto spec = WriteSpec(1, 6000, 500);
  const pid_t run = StartRun(spec);
  WaitForRunningTrials(2, 1000);
  kill(run, SIGKILL);
  Wait(run);
  // Its trial processes die with it (parent-death signal), and the next run takes their trials over at once.
  const Result resumed = Dltune("run " + spec.string());
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_THAT(resumed.out, HasSubstr("was lost; it will resume from its latest checkpoint"));
  ExpectCompleteSeries(2, 6000);
  const auto store = OpenStore(StoreUrl());
  // The trials had made progress: losing their runner does not count against them.
  for (const auto& trial : store->ListTrials(store->FindStudy("smoke")->id)) EXPECT_EQ(trial.retries, 0);
  EXPECT_THAT(Slurp(TrialDir(0) / "stdout.log"), HasSubstr("resuming from the checkpoint of step"));
}

// Two studies sharing a run_dir never share trial directories: study a, stopped mid-way while b runs to the end in
// the same run_dir, resumes from its own checkpoints and ends with exactly the losses of an uninterrupted run.
TEST_F(RunCli, StudiesSharingARunDirNeverResumeFromEachOthersCheckpoints) {
  const auto write = [&](const std::string& name, const std::string& learning_rates) {
    const auto path = dir_ / (name + ".yaml");
    std::ofstream(path) << "name: " << name << "\nworkload: {name: synthetic, args: {hidden_sizes: [16]}}\n"
                        << "max_train_steps: 6000\ntrials: 1\ntraining: {eval_every_steps: 500}\nrun_dir: shared\n"
                        << "space:\n  optimizer: {values: [sgd, adam], role: scientific}\n"
                        << "  learning_rate: " << learning_rates << "\n  batch_size: 32\n";
    return path;
  };
  // a and its uninterrupted twin have the same params and seeds; b has other learning rates.
  const auto a = write("a", "{min: 0.001, max: 0.05, scale: log}");
  const auto twin = write("twin", "{min: 0.001, max: 0.05, scale: log}");
  const auto b = write("b", "{min: 0.0001, max: 0.0005, scale: log}");
  const std::string command = "cd " + dir_.string() + " && exec " + DLTUNE_CLI + " run " + a.string() +
                              " --no-report --storage " + StoreUrl() + " > run.out 2> run.err";
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t run = 0;
  ASSERT_EQ(posix_spawn(&run, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  // One trial caught past its first checkpoints is enough: the other may finish first on a busy machine.
  WaitForRunningTrials(1, 1000, "a");
  kill(run, SIGINT);
  ASSERT_EQ(Wait(run), 75) << Slurp(dir_ / "run.err");
  std::set<std::uint64_t> stopped;  // a fast trial may have finished before the stop reached it
  {
    const auto store = OpenStore(StoreUrl());
    for (const auto& trial : store->ListTrials(store->FindStudy("a")->id)) {
      if (trial.state == TrialState::kStopped) stopped.insert(trial.number);
    }
  }
  ASSERT_FALSE(stopped.empty());
  ASSERT_EQ(Dltune("run " + b.string() + " --no-report").exit_code, 0);
  const Result resumed = Dltune("run " + a.string() + " --no-report");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  ASSERT_EQ(Dltune("run " + twin.string() + " --no-report").exit_code, 0);

  const auto store = OpenStore(StoreUrl());
  const auto trials_a = store->ListTrials(store->FindStudy("a")->id);
  const auto trials_twin = store->ListTrials(store->FindStudy("twin")->id);
  ASSERT_EQ(trials_a.size(), 2u);
  for (std::size_t n = 0; n < 2; ++n) {
    ASSERT_EQ(trials_a[n].params, trials_twin[n].params);
    const auto series_a = store->TrainSeries(trials_a[n].id);
    const auto series_twin = store->TrainSeries(trials_twin[n].id);
    ASSERT_EQ(series_a.size(), 6000u);
    ASSERT_EQ(series_twin.size(), 6000u);
    int differing = 0;
    for (std::size_t i = 0; i < series_a.size(); ++i) differing += series_a[i].loss != series_twin[i].loss ? 1 : 0;
    EXPECT_EQ(differing, 0) << "trial " << n << " did not resume from its own checkpoint";
    EXPECT_EQ(trials_a[n].best_value, trials_twin[n].best_value);
    if (stopped.count(n)) {
      EXPECT_THAT(Slurp(TrialDir(static_cast<int>(n), "a", "shared") / "stdout.log"),
                  HasSubstr("resuming from the checkpoint of step"));
    }
    // Every checkpoint a's store lists as kept is still on disk: b's retention touched none of them.
    for (const auto& checkpoint : store->ListCheckpoints(trials_a[n].id)) {
      EXPECT_EQ(std::filesystem::exists(checkpoint.path), !checkpoint.deleted) << checkpoint.path;
    }
  }
  EXPECT_NE(TrialDir(0, "a", "shared").parent_path(), TrialDir(0, "b", "shared").parent_path());
}

// A study made again under the same name (a new store, the same run_dir) starts afresh: it inherits no files.
TEST_F(RunCli, AStudyMadeAgainInheritsNoFiles) {
  const auto spec = WriteSpec(1, 40, 20);
  ASSERT_EQ(Dltune("run " + spec.string() + " --no-report").exit_code, 0);
  const auto first = TrialDir(0);
  for (const char* file : {"dltune.db", "dltune.db-wal", "dltune.db-shm"}) std::filesystem::remove(dir_ / file);
  ASSERT_EQ(Dltune("run " + spec.string() + " --no-report").exit_code, 0);
  EXPECT_NE(TrialDir(0), first);
  EXPECT_THAT(Slurp(TrialDir(0) / "stdout.log"), Not(HasSubstr("resuming")));
  EXPECT_TRUE(std::filesystem::exists(first / "checkpoints"));  // the old study's files are left as they were
}

// An objective named without its split is the validation split's, end to end: the trials train and are judged by it.
TEST_F(RunCli, AnObjectiveWithoutASplitIsTheValidationSplits) {
  const auto spec = dir_ / "loss.yaml";
  std::ofstream(spec) << "name: smoke\nworkload: {name: synthetic, args: {hidden_sizes: [16]}}\nmax_train_steps: 40\n"
                      << "trials: 1\nobjective: loss\nspace:\n  learning_rate: {min: 0.001, max: 0.05, scale: log}\n";
  const Result result = Dltune("run " + spec.string() + " --no-report");
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("valid/loss"));
  const auto store = OpenStore(StoreUrl());
  const auto trial = store->ListTrials(store->FindStudy("smoke")->id).at(0);
  EXPECT_EQ(trial.state, TrialState::kCompleted) << trial.reason << trial.stderr_tail;
  ASSERT_TRUE(trial.best_value.has_value());
  for (const auto& eval : store->EvalSeries(trial.id)) {
    if (eval.step == *trial.best_step && eval.split == "valid" && eval.metric == "loss") {
      EXPECT_EQ(eval.value, *trial.best_value);
    }
  }
}

TEST_F(RunCli, AFailingTrialIsRecordedAndTheStudyGoesOn) {
  // `dropuot` is read by no one: refused before the study is made, as space check refuses it.
  const Result refused = Dltune("run " + WriteSpec(1, 20, 10, "  dropuot: 0.1\n").string());
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("no hyperparameter named 'dropuot' (did you mean 'dropout'?)"));
  EXPECT_FALSE(OpenStore(StoreUrl())->FindStudy("smoke"));
  // A trial that crashes (SIGSEGV at step 5) is recorded failed with its status and the tail of its stderr; the other
  // trial goes on to the end.
  const Result result = test::RunDltune("run " + WriteSpec(1, 20, 10).string() + " --no-report --storage " + StoreUrl(),
                                        dir_, "DLTUNE_INJECT_FAULT=segv@0:5");
  EXPECT_EQ(result.exit_code, 1) << result.err;  // every trial ended, some failed
  EXPECT_THAT(result.out, HasSubstr("failed"));
  const auto store = OpenStore(StoreUrl());
  const auto trials = store->ListTrials(store->FindStudy("smoke")->id);
  ASSERT_EQ(trials.size(), 2u);
  EXPECT_EQ(trials[0].state, TrialState::kFailed);
  EXPECT_EQ(trials[0].exit_status, 128 + SIGSEGV);
  EXPECT_THAT(trials[0].reason, HasSubstr("killed by")) << trials[0].reason;
  EXPECT_EQ(trials[1].state, TrialState::kCompleted) << trials[1].reason;
  const Result show = Dltune("show smoke 0");
  EXPECT_THAT(show.out, HasSubstr("failed"));
}

// A study that asks for GPUs this machine lacks is refused before it is made (none of its trials could start).
TEST_F(RunCli, AStudyAskingForGpusTheMachineLacksIsRefusedBeforeItIsMade) {
  // By dltune run, and by a worker given the spec (which creates the study as dltune run does).
  const std::string spec = WriteSpec(1, 20, 10, "resources: {gpus_per_trial: 1}\n").string();
  for (const std::string& command : {"run " + spec + " --no-report", "worker --spec " + spec}) {
    SCOPED_TRACE(command);
    const Result result = test::RunDltune(command + " --storage " + StoreUrl(), dir_,
                                          "DLTUNE_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1");
    EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
    EXPECT_THAT(result.err, HasSubstr("study smoke asks for 1 GPU per trial (resources.gpus_per_trial), and this "
                                      "worker has no GPU"));
    EXPECT_THAT(result.out, Not(HasSubstr("parallel layout")));
    EXPECT_FALSE(OpenStore(StoreUrl())->FindStudy("smoke"));
  }
}

// A built-in trial that ends on an error is listed with the error it printed, not only its exit status.
TEST_F(RunCli, AFailedTrialIsListedWithTheErrorItPrinted) {
  const Result result = test::RunDltune("run " + WriteSpec(1, 20, 10).string() + " --no-report --storage " + StoreUrl(),
                                        dir_, "DLTUNE_INJECT_FAULT=bogus");
  EXPECT_EQ(result.exit_code, 1) << result.err;
  const std::string said =
      "the trial program ended with exit status 2: DLTUNE_INJECT_FAULT: 'bogus' is not KIND@TRIAL:STEP";
  EXPECT_THAT(result.out, HasSubstr(said));
  const auto store = OpenStore(StoreUrl());
  for (const TrialRecord& trial : store->ListTrials(store->FindStudy("smoke")->id)) {
    EXPECT_EQ(trial.state, TrialState::kFailed);
    EXPECT_EQ(trial.reason, said);
  }
}

TEST_F(RunCli, TheExplorationThenExploitationExamplesRunEndToEnd) {
  // examples/synthetic.yaml (halton), then examples/synthetic_exploit.yaml (gp, warm-started from the first), as
  // shipped, with fewer steps and their trial directories in the test's directory.
  const std::filesystem::path examples = std::filesystem::path(DLTUNE_SOURCE_DIR) / "examples";
  for (const char* name : {"synthetic", "synthetic_exploit"}) {
    std::string text = Slurp(examples / (std::string(name) + ".yaml"));
    text = std::regex_replace(text, std::regex("max_train_steps: 300"), "max_train_steps: 100");
    text += "run_dir: " + (dir_ / "runs" / name).string() + "\n";
    std::ofstream(dir_ / (std::string(name) + ".yaml")) << text;
    const Result result =
        Dltune("run " + (dir_ / (std::string(name) + ".yaml")).string() + " --parallel 2 --no-report");
    ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
    if (std::string(name) == "synthetic_exploit") {
      EXPECT_THAT(result.out, HasSubstr("/12 trials done"));  // counting the trials not made yet
    }
  }
  const auto store = OpenStore(StoreUrl());
  const auto explore = store->ListTrials(store->FindStudy("synthetic")->id);
  const auto exploit = store->ListTrials(store->FindStudy("synthetic_exploit")->id);
  ASSERT_EQ(explore.size(), 8u);
  ASSERT_EQ(exploit.size(), 12u);
  for (const auto& trial : exploit) {
    EXPECT_TRUE(trial.state == TrialState::kCompleted || trial.state == TrialState::kInfeasible)
        << trial.number << ": " << TrialStateName(trial.state) << " " << trial.reason;
    // Each trial is its sub-study's: the model of one optimizer never proposes the other's params.
    const bool adam = std::get<std::string>(trial.params.at("optimizer")) == "adam";
    EXPECT_EQ(trial.params.count("adam_learning_rate"), adam ? 1u : 0u);
    EXPECT_EQ(trial.params.count("one_minus_momentum"), adam ? 0u : 1u);
    for (const auto& earlier : explore) EXPECT_NE(trial.params, earlier.params);  // nothing retrained
  }
}

TEST_F(RunCli, TheExternalPyTorchExampleRunsEndToEnd) {
  // examples/external/study.yaml as shipped, with its trial directories moved to the test's directory.
  std::string spec_text = Slurp(std::filesystem::path(DLTUNE_SOURCE_DIR) / "examples/external/study.yaml");
  spec_text = std::regex_replace(spec_text, std::regex("\nrun_dir: [^\n]*"), "\nrun_dir: " + (dir_ / "runs").string());
  const auto spec = dir_ / "external.yaml";
  std::ofstream(spec) << spec_text;
  const Result result =
      test::RunDltune("run " + spec.string() + " --parallel 2 --no-report --storage " + StoreUrl(), DLTUNE_SOURCE_DIR);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_THAT(result.out, HasSubstr("reproduce:  DLTUNE_PARAMS="));
  const auto store = OpenStore(StoreUrl());
  const auto study = store->FindStudy("external_mlp");
  ASSERT_TRUE(study);
  const auto trials = store->ListTrials(study->id);
  ASSERT_EQ(trials.size(), 4u);
  int completed = 0;
  for (const auto& trial : trials) {
    // A learning rate near the top of the range may diverge: such a trial is infeasible, with its reason.
    if (trial.state == TrialState::kInfeasible) {
      EXPECT_THAT(trial.reason, HasSubstr("diverged: training loss"));  // the built-in trainer's words
      continue;
    }
    ++completed;
    EXPECT_EQ(trial.state, TrialState::kCompleted) << trial.reason << "\n" << trial.stderr_tail;
    const auto series = store->TrainSeries(trial.id);
    ASSERT_EQ(series.size(), 200u);
    EXPECT_EQ(series.front().step, 1);
    EXPECT_EQ(series.back().step, 200);
    EXPECT_TRUE(series.back().grad_norm.has_value());
    ASSERT_TRUE(trial.best_value.has_value());
    EXPECT_LT(*trial.best_value, 0.9);  // better than chance on 10 classes, even in 200 steps
    // dltune kept the latest two and the best checkpoint and deleted the others.
    int kept = 0;
    for (const auto& checkpoint : store->ListCheckpoints(trial.id)) {
      EXPECT_EQ(std::filesystem::exists(checkpoint.path), !checkpoint.deleted) << checkpoint.path;
      kept += checkpoint.deleted ? 0 : 1;
    }
    EXPECT_GE(kept, 2);
    EXPECT_LE(kept, 3);
  }
  EXPECT_GE(completed, 2);

  // Its evaluate_command evaluates the best trial's kept checkpoint as training did: the same valid error.
  const Result evaluated =
      test::RunDltune("evaluate external_mlp --split valid --storage " + StoreUrl(), DLTUNE_SOURCE_DIR);
  ASSERT_EQ(evaluated.exit_code, 0) << evaluated.out << evaluated.err;
  EXPECT_THAT(evaluated.out, HasSubstr("checksum verified"));
  const auto evaluations = store->ListEvaluations(study->id);
  ASSERT_EQ(evaluations.size(), 1u);
  const TrialRecord best = *store->BestTrials(study->id, Direction::kMinimize, 1, false).begin();
  EXPECT_EQ(evaluations[0].trial, best.number);
  EXPECT_EQ(evaluations[0].step, *best.best_step);
  EXPECT_EQ(evaluations[0].metrics.at("error_rate"), *best.best_value);
  // And a launch names the checkpoint itself as the model.
  const Result launched =
      test::RunDltune("launch external_mlp --reason 'the external best' --storage " + StoreUrl(), DLTUNE_SOURCE_DIR);
  ASSERT_EQ(launched.exit_code, 0) << launched.out << launched.err;
  const auto launches = store->ListLaunches(study->id);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].export_path, evaluations[0].checkpoint_path);
  EXPECT_EQ(launches[0].evaluation.metrics.count("error_rate"), 1u);
}

// A launch carries out the study's latest decision: the trial or configuration it adopts, not the best; a --trial
// against it is refused unless overruled, and the launch records the decision it carried out.
TEST_F(RunCli, ALaunchCarriesOutTheLatestDecision) {
  ASSERT_EQ(Dltune("run " + WriteSpec(2, 40, 20).string() + " --no-report").exit_code, 0);
  const auto store = OpenStore(StoreUrl());
  const StudyRecord study = *store->FindStudy("smoke");
  const auto trials = store->ListTrials(study.id);
  const auto best = *store->BestTrials(study.id, Direction::kMinimize, 1, false).begin();
  std::uint64_t adopted = 0;  // a completed trial that is not the best: the decision, not the ranking, must choose
  for (const auto& trial : trials) {
    if (trial.state == TrialState::kCompleted && trial.number != best.number) adopted = trial.number;
  }
  ASSERT_NE(adopted, best.number);
  const Result decided =
      Dltune("decide smoke --adopt trial:" + std::to_string(adopted) + " --because 'the simpler one'");
  ASSERT_EQ(decided.exit_code, 0) << decided.err;
  EXPECT_THAT(decided.out, HasSubstr("next: dltune launch smoke"));
  EXPECT_THAT(Dltune("next smoke").out, HasSubstr("dltune launch smoke"));  // decide and next agree
  const Result refused = Dltune("launch smoke --trial " + std::to_string(best.number) + " --reason 'the best'");
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
  EXPECT_THAT(refused.err, HasSubstr("--overrule-decision"));
  const Result launched = Dltune("launch smoke --reason 'as decided'");
  ASSERT_EQ(launched.exit_code, 0) << launched.out << launched.err;
  EXPECT_THAT(launched.out, HasSubstr("adopts trial " + std::to_string(adopted)));
  const auto launches = store->ListLaunches(study.id);
  ASSERT_EQ(launches.size(), 1u);
  EXPECT_EQ(launches[0].evaluation.trial, adopted);
  const auto notes = store->ListNotes(study.id);
  ASSERT_TRUE(launches[0].decision.has_value());
  EXPECT_EQ(*launches[0].decision, notes.back().id);
  // Overruled, with a second look at the test set asked for: recorded as following no decision.
  const Result overruled = Dltune("launch smoke --trial " + std::to_string(best.number) +
                                  " --overrule-decision --again --reason 'the best after all'");
  ASSERT_EQ(overruled.exit_code, 0) << overruled.out << overruled.err;
  EXPECT_THAT(overruled.out, HasSubstr("overruling the decision"));
  EXPECT_FALSE(store->ListLaunches(study.id).back().decision.has_value());
}

// The playbook checks the test set once, at the end, and every study planned from the same first one shares it: a
// look from one study of a lineage counts for all of them, and each look is listed, by launches and by show.
TEST_F(RunCli, TheTestSetIsLookedAtOncePerLineage) {
  ASSERT_EQ(Dltune("run " + WriteSpec(2, 40, 20).string() + " --no-report").exit_code, 0);
  const Result planned = Dltune("plan retrain --from smoke --replicas 2 -o retrain.yaml");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  ASSERT_EQ(Dltune("run retrain.yaml --no-report").exit_code, 0);
  const Result launched = Dltune("launch smoke-retrain --reason 'the retrained best'");
  ASSERT_EQ(launched.exit_code, 0) << launched.out << launched.err;
  // The grandparent's test split is the same test set: a second look, refused, naming the first.
  const Result again = Dltune("evaluate smoke --split test");
  EXPECT_EQ(again.exit_code, 2) << again.out;
  EXPECT_THAT(again.err, HasSubstr("launch 1 of study 'smoke-retrain'"));
  EXPECT_THAT(again.err, HasSubstr("--again"));
  const Result asked = Dltune("evaluate smoke --split test --again");
  ASSERT_EQ(asked.exit_code, 0) << asked.err;
  EXPECT_THAT(asked.out, HasSubstr("test evaluations of this lineage: 2 (the test set was seen before)"));
  // Both looks are listed: from either study of the lineage, and the evaluation by the study it was of.
  for (const char* study : {"smoke", "smoke-retrain"}) {
    const Result looks = Dltune(std::string("launches ") + study);
    ASSERT_EQ(looks.exit_code, 0) << looks.err;
    EXPECT_THAT(looks.out, HasSubstr("launch 1"));
    EXPECT_THAT(looks.out, HasSubstr("dltune evaluate --split test"));
  }
  EXPECT_THAT(Dltune("show smoke").out, HasSubstr("(dltune evaluate --split test)"));
}

// A measurement's trials are probes: a throughput sweep is never decided on, launched or evaluated on the test set.
TEST_F(RunCli, AMeasurementIsNeverDecidedOnOrLaunched) {
  ASSERT_EQ(Dltune("run " + WriteSpec(2, 40, 20).string() + " --no-report").exit_code, 0);
  const Result planned = Dltune("plan throughput --from smoke --batch-sizes 16:32 --steps 10 -o throughput.yaml");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  ASSERT_EQ(Dltune("run throughput.yaml --no-report").exit_code, 0);
  for (const std::string& command : {std::string("decide smoke-throughput --adopt trial:0 --because 'fastest'"),
                                     std::string("launch smoke-throughput --reason 'fastest'"),
                                     std::string("evaluate smoke-throughput --split test")}) {
    SCOPED_TRACE(command);
    const Result refused = Dltune(command);
    EXPECT_EQ(refused.exit_code, 2) << refused.out;
    EXPECT_THAT(refused.err, HasSubstr("study 'smoke-throughput' is a throughput measurement"));
  }
  const auto store = OpenStore(StoreUrl());
  const auto study = store->FindStudy("smoke-throughput");
  EXPECT_TRUE(store->ListLaunches(study->id).empty());
  EXPECT_TRUE(store->ListNotes(study->id).empty());
  EXPECT_THAT(Dltune("next smoke-throughput").out, ::testing::Not(HasSubstr("dltune decide")));
}

// A throughput sweep planned again from the same spec knows it measures again (what dltune next counts, so that it
// measures twice at most), and each sweep knows the batch size the spec had (the one a busy machine's project keeps).
TEST_F(RunCli, AThroughputSweepPlannedAgainFromASpecIsItsNextAttempt) {
  const std::string spec = WriteSpec(1, 20, 10).string();
  ASSERT_EQ(Dltune("plan throughput --from " + spec + " --batch-sizes 16:32 --steps 10 -o t1.yaml").exit_code, 0);
  EXPECT_THAT(Slurp(dir_ / "t1.yaml"), HasSubstr("attempt: 1, from_batch_size: 32"));
  ASSERT_EQ(Dltune("run t1.yaml --no-report").exit_code, 0);
  const Result again =
      Dltune("plan throughput --from " + spec + " --batch-sizes 16:32 --steps 10 --name smoke-throughput-2 -o t2.yaml");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_THAT(Slurp(dir_ / "t2.yaml"), HasSubstr("attempt: 2, from_batch_size: 32"));
}

// A study deleted (dltune delete --force) while a runner runs it is a conflict with the store's records, not an I/O
// error: the runner stops its trials and exits 76, saying the study was deleted.
TEST_F(RunCli, AStudyDeletedWhileItRunsEndsItsRunnerWithAConflict) {
  const auto spec = WriteSpec(1, 100000, 500);
  const pid_t run = StartRun(spec);
  WaitForRunningTrials(1, 500);
  const Result deleted = Dltune("delete smoke --force --yes");
  ASSERT_EQ(deleted.exit_code, 0) << deleted.out << deleted.err;
  EXPECT_EQ(Wait(run), 76) << Slurp(dir_ / "run.out") << Slurp(dir_ / "run.err");
  const std::string err = Slurp(dir_ / "run.err");
  EXPECT_THAT(err, HasSubstr("study 'smoke' was deleted (dltune delete) while this command was using it"));
  EXPECT_THAT(err, Not(HasSubstr("FOREIGN KEY")));
}

}  // namespace
}  // namespace dltune
