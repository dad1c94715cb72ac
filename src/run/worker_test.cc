// The worker loop with trial programs written as shell scripts: what each way of ending is recorded as, retention,
// stopping, and resuming.
#include "run/worker.h"

#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "dltune/run/study_session.h"
#include "report/tfevents.h"
#include "run/run_test_util.h"

namespace dltune {
namespace {

using test::CommandSpec;
using test::TempStore;

class Recorder : public RunObserver {
 public:
  void TrialStarted(const TrialProgress& trial, bool resuming) override {
    started.push_back(trial.number);
    resumed += resuming ? 1 : 0;
  }
  void TrialFinished(const TrialEnded& ended) override { finished.push_back(ended); }
  void Notice(const std::string& message) override { notices.push_back(message); }
  std::vector<std::uint64_t> started;
  int resumed = 0;
  std::vector<TrialEnded> finished;
  std::vector<std::string> notices;
};

class WorkerTest : public ::testing::Test {
 protected:
  // A study whose trials run `script` (sh), with `trials` trials; returns the session.
  StudySession Study(const std::string& script, int trials = 1, const std::string& extra = "") {
    const auto path = temp_.dir() / "trial.sh";
    std::ofstream(path) << script;
    spec_ = CommandSpec("s", "sh " + path.string() + " {learning_rate}", temp_.dir(), trials, extra);
    return StudySession::OpenOrCreate(temp_.store(), spec_, "");
  }

  RunSummary Run(int parallel = 2, const std::atomic<int>* stops = nullptr, WorkerOptions options = {}) {
    static const std::atomic<int> no_stop{0};
    options.study = "s";
    options.parallel = parallel;
    options.stale_after = 5;
    return RunWorker(temp_.store(), options, recorder_, stops ? *stops : no_stop);
  }

  // Runs one trial at a time, and asks the worker to stop once a trial's script has started (kStarted): however
  // slow the machine, the stop meets a running trial.
  RunSummary RunStoppedOnceStarted() {
    std::atomic<int> stops{0};
    std::thread stopper([&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
      const auto started = [&] {
        std::error_code error;
        for (const auto& entry : std::filesystem::recursive_directory_iterator(temp_.dir(), error)) {
          if (entry.path().filename() == "started") return true;
        }
        return false;
      };
      while (!started() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      stops = 1;
    });
    const RunSummary summary = Run(1, &stops);
    stopper.join();
    return summary;
  }

  TrialRecord Trial(std::uint64_t number) { return *temp_.store().FindTrial(temp_.store().FindStudy("s")->id, number); }

  TempStore temp_;
  StudySpec spec_;
  Recorder recorder_;
};

// Report lines a script writes; `R` appends one line to the report channel.
const std::string kPrelude = "R() { printf '%s\\n' \"$1\" >> \"$DLTUNE_REPORT\"; }\n";
// A script's line that says it is running (RunStoppedOnceStarted waits for it).
const std::string kStarted = "touch \"$DLTUNE_TRIAL_DIR/started\"\n";
const std::string kTrains = kPrelude +
                            "for s in 1 2 3 4; do R '{\"type\":\"train\",\"step\":'$s',\"loss\":0.5}'; done\n"
                            "R '{\"type\":\"eval\",\"step\":2,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.3}}'\n"
                            "R '{\"type\":\"eval\",\"step\":4,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.2}}'\n";

TEST_F(WorkerTest, ACompletedTrialIsRecordedWithItsBestStep) {
  const StudySession session = Study(kTrains +
                                         "test \"$DLTUNE_MAX_TRAIN_STEPS\" = 4 || exit 9\n"
                                         "test -f \"$DLTUNE_PARAMS\" || exit 8\n"
                                         "echo lr=$1\n",
                                     3);
  const RunSummary summary = Run();
  EXPECT_EQ(summary.completed, 3);
  EXPECT_FALSE(summary.interrupted);
  for (std::uint64_t n = 0; n < 3; ++n) {
    const TrialRecord trial = Trial(n);
    EXPECT_EQ(trial.state, TrialState::kCompleted) << trial.reason << trial.stderr_tail;
    EXPECT_EQ(trial.best_step, 4);
    EXPECT_EQ(trial.best_value, 0.2);
    EXPECT_EQ(temp_.store().TrainSeries(trial.id).size(), 4u);
    // The placeholder was replaced by the trial's learning rate.
    const auto out = temp_.dir() / "runs" / session.study().uid / ("trial_" + std::to_string(n)) / "stdout.log";
    std::ifstream in(out);
    std::string line;
    std::getline(in, line);
    EXPECT_EQ(line, "lr=" + FormatValue(trial.params.at("learning_rate")));
    // Its scalars are in a TensorBoard event file in the trial directory.
    std::vector<std::filesystem::path> event_files;
    for (const auto& entry : std::filesystem::directory_iterator(out.parent_path())) {
      if (entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0) event_files.push_back(entry.path());
    }
    ASSERT_EQ(event_files.size(), 1u);
    int losses = 0, errors = 0;
    for (const auto& event : ReadTfEvents(event_files[0])) {
      for (const auto& scalar : event.scalars) {
        losses += scalar.tag == "train/loss" ? 1 : 0;
        if (scalar.tag == "valid/error_rate") {
          ++errors;
          EXPECT_FLOAT_EQ(scalar.value, event.step == 2 ? 0.3f : 0.2f);
        }
      }
    }
    EXPECT_EQ(losses, 4);
    EXPECT_EQ(errors, 2);
  }
}

// RunStudy hands the worker the session it opened (WorkerOptions::opened): the worker runs that session's spec and
// never reads the study's spec from the store again, here a text that no longer parses.
TEST_F(WorkerTest, AWorkerGivenTheOpenedSessionNeverReadsTheStoredSpec) {
  const StudySession session = Study(kTrains, 2);
  temp_.store().ExtendStudy(session.study().id, "name: s\ncommand: [unclosed\n", "unreadable", "");
  WorkerOptions options;
  options.opened = &session;
  const RunSummary summary = Run(2, nullptr, options);
  EXPECT_EQ(summary.completed, 2);
  for (std::uint64_t n = 0; n < 2; ++n) EXPECT_EQ(Trial(n).state, TrialState::kCompleted) << Trial(n).reason;
  // A worker that opens the study by name reads that text, and refuses it.
  EXPECT_THROW(Run(), Error);
}

TEST_F(WorkerTest, FailuresKeepTheExitStatusAndTheTailOfStderr) {
  (void)Study(kPrelude + "echo 'Traceback: something broke' >&2\nexit 3\n");
  EXPECT_EQ(Run().failed, 1);
  const TrialRecord trial = Trial(0);
  EXPECT_EQ(trial.state, TrialState::kFailed);
  EXPECT_EQ(trial.exit_status, 3);
  EXPECT_NE(trial.reason.find("exit status 3"), std::string::npos) << trial.reason;
  EXPECT_NE(trial.stderr_tail.find("Traceback: something broke"), std::string::npos) << trial.stderr_tail;
}

TEST_F(WorkerTest, ACrashKillsOnlyItsTrial) {
  (void)Study(kTrains + "if [ \"$DLTUNE_TRIAL_NUMBER\" = 1 ]; then kill -SEGV $$; fi\n", 3);
  const RunSummary summary = Run();
  EXPECT_EQ(summary.completed, 2);
  EXPECT_EQ(summary.failed, 1);
  EXPECT_NE(Trial(1).reason.find("killed by signal 11 (SIGSEGV)"), std::string::npos) << Trial(1).reason;
  EXPECT_EQ(Trial(1).exit_status, 128 + 11);
}

// A process that escaped the kill of its trial's leftovers (a session of its own, an emptied environment) and still
// holds the report channel does not hold the worker: the trial's lines are read and recorded, and the worker goes on
// within seconds, where it waited as long as that process lived.
TEST_F(WorkerTest, AnEscapedProcessHoldingTheReportChannelDoesNotHoldTheWorker) {
  (void)Study(kTrains + "env -i setsid sleep 300 > /dev/null 2>&1 &\necho $! > \"$DLTUNE_TRIAL_DIR/escaped\"\n");
  const auto began = std::chrono::steady_clock::now();
  const RunSummary summary = Run(1);
  const auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::string escaped;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(temp_.dir())) {
    if (entry.path().filename() == "escaped") std::ifstream(entry.path()) >> escaped;
  }
  ASSERT_FALSE(escaped.empty());
  ::kill(std::stoi(escaped), SIGKILL);
  EXPECT_EQ(summary.completed, 1);
  EXPECT_EQ(Trial(0).best_value, 0.2);
  EXPECT_LT(seconds, 150) << "the worker waited for the escaped process (it sleeps 300 s)";
}

TEST_F(WorkerTest, ProtocolErrorsFailTheTrialNamingTheLine) {
  (void)Study(kPrelude + "R '{\"type\":\"train\",\"step\":1}'\nR 'loss=0.5'\nsleep 30\n");
  const auto started = std::chrono::steady_clock::now();
  EXPECT_EQ(Run().failed, 1);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(20));  // killed, not waited for
  EXPECT_NE(Trial(0).reason.find("report line 2 is not JSON"), std::string::npos) << Trial(0).reason;
}

TEST_F(WorkerTest, InfeasibleAndStoppedEndings) {
  (void)Study(kPrelude +
                  "if [ \"$DLTUNE_TRIAL_NUMBER\" = 0 ]; then\n"
                  "  R '{\"type\":\"train\",\"step\":1,\"loss\":NaN}'\n"
                  "  R '{\"type\":\"end\",\"state\":\"infeasible\",\"reason\":\"loss is NaN at step 1\"}'\n"
                  "  exit 0\n"
                  "fi\n"
                  "R '{\"type\":\"train\",\"step\":1,\"loss\":1}'\nexit 75\n",
              2);
  const RunSummary summary = Run();
  EXPECT_EQ(summary.infeasible, 1);
  EXPECT_EQ(summary.stopped, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kInfeasible);
  EXPECT_EQ(Trial(0).reason, "loss is NaN at step 1");
  EXPECT_EQ(Trial(1).state, TrialState::kStopped);
  EXPECT_NE(Trial(1).reason.find("stopped itself"), std::string::npos);
}

TEST_F(WorkerTest, AMissingObjectiveFailsACompletedRun) {
  (void)Study(kPrelude + "R '{\"type\":\"train\",\"step\":1,\"loss\":1}'\n");
  EXPECT_EQ(Run().failed, 1);
  EXPECT_NE(Trial(0).reason.find("objective"), std::string::npos) << Trial(0).reason;
}

TEST_F(WorkerTest, RetentionKeepsTheLatestAndTheBestCheckpoints) {
  // Five checkpoints with objectives 0.5 0.1 0.4 0.3 0.6: keep the best (step 2) and the latest two (4, 5).
  (void)Study(kPrelude +
                  "set -e\nmkdir -p \"$DLTUNE_TRIAL_DIR/ck\"\n"
                  "i=0\nfor v in 0.5 0.1 0.4 0.3 0.6; do\n"
                  "  i=$((i+1))\n"
                  "  R '{\"type\":\"train\",\"step\":'$i',\"loss\":1}'\n"
                  "  R '{\"type\":\"eval\",\"step\":'$i',\"split\":\"valid\",\"metrics\":{\"error_rate\":'$v'}}'\n"
                  "  echo x > \"$DLTUNE_TRIAL_DIR/ck/$i\"\n"
                  "  R '{\"type\":\"checkpoint\",\"step\":'$i',\"path\":\"ck/'$i'\",\"objective\":'$v'}'\n"
                  "done\n",
              1, "training: {keep_best_checkpoints: 1, keep_latest_checkpoints: 2}\n");
  EXPECT_EQ(Run().completed, 1);
  const auto dir = temp_.dir() / "runs" / temp_.store().FindStudy("s")->uid / "trial_0" / "ck";
  std::vector<std::string> kept;
  for (int step = 1; step <= 5; ++step) {
    if (std::filesystem::exists(dir / std::to_string(step))) kept.push_back(std::to_string(step));
  }
  EXPECT_EQ(kept, (std::vector<std::string>{"2", "4", "5"}));
  int deleted = 0;
  for (const auto& checkpoint : temp_.store().ListCheckpoints(Trial(0).id)) {
    deleted += checkpoint.deleted ? 1 : 0;
    EXPECT_EQ(checkpoint.path, (dir / std::to_string(checkpoint.step)).string());
  }
  EXPECT_EQ(deleted, 2);
}

TEST_F(WorkerTest, AStopRequestStopsRunningTrialsResumably) {
  // The trial checkpoints when asked to stop (SIGTERM), like the built-in trainer.
  (void)Study(kPrelude +
                  "trap 'R \"{\\\"type\\\":\\\"train\\\",\\\"step\\\":2}\"; exit 75' TERM\n"
                  "R '{\"type\":\"train\",\"step\":1}'\n" +
                  kStarted + "while true; do sleep 0.05; done\n",
              2);
  const RunSummary summary = RunStoppedOnceStarted();
  EXPECT_TRUE(summary.interrupted);
  EXPECT_EQ(summary.stopped, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kStopped);
  EXPECT_EQ(Trial(1).state, TrialState::kPending);  // never started
  EXPECT_EQ(temp_.store().TrainSeries(Trial(0).id).size(), 2u);
}

// A trial asked to stop ends stopped however it exits: on a full disk the built-in trainer's last checkpoint fails
// and it exits 74 (EX_IOERR) without a word on its standard error.
TEST_F(WorkerTest, ATrialAskedToStopEndsStoppedWhateverItsExitStatus) {
  (void)Study(kPrelude +
                  "trap 'exit 74' TERM\n"
                  "R '{\"type\":\"train\",\"step\":1}'\n" +
                  kStarted + "while true; do sleep 0.05; done\n",
              1);
  const RunSummary summary = RunStoppedOnceStarted();
  EXPECT_EQ(summary.failed, 0);
  EXPECT_EQ(summary.stopped, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kStopped);
  EXPECT_NE(Trial(0).reason.find("stopped on request (it ended with exit status 74)"), std::string::npos)
      << Trial(0).reason;
}

TEST_F(WorkerTest, ACompoundCommandStopsWithItsProgramsStatus) {
  // The shell of `cd ... && sh trial.sh` stays; on SIGTERM the program checkpoints and exits 75, and so does the shell.
  const auto script = temp_.dir() / "stoppable.sh";
  std::ofstream(script) << kPrelude
                        << "trap 'R \"{\\\"type\\\":\\\"train\\\",\\\"step\\\":2}\"; exit 75' TERM\n"
                           "R '{\"type\":\"train\",\"step\":1}'\n"
                        << kStarted << "while true; do sleep 0.05; done\n";
  spec_ = CommandSpec("s", "cd " + temp_.dir().string() + " && sh " + script.string(), temp_.dir(), 1);
  (void)StudySession::OpenOrCreate(temp_.store(), spec_, "");
  EXPECT_EQ(RunStoppedOnceStarted().stopped, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kStopped);
  EXPECT_NE(Trial(0).reason.find("stopped on request at step 2"), std::string::npos) << Trial(0).reason;
}

TEST_F(WorkerTest, ResumedTrialsKnowItAndContinueWithoutGaps) {
  // The first attempt stops itself after step 2; the second resumes from step 2 and finishes.
  (void)Study(kPrelude +
              "if [ \"$DLTUNE_RESUMING\" = 1 ]; then\n"
              "  grep -q '\"resuming\": true' \"$DLTUNE_TRIAL\" || exit 7\n"
              "  R '{\"type\":\"start\",\"step\":2}'\n"
              "  for s in 3 4; do R '{\"type\":\"train\",\"step\":'$s',\"loss\":0.1}'; done\n"
              "  R '{\"type\":\"eval\",\"step\":4,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.2}}'\n"
              "  exit 0\n"
              "fi\n"
              "for s in 1 2 3; do R '{\"type\":\"train\",\"step\":'$s',\"loss\":1}'; done\n"
              "exit 75\n");
  EXPECT_EQ(Run().stopped, 1);
  // The next run puts stopped trials back (as `dltune run` does) and resumes them.
  EXPECT_EQ(Run().completed, 1);
  EXPECT_EQ(recorder_.resumed, 1);
  std::vector<std::int64_t> steps;
  std::vector<double> losses;
  for (const auto& m : temp_.store().TrainSeries(Trial(0).id)) {
    steps.push_back(m.step);
    losses.push_back(m.loss.value_or(-1));
  }
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(losses, (std::vector<double>{1, 1, 0.1, 0.1}));  // step 3 of the first attempt was replaced
}

TEST_F(WorkerTest, ATrialOfALostLocalWorkerIsReclaimedAtOnce) {
  StudySession session = Study(kTrains);
  // A worker of this machine whose process is gone (a pid that cannot exist) holds the trial.
  const std::string host = DefaultWorkerId().substr(0, DefaultWorkerId().rfind(':'));
  ASSERT_TRUE(session.Ask(host + ":999999999"));
  EXPECT_EQ(Run().completed, 1);
  EXPECT_EQ(Trial(0).retries, 0);  // the machine stayed up: the trial did not kill its worker
  ASSERT_FALSE(recorder_.notices.empty());
  EXPECT_NE(recorder_.notices[0].find("was lost"), std::string::npos) << recorder_.notices[0];
}

TEST_F(WorkerTest, APlaceholderMissingFromATrialFailsIt) {
  const auto script = temp_.dir() / "t.sh";
  std::ofstream(script) << kTrains;
  const StudySpec spec =
      ParseStudySpec("name: s\ncommand: sh " + script.string() +
                         " {momentum}\nmax_train_steps: 4\ntrials: 1\nrun_dir: " + (temp_.dir() / "runs").string() +
                         "\nspace:\n  optimizer: {values: [sgd, momentum]}\n"
                         "  momentum: {when: {optimizer: momentum}, min: 0.1, max: 0.9}\n",
                     "s.yaml");
  (void)StudySession::OpenOrCreate(temp_.store(), spec, "");
  Run();
  // Trial 0 has optimizer=sgd or momentum; whichever lacks momentum fails with a clear reason.
  const TrialRecord trial = Trial(0);
  if (trial.params.count("momentum")) {
    EXPECT_EQ(trial.state, TrialState::kCompleted);
  } else {
    EXPECT_EQ(trial.state, TrialState::kFailed);
    EXPECT_NE(trial.reason.find("no param 'momentum'"), std::string::npos) << trial.reason;
  }
}

// A trial writing without end on its report channel, without a newline, is failed once its line passes the limit,
// and what it writes is never held.
TEST_F(WorkerTest, AnEndlessReportLineFailsItsTrialWithoutGrowingTheWorker) {
  (void)Study(kPrelude +
              "R '{\"type\":\"train\",\"step\":1,\"loss\":1}'\n"
              "head -c 200000000 /dev/zero | tr '\\0' x >> \"$DLTUNE_REPORT\"\n");
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  EXPECT_EQ(Run().failed, 1);
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  EXPECT_NE(Trial(0).reason.find("longer than 1048576 bytes"), std::string::npos) << Trial(0).reason;
  EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 64 * 1024) << "kB: the worker held the endless line";
}

// A trial running past training.timeout is stopped and failed, with the reason; one that ignores SIGTERM is killed.
TEST_F(WorkerTest, ATrialPastItsTimeoutIsStoppedAndFailed) {
  (void)Study(kPrelude +
                  "R '{\"type\":\"train\",\"step\":1,\"loss\":1}'\n"
                  "if [ \"$DLTUNE_TRIAL_NUMBER\" = 1 ]; then trap '' TERM; fi\n"
                  "while true; do sleep 0.05; done\n",
              2, "training: {timeout: 1s}\n");
  const auto started = std::chrono::steady_clock::now();
  const RunSummary summary = Run();
  EXPECT_EQ(summary.failed, 2);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  for (std::uint64_t n : {0, 1}) {
    EXPECT_EQ(Trial(n).state, TrialState::kFailed);
    EXPECT_NE(Trial(n).reason.find("timed out: it ran longer than training.timeout (1 s)"), std::string::npos)
        << Trial(n).reason;
  }
}

// A trial that wrote its end line and then never exits (a teardown that hangs) is killed after the grace and recorded
// as its end line says: the loop does not wait for it forever.
TEST_F(WorkerTest, ATrialThatHangsAfterItsEndLineIsKilledAndRecordedByIt) {
  (void)Study(kTrains +
                  "if [ \"$DLTUNE_TRIAL_NUMBER\" = 1 ]; then\n"
                  "  R '{\"type\":\"end\",\"state\":\"infeasible\",\"reason\":\"out of memory\"}'\n"
                  "else R '{\"type\":\"end\",\"state\":\"completed\"}'; fi\n"
                  "trap '' TERM\n"
                  "while true; do sleep 0.05; done\n",
              2);
  WorkerOptions options;
  options.end_grace_seconds = 1;
  const auto started = std::chrono::steady_clock::now();
  const RunSummary summary = Run(2, nullptr, options);
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(15));
  EXPECT_EQ(summary.completed, 1);
  EXPECT_EQ(summary.infeasible, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kCompleted) << Trial(0).reason;
  EXPECT_EQ(Trial(0).best_value, 0.2);
  EXPECT_EQ(Trial(1).state, TrialState::kInfeasible);
  EXPECT_EQ(Trial(1).reason, "out of memory");
  ASSERT_FALSE(recorder_.notices.empty());
  EXPECT_NE(recorder_.notices.front().find("still running 1 s after its end line; killed"), std::string::npos)
      << recorder_.notices.front();
}

// Trials failing the same way again and again stop the loop, with the cause, before the study's budget is spent.
TEST_F(WorkerTest, TrialsFailingTheSameWayStopTheLoop) {
  (void)Study(kPrelude + "echo \"error: no such file: data_$DLTUNE_TRIAL_NUMBER.bin\" >&2\nexit 4\n", 20);
  const RunSummary summary = Run(1, nullptr, {.max_consecutive_failures = 3});
  EXPECT_EQ(summary.failed, 3);
  EXPECT_FALSE(summary.interrupted);
  EXPECT_NE(summary.halted.find("3 trials in a row ended the same way"), std::string::npos) << summary.halted;
  EXPECT_NE(summary.halted.find("exit status 4"), std::string::npos) << summary.halted;
  EXPECT_EQ(Trial(3).state, TrialState::kPending);  // the rest of the budget is left
}

// A failed trial is tried again on request, resuming; until then failed trials are not touched.
TEST_F(WorkerTest, FailedTrialsAreRetriedOnRequest) {
  const auto marker = temp_.dir() / "fixed";
  (void)Study(kPrelude + "test -f " + marker.string() + " || { echo 'dataset not mounted' >&2; exit 5; }\n" +
              kTrains.substr(kPrelude.size()));
  EXPECT_EQ(Run().failed, 1);
  EXPECT_EQ(Run().failed + Run().completed, 0);  // a failed trial stays failed
  std::ofstream(marker) << "x";
  const RunSummary retried = Run(2, nullptr, {.retry_failed = true});
  EXPECT_EQ(retried.retried, 1);
  EXPECT_EQ(retried.completed, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kCompleted);
}

// A trial that failed because the disk is full is not the trial's fault: it is stopped, to resume.
TEST_F(WorkerTest, AFullDiskStopsTrialsInsteadOfFailingThem) {
  (void)Study(kPrelude +
              "R '{\"type\":\"train\",\"step\":1,\"loss\":1}'\n"
              "echo 'OSError: [Errno 28] No space left on device' >&2\nexit 1\n");
  const RunSummary summary = Run();
  EXPECT_EQ(summary.failed, 0);
  EXPECT_EQ(summary.stopped, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kStopped);
  EXPECT_NE(Trial(0).reason.find("No space left on device"), std::string::npos) << Trial(0).reason;
}

// No process outlives its trial: not one in its process group, nor one that left it for a new session.
TEST_F(WorkerTest, NoProcessOutlivesItsTrial) {
  const auto pids = temp_.dir() / "pids";
  (void)Study(kTrains + "setsid sleep 300 & echo $! >> " + pids.string() + "\n" + "sleep 300 & echo $! >> " +
              pids.string() + "\n");
  EXPECT_EQ(Run().completed, 1);
  std::ifstream in(pids);
  int count = 0;
  for (pid_t pid = 0; in >> pid; ++count) {
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      gone = ::kill(pid, 0) != 0;
      if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_TRUE(gone) << "process " << pid << " outlived its trial";
  }
  EXPECT_EQ(count, 2);
}

// A checkpoint saved again at the same place, then deleted, leaves no record of it listed as kept.
TEST_F(WorkerTest, ACheckpointSavedTwiceAtOnePlaceIsRecordedOnce) {
  (void)Study(kPrelude +
                  "mkdir -p \"$DLTUNE_TRIAL_DIR/ck\"\n"
                  "R '{\"type\":\"start\",\"step\":0,\"manages_checkpoints\":true}'\n"
                  "R '{\"type\":\"train\",\"step\":1,\"loss\":1}'\n"
                  "R '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
                  "echo x > \"$DLTUNE_TRIAL_DIR/ck/1\"\n"
                  "R '{\"type\":\"checkpoint\",\"step\":1,\"path\":\"ck/1\",\"objective\":0.5}'\n"
                  "R '{\"type\":\"checkpoint\",\"step\":1,\"path\":\"ck/1\"}'\n"
                  "rm \"$DLTUNE_TRIAL_DIR/ck/1\"\n"
                  "R '{\"type\":\"checkpoint\",\"step\":1,\"path\":\"ck/1\",\"deleted\":true}'\n",
              1);
  EXPECT_EQ(Run().completed, 1);
  const auto checkpoints = temp_.store().ListCheckpoints(Trial(0).id);
  ASSERT_EQ(checkpoints.size(), 2u);
  for (const auto& checkpoint : checkpoints) EXPECT_TRUE(checkpoint.deleted) << checkpoint.id;
}

// Retention deletes only inside the trial directory, and a link never leads it out: a trial that makes
// checkpoints/link point elsewhere and reports checkpoints under it keeps what lies there.
TEST_F(WorkerTest, RetentionNeverFollowsALinkOutOfTheTrialDirectory) {
  const auto outside = temp_.dir() / "elsewhere";
  for (int i = 1; i <= 3; ++i) std::filesystem::create_directories(outside / ("ck" + std::to_string(i)));
  (void)Study(
      kPrelude +
          "set -e\nmkdir -p \"$DLTUNE_TRIAL_DIR/checkpoints\"\n"
          "ln -sfn " +
          outside.string() +
          " \"$DLTUNE_TRIAL_DIR/checkpoints/link\"\n"
          "for i in 1 2 3; do\n"
          "  R '{\"type\":\"train\",\"step\":'$i',\"loss\":1}'\n"
          "  R '{\"type\":\"eval\",\"step\":'$i',\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
          "  R '{\"type\":\"checkpoint\",\"step\":'$i',\"path\":\"checkpoints/link/ck'$i'\",\"objective\":0.5}'\n"
          "done\n",
      1, "training: {keep_best_checkpoints: 0, keep_latest_checkpoints: 1}\n");
  EXPECT_EQ(Run().completed, 1);
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(std::filesystem::exists(outside / ("ck" + std::to_string(i)))) << i;
  for (const auto& checkpoint : temp_.store().ListCheckpoints(Trial(0).id)) EXPECT_FALSE(checkpoint.deleted);
}

// A checkpoint that is itself a link loses the link, never what it points to.
TEST_F(WorkerTest, RetentionRemovesALinkCheckpointNotItsTarget) {
  const auto outside = temp_.dir() / "target";
  std::filesystem::create_directories(outside);
  std::ofstream(outside / "keep") << "x";
  (void)Study(kPrelude +
                  "set -e\nmkdir -p \"$DLTUNE_TRIAL_DIR/ck\"\n"
                  "ln -sfn " +
                  outside.string() +
                  " \"$DLTUNE_TRIAL_DIR/ck/1\"\n"
                  "R '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
                  "R '{\"type\":\"checkpoint\",\"step\":1,\"path\":\"ck/1\"}'\n"
                  "mkdir \"$DLTUNE_TRIAL_DIR/ck/2\"\n"
                  "R '{\"type\":\"eval\",\"step\":2,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
                  "R '{\"type\":\"checkpoint\",\"step\":2,\"path\":\"ck/2\"}'\n",
              1, "training: {keep_best_checkpoints: 0, keep_latest_checkpoints: 1}\n");
  EXPECT_EQ(Run().completed, 1);
  const auto trial_dir = temp_.dir() / "runs" / temp_.store().FindStudy("s")->uid / "trial_0";
  EXPECT_FALSE(std::filesystem::is_symlink(trial_dir / "ck" / "1"));
  EXPECT_TRUE(std::filesystem::exists(outside / "keep"));
}

// A checkpoint path that names the trial directory (checkpoints/..), an ancestor or dltune's own files is refused
// when reported: the trial fails with the reason and nothing is deleted.
TEST_F(WorkerTest, ACheckpointPathOutsideTheCheckpointAreaFailsItsTrialAndDeletesNothing) {
  const std::vector<std::string> paths = {"checkpoints/..", ".", "params.json", "..", "../trial_9/ck"};
  (void)Study(kPrelude +
                  "mkdir -p \"$DLTUNE_TRIAL_DIR/checkpoints\"\n"
                  "echo x > \"$DLTUNE_TRIAL_DIR/checkpoints/a\"\n"
                  "R '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
                  "R '{\"type\":\"checkpoint\",\"step\":1,\"path\":\"checkpoints/a\",\"objective\":0.5}'\n"
                  "set -- checkpoints/.. . params.json .. ../trial_9/ck\n"
                  "shift $DLTUNE_TRIAL_NUMBER\n"
                  "R '{\"type\":\"eval\",\"step\":2,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.6}}'\n"
                  "R '{\"type\":\"checkpoint\",\"step\":2,\"path\":\"'$1'\",\"objective\":0.6}'\n"
                  "sleep 5\n",
              static_cast<int>(paths.size()), "training: {keep_best_checkpoints: 0, keep_latest_checkpoints: 1}\n");
  const RunSummary summary = Run(static_cast<int>(paths.size()));
  EXPECT_EQ(summary.failed, static_cast<int>(paths.size()));
  for (std::uint64_t n = 0; n < paths.size(); ++n) {
    SCOPED_TRACE(paths[n]);
    const TrialRecord trial = Trial(n);
    EXPECT_EQ(trial.state, TrialState::kFailed);
    EXPECT_NE(trial.reason.find("checkpoint path '" + paths[n] + "'"), std::string::npos) << trial.reason;
    const auto dir = temp_.dir() / "runs" / temp_.store().FindStudy("s")->uid / ("trial_" + std::to_string(n));
    for (const char* file : {"params.json", "trial.json", "stderr.log", "checkpoints/a"}) {
      EXPECT_TRUE(std::filesystem::exists(dir / file)) << file;
    }
    for (const auto& checkpoint : temp_.store().ListCheckpoints(trial.id)) EXPECT_FALSE(checkpoint.deleted);
  }
}

// A number past double's range in a report line fails that trial alone; the worker goes on with the others.
TEST_F(WorkerTest, ANumberPastDoublesRangeFailsItsTrialAlone) {
  (void)Study(kPrelude +
                  "if [ \"$DLTUNE_TRIAL_NUMBER\" = 0 ]; then R '{\"type\":\"train\",\"step\":1,\"loss\":1e999}'; fi\n" +
                  kTrains.substr(kPrelude.size()),
              3);
  const RunSummary summary = Run();
  EXPECT_EQ(summary.failed, 1);
  EXPECT_EQ(summary.completed, 2);
  EXPECT_EQ(Trial(0).state, TrialState::kFailed);
  EXPECT_NE(Trial(0).reason.find("report line 1"), std::string::npos) << Trial(0).reason;
}

// Every write the worker makes for a trial follows the disk-fault rule: when the disk of its TensorBoard events
// fills, the trial is stopped (to resume), not failed. A 256 kB tmpfs holds the trial directories.
TEST_F(WorkerTest, AFullDiskUnderTheTensorBoardEventsStopsTheTrial) {
  const auto runs = temp_.dir() / "runs";
  std::filesystem::create_directories(runs);
  if (::mount("tmpfs", runs.c_str(), "tmpfs", 0, "size=256k") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << "): this test needs root";
  }
  struct Unmount {
    std::filesystem::path dir;
    ~Unmount() { ::umount2(dir.c_str(), MNT_DETACH); }
  } unmount{runs};
  (void)Study(kPrelude +
              "R '{\"type\":\"train\",\"step\":1,\"loss\":1}'\n"
              "R '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
              "dd if=/dev/zero of=\"$DLTUNE_TRIAL_DIR/fill\" bs=4096 2>/dev/null\n"
              "s=2\nwhile [ $s -le 400 ]; do\n"  // past the events file's last page, into the full disk
              "  R '{\"type\":\"train\",\"step\":'$s',\"loss\":1}'\n"
              "  R '{\"type\":\"eval\",\"step\":'$s',\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
              "  s=$((s+1))\n"
              "done\n"
              "sleep 10\n");
  const RunSummary summary = Run();
  EXPECT_EQ(summary.failed, 0);
  EXPECT_EQ(summary.stopped, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kStopped);
  EXPECT_NE(Trial(0).reason.find("cannot write TensorBoard events"), std::string::npos) << Trial(0).reason;
  EXPECT_GE(temp_.store().TrainSeries(Trial(0).id).size(), 2u);  // what it reported at the fault is kept
}

// On a machine others share, a trial's OpenMP threads sleep while they wait instead of spinning on others' cores:
// trials start with OMP_WAIT_POLICY=PASSIVE unless the worker's environment chose a policy, which they keep.
TEST_F(WorkerTest, TrialsWaitPassivelyUnlessTheEnvironmentChooses) {
  const StudySession session = Study(kTrains + "echo \"policy=$OMP_WAIT_POLICY\"\n");
  EXPECT_EQ(Run().completed, 1);
  const char* chosen = std::getenv("OMP_WAIT_POLICY");
  const std::string expected = chosen != nullptr ? chosen : std::getenv("GOMP_SPINCOUNT") != nullptr ? "" : "PASSIVE";
  std::ifstream out(temp_.dir() / "runs" / session.study().uid / "trial_0" / "stdout.log");
  std::string line;
  std::getline(out, line);
  EXPECT_EQ(line, "policy=" + expected);
}

// A checkpoint path that holds another recorded checkpoint of the trial (checkpoints, checkpoints/c2/..) or lies in
// one is refused when reported: retiring the outer one would delete the inner one the store lists as kept.
TEST_F(WorkerTest, ACheckpointHoldingOrInsideAnotherFailsItsTrialAndDeletesNothing) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"checkpoints", "checkpoints/c2"}, {"checkpoints/c2/..", "checkpoints/c2"}, {"checkpoints/c1", "checkpoints"}};
  (void)Study(kPrelude +
                  "mkdir -p \"$DLTUNE_TRIAL_DIR/checkpoints/c1\" \"$DLTUNE_TRIAL_DIR/checkpoints/c2\"\n"
                  "echo x > \"$DLTUNE_TRIAL_DIR/checkpoints/c1/f\"\n"
                  "echo x > \"$DLTUNE_TRIAL_DIR/checkpoints/c2/f\"\n"
                  "case $DLTUNE_TRIAL_NUMBER in\n"
                  "  0) a=checkpoints b=checkpoints/c2 ;;\n"
                  "  1) a=checkpoints/c2/.. b=checkpoints/c2 ;;\n"
                  "  *) a=checkpoints/c1 b=checkpoints ;;\n"
                  "esac\n"
                  "R '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}'\n"
                  "R '{\"type\":\"checkpoint\",\"step\":1,\"path\":\"'$a'\",\"objective\":0.5}'\n"
                  "R '{\"type\":\"eval\",\"step\":2,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.6}}'\n"
                  "R '{\"type\":\"checkpoint\",\"step\":2,\"path\":\"'$b'\",\"objective\":0.6}'\n"
                  "sleep 5\n",
              static_cast<int>(cases.size()), "training: {keep_best_checkpoints: 0, keep_latest_checkpoints: 1}\n");
  const RunSummary summary = Run(static_cast<int>(cases.size()));
  EXPECT_EQ(summary.failed, static_cast<int>(cases.size()));
  for (std::uint64_t n = 0; n < cases.size(); ++n) {
    SCOPED_TRACE(cases[n].first + " then " + cases[n].second);
    const TrialRecord trial = Trial(n);
    EXPECT_EQ(trial.state, TrialState::kFailed);
    EXPECT_NE(trial.reason.find("checkpoint path '" + cases[n].second + "'"), std::string::npos) << trial.reason;
    const auto dir = temp_.dir() / "runs" / temp_.store().FindStudy("s")->uid / ("trial_" + std::to_string(n));
    for (const char* file : {"checkpoints/c1/f", "checkpoints/c2/f"}) EXPECT_TRUE(std::filesystem::exists(dir / file));
    const auto checkpoints = temp_.store().ListCheckpoints(trial.id);
    ASSERT_EQ(checkpoints.size(), 1u);
    EXPECT_FALSE(checkpoints[0].deleted);
  }
}

}  // namespace
}  // namespace dltune
