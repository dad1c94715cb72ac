// The fault test of the runner: a throw-away PostgreSQL server, four `dltune worker` processes on one study, two of
// them killed with SIGKILL at random moments mid-trial and restarted. Every trial must complete exactly once, and
// each resumed trial's step series must continue from its checkpoint with no gap and no duplicated step.
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <regex>
#include <thread>
#include <tuple>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "core/files.h"
#include "dltune/run/study_session.h"

extern char** environ;

namespace dltune {
namespace {

using test::Slurp;
using ::testing::HasSubstr;

constexpr int kSteps = 3000;
constexpr int kTrialsPerOptimizer = 4;

std::string PostgresUrl() {
  std::ifstream in(DLTUNE_PG_URL_FILE);
  std::string url;
  std::getline(in, url);
  return url;
}

class Fault : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = PostgresUrl();
    ASSERT_FALSE(url_.empty()) << DLTUNE_PG_URL_FILE << " is missing: the postgres_start fixture must run first";
    name_ = "fault_" + std::to_string(::getpid());
    dir_ = std::filesystem::temp_directory_path() / name_;
    dltune::RemoveTree(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    for (auto& worker : workers_) {
      if (worker.pid > 0) {
        kill(worker.pid, SIGKILL);
        waitpid(worker.pid, nullptr, 0);
      }
    }
    if (!HasFailure()) dltune::RemoveTree(dir_);
  }

  struct Worker {
    std::string id;
    pid_t pid = -1;
    int incarnation = 0;
  };

  // Starts (or restarts) worker `index` as a machine of its own: its id is not this machine's host:pid, so its
  // trials come back only through the heartbeat timeout, as they would from another machine.
  void StartWorker(std::size_t index) {
    Worker& worker = workers_[index];
    worker.id = "machine-" + std::to_string(index) + ":" + std::to_string(worker.incarnation);
    const std::string log = (dir_ / (worker.id + ".log")).string();
    const std::string command = "cd " + dir_.string() + " && exec " + DLTUNE_CLI + " worker --storage '" + url_ +
                                "' --study " + name_ + " --parallel 1 --stale-after 3 --worker-id " + worker.id +
                                " > '" + log + "' 2>&1";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    ASSERT_EQ(posix_spawn(&worker.pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    ++worker.incarnation;
  }

  // Waits until the trial worker `index` runs has recorded a step of at least `step` and a checkpoint (the trainer
  // reports one once it is written, a few steps after its step, and later under load), then kills the worker.
  // Whether that was mid-trial: under load the store lags, and the worker may have recorded the trial completed
  // between the reading and the kill. A trial taken over from a lost worker is killed only once it got further than
  // that worker had (the step its reclaim names): a worker lost before that counts against the trial, by design.
  bool KillMidTrial(std::size_t index, std::int64_t step, Store& store, std::int64_t study_id) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(180);
    while (std::chrono::steady_clock::now() < deadline) {
      for (const auto& trial : store.ListTrials(study_id)) {
        if (trial.state != TrialState::kRunning || trial.worker != workers_[index].id) continue;
        const auto series = store.TrainSeries(trial.id);
        const auto checkpoints = store.ListCheckpoints(trial.id);
        const bool checkpointed =
            std::any_of(checkpoints.begin(), checkpoints.end(), [](const CheckpointRecord& c) { return !c.deleted; });
        std::smatch reclaimed;
        const std::int64_t taken_over_at =
            std::regex_search(trial.reason, reclaimed, std::regex(" at step (\\d+); it resumes"))
                ? std::stoll(reclaimed[1])
                : -1;
        if (!series.empty() && series.back().step >= step && series.back().step > taken_over_at && checkpointed) {
          EXPECT_EQ(kill(workers_[index].pid, SIGKILL), 0);
          waitpid(workers_[index].pid, nullptr, 0);
          workers_[index].pid = -1;
          if (store.FindTrial(study_id, trial.number)->state == TrialState::kCompleted) return false;
          killed_trials_.push_back(trial.number);
          return true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "worker " << workers_[index].id << " never reached step " << step << " of a trial";
    return false;
  }

  std::string url_, name_;
  std::filesystem::path dir_;
  std::vector<Worker> workers_ = std::vector<Worker>(4);
  std::vector<std::uint64_t> killed_trials_;
};

TEST_F(Fault, KilledWorkersLoseNoTrialAndNoStep) {
  const auto store = OpenStore(url_);
  const StudySpec spec =
      ParseStudySpec("name: " + name_ + "\nworkload: {name: synthetic, args: {hidden_sizes: [16]}}\nmax_train_steps: " +
                         std::to_string(kSteps) + "\ntrials: " + std::to_string(kTrialsPerOptimizer) +
                         "\nrun_dir: " + (dir_ / "runs").string() + "\ntraining: {eval_every_steps: 250}\n" +
                         "space:\n  optimizer: {values: [sgd, adam], role: scientific}\n"
                         "  learning_rate: {min: 0.001, max: 0.05, scale: log}\n  batch_size: 32\n",
                     "fault.yaml");
  const StudySession session = StudySession::OpenOrCreate(*store, spec, "fault test");
  const std::int64_t study_id = session.study().id;

  for (std::size_t i = 0; i < workers_.size(); ++i) StartWorker(i);
  std::mt19937 random(static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<std::int64_t> moment(300, kSteps - 500);
  // Two of the four workers die mid-trial, at random steps (after at least one checkpoint), and come back.
  for (std::size_t victim : {std::size_t{1}, std::size_t{2}}) {
    // A kill that came as the trial completed was not mid-trial: the restarted worker's next trial is tried.
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (KillMidTrial(victim, moment(random), *store, study_id) || workers_[victim].pid > 0) break;
      StartWorker(victim);
    }
    if (workers_[victim].pid < 0) StartWorker(victim);
  }
  for (auto& worker : workers_) {
    int status = 0;
    waitpid(worker.pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << worker.id << " ended with status " << status << ":\n"
                                                               << Slurp(dir_ / (worker.id + ".log"));
    worker.pid = -1;
  }

  // Every trial completed, its steps recorded exactly once each, 1..kSteps.
  const auto trials = store->ListTrials(study_id);
  ASSERT_EQ(trials.size(), static_cast<std::size_t>(2 * kTrialsPerOptimizer));
  for (const auto& trial : trials) {
    EXPECT_EQ(trial.state, TrialState::kCompleted) << "trial " << trial.number << ": " << trial.reason;
    const auto series = store->TrainSeries(trial.id);
    ASSERT_EQ(series.size(), static_cast<std::size_t>(kSteps)) << "trial " << trial.number;
    for (std::size_t i = 0; i < series.size(); ++i) {
      ASSERT_EQ(series[i].step, static_cast<std::int64_t>(i + 1)) << "trial " << trial.number;
    }
  }
  // The killed workers' trials were taken over and resumed from a checkpoint, not restarted.
  ASSERT_EQ(killed_trials_.size(), 2u);
  for (std::uint64_t number : killed_trials_) {
    const auto trial = store->FindTrial(study_id, number);
    EXPECT_EQ(trial->retries, 0) << "trial " << number;  // it made progress: a lost worker does not count
    const std::string out =
        Slurp(dir_ / "runs" / store->FindStudy(name_)->uid / ("trial_" + std::to_string(number)) / "stdout.log");
    std::smatch match;
    ASSERT_TRUE(std::regex_search(out, match, std::regex("resuming from the checkpoint of step (\\d+)")))
        << "trial " << number << " did not resume:\n"
        << out;
    EXPECT_GT(std::stoll(match[1]), 0);
  }
  // Exactly one worker reported each trial completed.
  std::map<std::uint64_t, int> completions;
  for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
    if (entry.path().extension() != ".log") continue;
    const std::string log = Slurp(entry.path());
    const std::regex completed("trial (\\d+) \\([^)]*\\) completed");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), completed); it != std::sregex_iterator(); ++it) {
      ++completions[std::stoull((*it)[1])];
    }
  }
  for (const auto& trial : trials) EXPECT_EQ(completions[trial.number], 1) << "trial " << trial.number;
}

// A trial program that keeps its checkpoints and behaves as a trainer ahead of its worker does. Attempt 1 trains to
// 300 (a checkpoint every 100), then deletes its checkpoints 200 and 300 (their deletions never reach the worker:
// the runner is killed). Attempt 2 resumes from the newest checkpoint on disk at or before DLTUNE_RESUME_MAX_STEP,
// 100, trains to 250 and saves checkpoint 300 before its worker read its steps (the runner is killed again).
// Attempt 3 resumes the same way and trains to 500. Each attempt touches ready_<attempt> once it waits to be killed.
constexpr const char* kTrainerAheadOfItsWorker = R"(dir=$DLTUNE_TRIAL_DIR
n=$(( $(cat "$dir/attempts" 2>/dev/null || echo 0) + 1 )); echo $n > "$dir/attempts"
from=0
for c in $(ls "$dir" | sed -n 's/^ck_//p' | sort -n); do [ "$c" -le "$DLTUNE_RESUME_MAX_STEP" ] && from=$c; done
echo "attempt $n resumes from $from"
stop=500; [ $n -eq 1 ] && stop=300; [ $n -eq 2 ] && stop=250
report() { printf '%s\n' "$1" >> "$DLTUNE_REPORT"; }
report "{\"type\":\"start\",\"step\":$from,\"manages_checkpoints\":true}"
s=$from
while [ $s -lt $stop ]; do
  s=$((s + 1))
  report "{\"type\":\"train\",\"step\":$s,\"loss\":1}"
  if [ $((s % 100)) -eq 0 ]; then
    report "{\"type\":\"eval\",\"step\":$s,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.5}}"
    touch "$dir/ck_$s"
    report "{\"type\":\"checkpoint\",\"step\":$s,\"path\":\"ck_$s\"}"
  fi
done
[ $n -eq 1 ] && rm -f "$dir/ck_200" "$dir/ck_300"
[ $n -eq 2 ] && touch "$dir/ck_300"
[ $n -le 2 ] && touch "$dir/ready_$n" && exec sleep 600
exit 0
)";

// `dltune run` of one trial of kTrainerAheadOfItsWorker on the store at `url`, the runner killed (SIGKILL) as each
// of the first two attempts waits, once the store has what it reported; the third run completes it. Returns the
// trial's directory.
std::filesystem::path RunTrainerAheadOfItsWorker(const std::filesystem::path& dir, const std::string& url,
                                                 const std::string& name) {
  std::ofstream(dir / "ahead.sh") << kTrainerAheadOfItsWorker;
  std::ofstream(dir / "ahead.yaml") << "name: " << name << "\ncommand: sh " << (dir / "ahead.sh").string()
                                    << "\nmax_train_steps: 500\ntrials: 1\nrun_dir: " << (dir / "runs").string()
                                    << "\nspace: {lr: {min: 0.01, max: 1, scale: log}}\n";
  const std::string command = "exec " + std::string(DLTUNE_CLI) + " run " + (dir / "ahead.yaml").string() +
                              " --no-report --storage '" + url + "' >> " + (dir / "ahead.out").string() + " 2>&1";
  const auto store = OpenStore(url);
  // Whether attempt `n` waits, and the store holds its steps up to `step` and its checkpoint of `checkpoint`.
  const auto waiting = [&](int n, std::int64_t step, std::int64_t checkpoint) {
    const auto study = store->FindStudy(name);
    if (!study) return false;
    const auto trial = store->FindTrial(study->id, 0);
    const auto series = store->TrainSeries(trial->id);
    const auto checkpoints = store->ListCheckpoints(trial->id);
    return std::filesystem::exists(dir / "runs" / study->uid / "trial_0" / ("ready_" + std::to_string(n))) &&
           !series.empty() && series.back().step == step &&
           std::any_of(checkpoints.begin(), checkpoints.end(),
                       [&](const CheckpointRecord& c) { return c.step == checkpoint && !c.deleted; });
  };
  for (const auto& [attempt, step, checkpoint] : {std::tuple{1, 300, 300}, std::tuple{2, 250, 200}}) {
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t run = 0;
    EXPECT_EQ(posix_spawn(&run, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    for (int i = 0; i < 600 && !waiting(attempt, step, checkpoint); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(waiting(attempt, step, checkpoint)) << "attempt " << attempt << " never waited:\n"
                                                    << Slurp(dir / "ahead.out");
    kill(run, SIGKILL);
    waitpid(run, nullptr, 0);
  }
  EXPECT_EQ(std::system(command.c_str()), 0) << Slurp(dir / "ahead.out");
  return dir / "runs" / store->FindStudy(name)->uid / "trial_0";
}

// A checkpoint is never recorded ahead of the steps before it, on either backend: an attempt that resumed from an
// older checkpoint than the newest recorded one (whose files were gone) forgets the newer records with the steps it
// trains again; its runner killed before it recorded them again, the next attempt resumes from a checkpoint whose
// steps are all recorded, not from the newer one the trainer saved meanwhile. The series ends whole, each step once.
TEST_F(Fault, AnAttemptKilledAfterResumingFurtherBackLeavesNoGap) {
  const std::string sqlite = "sqlite://" + (dir_ / "ahead.db").string();
  for (const std::string& url : {url_, sqlite}) {
    const std::string name = name_ + (url == sqlite ? "_sqlite" : "_postgres");
    const auto case_dir = dir_ / name;
    std::filesystem::create_directories(case_dir);
    const std::filesystem::path trial_dir = RunTrainerAheadOfItsWorker(case_dir, url, name);
    const std::string out = Slurp(trial_dir / "stdout.log");
    EXPECT_THAT(out, HasSubstr("attempt 2 resumes from 100"));
    EXPECT_THAT(out, HasSubstr("attempt 3 resumes from 200")) << url;
    const auto store = OpenStore(url);
    const auto trial = store->FindTrial(store->FindStudy(name)->id, 0);
    EXPECT_EQ(trial->state, TrialState::kCompleted) << url << ": " << trial->reason;
    EXPECT_EQ(trial->retries, 0) << url;
    const auto series = store->TrainSeries(trial->id);
    ASSERT_EQ(series.size(), 500u) << url << ": steps lost\n" << out;
    for (std::size_t i = 0; i < series.size(); ++i) ASSERT_EQ(series[i].step, static_cast<std::int64_t>(i + 1)) << url;
  }
}

// A database restart in the middle of a study is not the trials' fault: `dltune run` rides it out — its trials keep
// running, what they report is kept and written once the store is back — and every trial completes with every step.
TEST(StoreOutage, ARunRidesOutADatabaseRestart) {
  const auto dir = std::filesystem::temp_directory_path() / ("dltune_outage_" + std::to_string(::getpid()));
  dltune::RemoveTree(dir);
  std::filesystem::create_directories(dir);
  const std::string server = std::string(DLTUNE_SOURCE_DIR) + "/scripts/pg-test-server";
  const auto pg = dir / "pg";
  ASSERT_EQ(std::system((server + " start " + pg.string() + " > /dev/null").c_str()), 0);
  const std::string url = Slurp(pg / "url").substr(0, Slurp(pg / "url").find('\n'));
  std::ofstream(dir / "trial.sh")
      << "for s in $(seq 1 20); do\n"
         "  printf '{\"type\":\"train\",\"step\":%d,\"loss\":1}\\n' $s >> \"$DLTUNE_REPORT\"\n"
         "  sleep 0.2\n"
         "done\n"
         "printf '{\"type\":\"eval\",\"step\":20,\"split\":\"valid\",\"metrics\":"
         "{\"error_rate\":0.5}}\\n' >> \"$DLTUNE_REPORT\"\n";
  std::ofstream(dir / "outage.yaml") << "name: outage\ncommand: sh " << (dir / "trial.sh").string()
                                     << "\nmax_train_steps: 20\ntrials: 4\nrun_dir: " << (dir / "runs").string()
                                     << "\nspace: {lr: {min: 0.01, max: 1, scale: log}}\n";
  const std::string command = "exec " + std::string(DLTUNE_CLI) + " run " + (dir / "outage.yaml").string() +
                              " --parallel 2 --no-report --storage " + url + " > " + (dir / "run.out").string() +
                              " 2>&1";
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t run = 0;
  ASSERT_EQ(posix_spawn(&run, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  for (int i = 0; i < 300 && Slurp(dir / "run.out").find("trial 1 starts") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_EQ(std::system((server + " pause " + pg.string()).c_str()), 0);
  std::this_thread::sleep_for(std::chrono::seconds(5));  // longer than a trial's remaining steps
  ASSERT_EQ(std::system((server + " resume " + pg.string()).c_str()), 0);
  int status = 0;
  waitpid(run, &status, 0);
  const std::string out = Slurp(dir / "run.out");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_THAT(out, HasSubstr("the store is unavailable"));
  EXPECT_THAT(out, HasSubstr("the store is back"));
  {
    const auto store = OpenStore(url);
    const auto trials = store->ListTrials(store->FindStudy("outage")->id);
    ASSERT_EQ(trials.size(), 4u);
    for (const auto& trial : trials) {
      EXPECT_EQ(trial.state, TrialState::kCompleted) << trial.number << ": " << trial.reason;
      EXPECT_EQ(trial.retries, 0);
      EXPECT_EQ(store->TrainSeries(trial.id).size(), 20u) << "trial " << trial.number << " lost steps";
    }
  }
  EXPECT_EQ(std::system((server + " stop " + pg.string()).c_str()), 0);
  if (!HasFailure()) dltune::RemoveTree(dir);
}

}  // namespace
}  // namespace dltune
