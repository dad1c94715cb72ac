// dltune under hostile but ordinary use, as a user runs it (docs/reliability.md lists each promise and its test):
// inputs that would make it slow or huge, run under ulimit so that a regression fails instead of eating the
// machine; studies that cannot work; runs stopped every way; stores it may only read; terminals it must not drive;
// full disks; and a dashboard under slow clients.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "core/sha256.h"
#include "dltune/store/store.h"
#include "own_directory.h"

extern char** environ;

namespace dltune {
namespace {

namespace fs = std::filesystem;
using test::Slurp;
using ::testing::HasSubstr;
using ::testing::Not;

using Clock = std::chrono::steady_clock;

// What a bounded command did, and how long it took.
struct Outcome {
  int exit_code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
};

class Reliability : public test::InOwnDirectory {
 protected:
  Reliability() : InOwnDirectory("reliability") {}
  void SetUp() override {
    InOwnDirectory::SetUp();
    fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  }

  std::string Url() const { return "sqlite://" + (dir_ / "dltune.db").string(); }

  // Runs `dltune ARGUMENTS` in the test's directory with its address space and CPU time capped (ulimit -v, -t):
  // an input that makes dltune huge or slow ends it instead of the machine. `prefix` runs before (more ulimits).
  Outcome Run(const std::string& arguments, long memory_kb = 1500000, int cpu_seconds = 60,
              const std::string& prefix = "") const {
    const std::string command = "cd '" + dir_.string() + "' && (ulimit -v " + std::to_string(memory_kb) +
                                " && ulimit -t " + std::to_string(cpu_seconds) + " && " + prefix + " exec " +
                                DLTUNE_CLI + " " + arguments + ") > out.txt 2> err.txt";
    const auto start = Clock::now();
    const int status = std::system(command.c_str());
    Outcome outcome;
    outcome.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    outcome.out = Slurp(dir_ / "out.txt");
    outcome.err = Slurp(dir_ / "err.txt");
    return outcome;
  }

  fs::path Write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  // A study whose trials run `script` (sh), reporting their objective unless the script exits first.
  fs::path CommandStudy(const std::string& name, const std::string& script, int trials,
                        const std::string& extra = "") const {
    Write(name + ".sh", script +
                            "\nprintf '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":"
                            "0.5}}\\n' >> \"$DLTUNE_REPORT\"\n");
    return Write(name + ".yaml", "name: " + name + "\ncommand: sh " + (dir_ / (name + ".sh")).string() +
                                     " {trial_number}\nmax_train_steps: 1\ntrials: " + std::to_string(trials) + "\n" +
                                     extra + "space: {lr: {min: 0.01, max: 1, scale: log}}\n");
  }
};

// --- bounded inputs -------------------------------------------------------------------------------------------

TEST_F(Reliability, SpecsThatWouldExplodeAreRefusedQuicklyInBoundedMemory) {
  std::string laughs = "name: laughs\nworkload: synthetic\nmax_train_steps: 10\nx0: &a0 [lol, lol, lol, lol, lol]\n";
  for (int level = 1; level <= 9; ++level) {
    laughs += "x" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) laughs += (i ? ", *a" : "*a") + std::to_string(level - 1);
    laughs += "]\n";
  }
  laughs += "space: {lr: {min: 0.1, max: 1}}\n";
  std::string six_by_thirty = "name: subs\nworkload: synthetic\nmax_train_steps: 10\nspace:\n";
  std::string thousand =
      "name: wide\nworkload: synthetic\nmax_train_steps: 10\ntrials: 1000000\nspace:\n  o: {values: [";
  for (int p = 0; p < 6; ++p) {
    six_by_thirty += "  p" + std::to_string(p) + ": {role: scientific, values: [";
    for (int v = 0; v < 30; ++v) six_by_thirty += (v ? ", " : "") + std::to_string(v);
    six_by_thirty += "]}\n";
  }
  for (int v = 0; v < 1000; ++v) thousand += (v ? ", v" : "v") + std::to_string(v);
  thousand += "], role: scientific}\n  lr: {min: 0.1, max: 1}\n";
  const std::string joint =
      std::regex_replace(six_by_thirty, std::regex("name: subs\n"), "name: joint\nscientific_mode: joint\n");
  Write("big.yaml", "name: big\n# " + std::string(17 << 20, 'x') + "\n");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {Write("laughs.yaml", laughs).string(), "expand to more than 2000000 values"},
      {Write("subs.yaml", six_by_thirty).string(), "makes 729,000,000 sub-studies"},
      {Write("wide.yaml", thousand).string(), "1,000,000,000 trials, and a study runs at most 1,000,000"},
      {Write("joint.yaml", joint).string(), "can deal at most 100,000"},
      {(dir_ / "big.yaml").string(), "is larger than 16 MiB"},
      {"/dev/zero", "is not a regular file"},
      {dir_.string(), "is a directory, not a study spec"},
  };
  for (const auto& [spec, message] : cases) {
    const Outcome check = Run("space check " + spec, 1500000, 20);
    EXPECT_EQ(check.exit_code, 2) << spec << "\n" << check.err;
    EXPECT_THAT(check.err, HasSubstr(message)) << spec;
    EXPECT_LT(check.seconds, 15) << spec;
  }
}

TEST_F(Reliability, AHundredThousandValueListIsCheckedInSeconds) {
  std::string list = "name: many\nworkload: synthetic\nmax_train_steps: 10\nspace:\n  dropout: {values: [";
  for (int v = 0; v < 100000; ++v) list += (v ? ", " : "") + std::to_string(v / 100000.0);
  list += "]}\n";
  const Outcome check = Run("space check " + Write("many.yaml", list).string(), 1500000, 20);
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_THAT(check.out, HasSubstr("the spec is valid"));
  EXPECT_LT(check.seconds, 15);  // it took 70 s when each value was compared with every other
}

// A study of a million trials (the most a study has) makes them as it goes: it starts, runs and is shown as fast,
// and in as little memory, as a small one.
TEST_F(Reliability, AMillionTrialStudyRunsAndIsShownInBoundedMemory) {
  // Trials past the 30th fail the same way, which stops the run: the test's budget.
  const auto spec = CommandStudy("million", "if [ $1 -ge 30 ]; then echo 'test budget spent' >&2; exit 3; fi", 1000000);
  const Outcome run =
      Run("run " + spec.string() + " --parallel 2 --max-consecutive-failures 3 --no-report --storage " + Url(), 1500000,
          120);
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("study million: 1000000 trials"));
  const auto store = OpenStore(Url());
  const TrialCounts counts = store->CountTrials(store->FindStudy("million")->id);
  EXPECT_EQ(counts.Count(TrialState::kCompleted), 30);
  EXPECT_LT(counts.made, 1000);  // made as it went, not a million rows up front
  for (const std::string command : {"show million", "studies", "show million 12"}) {
    const Outcome shown = Run(command + " --storage " + Url(), 1500000, 20);
    EXPECT_EQ(shown.exit_code, 0) << command << shown.err;
    EXPECT_LT(shown.seconds, 15) << command;
  }
  EXPECT_THAT(Run("show million --storage " + Url()).out, HasSubstr("best completed of 1000000 trials"));
}

// --- faults that recover --------------------------------------------------------------------------------------

TEST_F(Reliability, AStudyThatCannotWorkStopsAfterRepeatedFailuresWithItsCause) {
  const auto spec = CommandStudy("broken", "echo 'ModuleNotFoundError: No module named torchvision' >&2; exit 1", 40);
  const Outcome run = Run("run " + spec.string() + " --parallel 1 --no-report --storage " + Url());
  EXPECT_EQ(run.exit_code, 3) << run.out << run.err;
  EXPECT_THAT(run.out, HasSubstr("stopped: 5 trials in a row ended the same way"));
  EXPECT_THAT(run.out, HasSubstr("--retry-failed"));
  const auto store = OpenStore(Url());
  const TrialCounts counts = store->CountTrials(store->FindStudy("broken")->id);
  EXPECT_EQ(counts.Count(TrialState::kFailed), 5);  // not 40: the budget is left for when it is fixed
  // Once fixed, --retry-failed tries the failed ones again, and the rest run.
  CommandStudy("broken", "true", 40);
  const Outcome fixed = Run("run " + spec.string() + " --retry-failed --no-report --storage " + Url());
  EXPECT_EQ(fixed.exit_code, 0) << fixed.out << fixed.err;
  EXPECT_EQ(store->CountTrials(store->FindStudy("broken")->id).Count(TrialState::kCompleted), 40);
}

TEST_F(Reliability, AnUnknownWorkloadIsRefusedBeforeAnythingRuns) {
  const auto spec = Write("nope.yaml",
                          "name: nope\nworkload: fashion_mnist_mpl\nmax_train_steps: 10\nspace: {lr: "
                          "{min: 0.1, max: 1}}\n");
  for (const std::string& command : std::vector<std::string>{"space check ", "run --storage " + Url() + " "}) {
    const Outcome outcome = Run(command + spec.string());
    EXPECT_EQ(outcome.exit_code, 2) << command;
    EXPECT_THAT(outcome.err, HasSubstr("nope.yaml:2:11: workload 'fashion_mnist_mpl' is not a workload this dltune "
                                       "knows (did you mean 'fashion_mnist_mlp'?)"));
  }
  EXPECT_FALSE(OpenStore(Url())->FindStudy("nope"));  // nothing was created
}

// The exit status says how the run ended (dltune run --help documents it).
TEST_F(Reliability, ExitStatusesTellDoneFailedAndStoppedApart) {
  EXPECT_EQ(Run("run " + CommandStudy("done", "true", 3).string() + " --no-report --storage " + Url()).exit_code, 0);
  const auto some = CommandStudy("some", "if [ $1 = 1 ]; then exit 9; fi", 3);
  EXPECT_EQ(Run("run " + some.string() + " --no-report --storage " + Url()).exit_code, 1);
  const auto all = CommandStudy("all", "exit 9", 3);
  EXPECT_EQ(Run("run " + all.string() + " --no-report --storage " + Url()).exit_code, 1);
  // A trial that stops itself (exit 75) is left stopped: resumable.
  const auto stops = CommandStudy("stops", "if [ $1 = 0 ]; then exit 75; fi", 2);
  const Outcome stopped = Run("run " + stops.string() + " --no-report --storage " + Url());
  EXPECT_EQ(stopped.exit_code, 75);
  EXPECT_THAT(stopped.out, HasSubstr("run the same command again to resume"));
}

// A closed terminal (SIGHUP) stops a run as Ctrl-C does: trials stopped, resumable, exit 75.
TEST_F(Reliability, AClosedTerminalStopsTheRunResumably) {
  const auto spec = CommandStudy("hup",
                                 "trap 'exit 75' TERM\nprintf '{\"type\":\"train\",\"step\":1,\"loss\":1}\\n' >> "
                                 "\"$DLTUNE_REPORT\"\nwhile true; do sleep 0.1; done",
                                 2);
  const std::string command = "cd '" + dir_.string() + "' && exec " + DLTUNE_CLI + " run " + spec.string() +
                              " --parallel 2 --no-report --storage " + Url() + " > run.out 2> run.err";
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
  for (int i = 0; i < 200 && Slurp(dir_ / "run.out").find("trial 1 starts") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(pid, SIGHUP);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status)) << "killed by the signal instead of stopping";
  EXPECT_EQ(WEXITSTATUS(status), 75) << Slurp(dir_ / "run.out") << Slurp(dir_ / "run.err");
  const auto store = OpenStore(Url());
  for (const auto& trial : store->ListTrials(store->FindStudy("hup")->id)) {
    EXPECT_EQ(trial.state, TrialState::kStopped) << trial.number << ": " << trial.reason;
  }
}

// Read commands never write: they work on a store its user may only read, and leave it byte for byte.
TEST_F(Reliability, AReadOnlyStoreCanBeRead) {
  ASSERT_EQ(Run("run " + CommandStudy("ro", "true", 3).string() + " --storage " + Url()).exit_code, 0);
  const fs::path db = dir_ / "dltune.db";
  for (const char* leftover : {"dltune.db-wal", "dltune.db-shm"}) ASSERT_FALSE(fs::exists(dir_ / leftover));
  fs::permissions(db, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
  const std::string before = Sha256Hex(Slurp(db));
  // As root, permissions are not enforced: read as the unprivileged user `nobody` instead, allowed to read and
  // traverse everything (the checkout may sit in a private directory) but to write only what `nobody` may.
  const std::string as_reader = ::geteuid() == 0 ? "exec setpriv --reuid=nobody --regid=nogroup --clear-groups "
                                                   "--inh-caps=-all,+dac_read_search --ambient-caps=+dac_read_search "
                                                 : "";
  fs::permissions(dir_, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                            fs::perms::others_exec);
  const std::string report = fs::temp_directory_path() / ("dltune_ro_" + std::to_string(::getpid()) + ".html");
  for (const std::string& command : std::vector<std::string>{"studies", "show ro", "show ro 1", "export ro",
                                                             "doctor ro", "report ro -o " + report}) {
    const std::string shell = "cd '" + dir_.string() + "' && " + as_reader + DLTUNE_CLI + " " + command +
                              " --storage " + Url() + " > out.txt 2> err.txt";
    const int status = std::system(shell.c_str());
    EXPECT_EQ(WEXITSTATUS(status), 0) << command << ": " << Slurp(dir_ / "err.txt");
  }
  EXPECT_EQ(Sha256Hex(Slurp(db)), before);
  EXPECT_FALSE(fs::exists(dir_ / "dltune.db-wal"));
  EXPECT_THAT(Slurp(report), HasSubstr("<html"));
  fs::remove(report);
}

// Text from trials and specs reaches the terminal escaped: it can neither drive it nor hide what is printed.
TEST_F(Reliability, ControlCharactersNeverReachTheTerminal) {
  const auto spec = CommandStudy("esc", "printf 'boom\\033[2J\\033]0;pwned\\007\\r\\n' >&2; exit 7", 1);
  const Outcome run = Run("run " + spec.string() + " --no-report --storage " + Url());
  EXPECT_EQ(run.out.find('\x1b'), std::string::npos);
  const Outcome show = Run("show esc 0 --storage " + Url());
  EXPECT_EQ(show.exit_code, 0);
  EXPECT_EQ(show.out.find('\x1b'), std::string::npos) << show.out;
  EXPECT_THAT(show.out, HasSubstr("boom\\x1b[2J\\x1b]0;pwned\\x07"));
}

TEST_F(Reliability, BadNumbersOnTheCommandLineAreRefusedReadably) {
  const auto spec = CommandStudy("nums", "true", 1);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run " + spec.string() + " --stale-after nan", "--stale-after: must be a number, not 'nan'"},
      {"run " + spec.string() + " --parallel 0", "--parallel: must be between 1 and 4096, not 0"},
      {"show nums -1", "TRIAL: must be between 0 and"},
  };
  for (const auto& [arguments, message] : cases) {
    const Outcome outcome = Run(arguments + " --storage " + Url());
    EXPECT_EQ(outcome.exit_code, 2) << arguments;
    EXPECT_THAT(outcome.err, HasSubstr(message)) << arguments;
    EXPECT_LT(outcome.err.size(), 200u) << outcome.err;  // one readable line, not a 309-digit bound
  }
}

// Files dltune writes are whole or not there: a write that fails (here, past the file-size limit, as on a full disk)
// leaves the earlier file as it was, and no empty one.
TEST_F(Reliability, AFailedReportOrExportLeavesNoEmptyFile) {
  ASSERT_EQ(Run("run " + CommandStudy("full", "true", 2).string() + " --no-report --storage " + Url()).exit_code, 0);
  std::ofstream(dir_ / "trials.csv") << "the earlier export\n";
  // 1 kB files at most; SIGXFSZ ignored, so writes fail with EFBIG instead of killing dltune.
  const std::string full_disk = "ulimit -f 1 && trap '' XFSZ &&";
  const Outcome exported = Run("export full -o trials.csv --format json --storage " + Url(), 1500000, 60, full_disk);
  EXPECT_EQ(exported.exit_code, 74) << exported.err;  // EX_IOERR: the machine's fault, not the command's
  EXPECT_THAT(exported.err, HasSubstr("trials.csv: cannot write"));
  EXPECT_EQ(Slurp(dir_ / "trials.csv"), "the earlier export\n");
  const Outcome report = Run("report full --storage " + Url(), 1500000, 60, full_disk);
  EXPECT_EQ(report.exit_code, 74) << report.err;
  EXPECT_FALSE(fs::exists(dir_ / "full-report.html"));
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

// A file past `ulimit -f` is an I/O error (74) with the file left as it was, not a kill by SIGXFSZ (exit 153).
TEST_F(Reliability, AFileSizeLimitIsAnIoErrorNotAKill) {
  ASSERT_EQ(Run("run " + CommandStudy("limited", "true", 2).string() + " --no-report --storage " + Url()).exit_code, 0);
  std::ofstream(dir_ / "trials.csv") << "the earlier export\n";
  const std::string limit = "ulimit -f 1 &&";  // 1 kB files at most, SIGXFSZ as the shell leaves it
  const Outcome exported = Run("export limited -o trials.csv --format json --storage " + Url(), 1500000, 60, limit);
  EXPECT_EQ(exported.exit_code, 74) << exported.err;
  EXPECT_EQ(Slurp(dir_ / "trials.csv"), "the earlier export\n");
  const Outcome report = Run("report limited --storage " + Url(), 1500000, 60, limit);
  EXPECT_EQ(report.exit_code, 74) << report.err;
  EXPECT_FALSE(fs::exists(dir_ / "limited-report.html"));
  const Outcome run = Run("run " + CommandStudy("fresh", "true", 2).string() + " --no-report --storage sqlite://" +
                              (dir_ / "fresh.db").string(),
                          1500000, 60, limit);
  EXPECT_EQ(run.exit_code, 74) << run.out << run.err;
  EXPECT_THAT(run.err, HasSubstr("File too large"));
}

// Every command checks that what it printed reached standard output: a full disk under `dltune export > file` is
// an I/O error (74), not a CSV cut mid-row and exit 0.
TEST_F(Reliability, AStandardOutputThatCannotBeWrittenIsAnIoError) {
  const auto spec = CommandStudy("printed", "true", 3);
  ASSERT_EQ(Run("run " + spec.string() + " --no-report --storage " + Url()).exit_code, 0);
  for (const std::string& command : std::vector<std::string>{
           "export printed --storage " + Url(), "show printed --storage " + Url(), "studies --storage " + Url(),
           "space sample " + spec.string(), "space check " + spec.string(), "--help"}) {
    const std::string line = "cd '" + dir_.string() + "' && " + DLTUNE_CLI + " " + command + " > /dev/full 2> err.txt";
    const int status = std::system(line.c_str());
    EXPECT_EQ(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 74) << command;
    EXPECT_THAT(Slurp(dir_ / "err.txt"), HasSubstr("cannot write standard output")) << command;
  }
}

// A model too large for the machine and a workload argument no one reads are the spec's mistakes (exit 2, naming
// the setting), found by space check and by run before anything is created.
TEST_F(Reliability, AModelTooLargeOrAnUnknownArgumentIsRefusedBeforeAnythingRuns) {
  const std::string space = "max_train_steps: 10\nspace: {learning_rate: {min: 0.01, max: 1, scale: log}}\n";
  const struct {
    std::string args;
    std::string message;
  } cases[] = {
      {"{hidden_sizes: [1000000000]}", "the model does not fit in this machine's memory (it asked for "},
      {"{hidden_size: [512]}", "reads no argument named 'hidden_size' (did you mean 'hidden_sizes'?)"},
      {"{bogus: 1}", "reads no argument named 'bogus'"},
      {"{data_dir: /tmp}", "reads no argument named 'data_dir'"},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.args);
    const std::string name = "wrong" + std::to_string(n++);
    const auto spec = Write(name + ".yaml", "name: " + name + "\nworkload: {name: synthetic, args: " + c.args +
                                                "}\ntraining: {eval_every_steps: 5}\n" + space);
    for (const std::string& command :
         std::vector<std::string>{"space check ", "run --no-report --storage " + Url() + " "}) {
      const Outcome outcome = Run(command + spec.string());
      EXPECT_EQ(outcome.exit_code, 2) << command << outcome.err;
      EXPECT_THAT(outcome.err, HasSubstr(c.message)) << command;
      EXPECT_THAT(outcome.err, Not(HasSubstr("internal error")));
    }
    EXPECT_FALSE(OpenStore(Url())->FindStudy(name)) << "the study was created";
  }
  const Outcome big = Run("space check " + (dir_ / "wrong0.yaml").string());
  EXPECT_THAT(big.err, HasSubstr("hidden_sizes: [1000000000]"));
}

// A run_dir that cannot hold trial directories is refused before the study is created: the corrected spec then runs.
TEST_F(Reliability, AnUnusableRunDirIsRefusedBeforeTheStudyIsCreated) {
  Write("a-file", "not a directory\n");
  for (const std::string& run_dir : {(dir_ / "a-file").string(), std::string("/proc/self")}) {
    SCOPED_TRACE(run_dir);
    const auto spec = CommandStudy("where", "true", 1, "run_dir: " + run_dir + "\n");
    const Outcome run = Run("run " + spec.string() + " --no-report --storage " + Url());
    EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
    EXPECT_THAT(run.err, HasSubstr("run_dir"));
    EXPECT_FALSE(OpenStore(Url())->FindStudy("where"));
  }
  const Outcome fixed = Run("run " + CommandStudy("where", "true", 1).string() + " --no-report --storage " + Url());
  EXPECT_EQ(fixed.exit_code, 0) << fixed.out << fixed.err;
}

// A damaged store is corrupt data (65): a person must look at it; retrying (74, 69) cannot help.
TEST_F(Reliability, ADamagedStoreIsCorruptData) {
  ASSERT_EQ(Run("run " + CommandStudy("whole", "true", 20).string() + " --no-report --storage " + Url()).exit_code, 0);
  const auto size = fs::file_size(dir_ / "dltune.db");
  fs::copy_file(dir_ / "dltune.db", dir_ / "cut.db");
  fs::resize_file(dir_ / "cut.db", size / 2);
  Write("garbage.db", std::string(8192, 'x'));
  for (const char* file : {"cut.db", "garbage.db"}) {
    SCOPED_TRACE(file);
    const std::string url = "sqlite://" + (dir_ / file).string();
    for (const std::string& command :
         std::vector<std::string>{"studies --storage " + url, "show whole --storage " + url}) {
      const Outcome outcome = Run(command);
      EXPECT_EQ(outcome.exit_code, 65) << command << outcome.err;
    }
  }
}

// Killing the runner again and again, each time before its trial gets anywhere, never uses up the trial's retries:
// the machine stayed up, so the trial was not what killed it.
TEST_F(Reliability, KillingTheRunnerAgainAndAgainNeverFailsATrial) {
  const auto spec = CommandStudy("killed", "sleep 30", 1);
  for (int kill = 0; kill < 5; ++kill) {
    const std::string command = "cd '" + dir_.string() + "' && exec " + DLTUNE_CLI + " run " + spec.string() +
                                " --no-report --storage " + Url() + " >> run.out 2>&1";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t runner = -1;
    ASSERT_EQ(posix_spawn(&runner, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(kill == 0 ? 1500 : 600));
    ::kill(runner, SIGKILL);
    ::waitpid(runner, nullptr, 0);
  }
  const auto store = OpenStore(Url());
  const TrialRecord trial = store->ListTrials(store->FindStudy("killed")->id).at(0);
  EXPECT_NE(trial.state, TrialState::kFailed) << trial.reason;
  EXPECT_EQ(trial.retries, 0) << trial.reason;
}

// The test set is evaluated once, whoever asks at the same time: while one process evaluates it, a launch or a test
// evaluation is refused at once (76), and the next sees the first's and needs --again. A checkpoint changed since it
// was recorded is never launched.
TEST_F(Reliability, TheTestSplitIsEvaluatedOnceEvenByLaunchesAtOnce) {
  const auto spec = Write("once.yaml",
                          "name: once\nworkload: {name: synthetic, args: {hidden_sizes: [16]}}\nmax_train_steps: 40\n"
                          "trials: 2\ntraining: {eval_every_steps: 20}\n"
                          "space: {learning_rate: {min: 0.01, max: 0.1, scale: log}, batch_size: 32}\n");
  ASSERT_EQ(Run("run " + spec.string() + " --no-report --storage " + Url()).exit_code, 0);
  const auto store = OpenStore(Url());
  const StudyRecord study = *store->FindStudy("once");
  {
    const auto held = store->LockTestSplit(study.id);  // another process evaluating the test split
    const Outcome launch = Run("launch once --reason first --storage " + Url());
    EXPECT_EQ(launch.exit_code, 76) << launch.out << launch.err;
    EXPECT_THAT(launch.err, HasSubstr("another dltune is evaluating the test split"));
    EXPECT_EQ(Run("evaluate once --split test --storage " + Url()).exit_code, 76);
    EXPECT_EQ(Run("evaluate once --split valid --storage " + Url()).exit_code, 0);  // other splits are free
  }
  const Outcome launched = Run("launch once --reason first --storage " + Url());
  ASSERT_EQ(launched.exit_code, 0) << launched.out << launched.err;
  EXPECT_THAT(launched.out, HasSubstr("(checksum verified)"));
  EXPECT_EQ(Run("launch once --reason second --storage " + Url()).exit_code, 2);
  // Two launches with --again started together: each ends launched or refused, and no two share a model file.
  std::vector<pid_t> launchers;
  for (int i = 0; i < 2; ++i) {
    const std::string command = "cd '" + dir_.string() + "' && exec " + DLTUNE_CLI +
                                " launch once --again --reason again --storage " + Url() + " > launch" +
                                std::to_string(i) + ".out 2>&1";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    launchers.push_back(pid);
  }
  for (const pid_t pid : launchers) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 76)) << status;
  }
  std::set<std::string> models;
  const auto launches = store->ListLaunches(study.id);
  for (const LaunchRecord& launch : launches) {
    EXPECT_TRUE(models.insert(launch.export_path).second) << launch.export_path;
    EXPECT_TRUE(fs::exists(launch.export_path)) << launch.export_path;
  }
  const auto evaluations = store->ListEvaluations(study.id);
  EXPECT_EQ(std::count_if(evaluations.begin(), evaluations.end(),
                          [](const CheckpointEvaluation& e) { return e.split == "test"; }),
            static_cast<long>(launches.size()));
  // The chosen checkpoint's state.pt replaced by another trial's: refused, not launched.
  const auto trials = store->ListTrials(study.id);
  const TrialRecord& best = trials.at(launches.front().evaluation.trial);
  const TrialRecord& other = trials.at(1 - best.number);
  const auto state_of = [&](const TrialRecord& trial) {
    fs::path latest;
    for (const auto& checkpoint : store->ListCheckpoints(trial.id)) {
      if (!checkpoint.deleted) latest = fs::path(checkpoint.path) / "state.pt";
    }
    return latest;
  };
  EXPECT_THAT(store->ListCheckpoints(best.id).back().checksum, ::testing::StartsWith("sha256:"));
  for (const auto& checkpoint : store->ListCheckpoints(best.id)) {
    if (!checkpoint.deleted)
      fs::copy_file(state_of(other), fs::path(checkpoint.path) / "state.pt", fs::copy_options::overwrite_existing);
  }
  const Outcome swapped = Run("launch once --trial " + std::to_string(best.number) +
                              " --again --reason swapped "
                              "--storage " +
                              Url());
  EXPECT_EQ(swapped.exit_code, 65) << swapped.out << swapped.err;
  EXPECT_THAT(swapped.err, HasSubstr("changed since it was recorded"));
  EXPECT_EQ(store->ListLaunches(study.id).size(), launches.size());
}

// A study's name is never lost: one whose spec was wrong is deleted (records and files) and made again; one with
// results only with --force, after saying what goes; nothing is deleted without --yes when no one can be asked.
TEST_F(Reliability, AStudyIsDeletedWithItsFilesSoItsNameCanBeUsedAgain) {
  const auto spec = CommandStudy("named", "exit 9", 2);
  ASSERT_EQ(Run("run " + spec.string() + " --no-report --storage " + Url()).exit_code, 1);  // its trials failed
  const auto store = OpenStore(Url());
  const StudyRecord failed = *store->FindStudy("named");
  const fs::path files = dir_ / "runs" / "named" / failed.uid;
  ASSERT_TRUE(fs::exists(files / "study.json"));
  const Outcome unasked = Run("delete named --storage " + Url());  // standard input is not a terminal
  EXPECT_EQ(unasked.exit_code, 2);
  EXPECT_THAT(unasked.err, HasSubstr("pass --yes"));
  EXPECT_TRUE(store->FindStudy("named"));
  const Outcome deleted = Run("delete named --yes --storage " + Url());
  ASSERT_EQ(deleted.exit_code, 0) << deleted.out << deleted.err;
  EXPECT_THAT(deleted.out, HasSubstr("2 trials (0 completed, 0 infeasible, 2 failed"));
  EXPECT_FALSE(store->FindStudy("named"));
  EXPECT_FALSE(fs::exists(files));
  // The corrected spec under the same name runs.
  const auto fixed = CommandStudy("named", "true", 2);
  ASSERT_EQ(Run("run " + fixed.string() + " --no-report --storage " + Url()).exit_code, 0);
  const Outcome kept = Run("delete named --yes --storage " + Url());
  EXPECT_EQ(kept.exit_code, 2);
  EXPECT_THAT(kept.err, HasSubstr("has results (2 completed"));
  EXPECT_TRUE(store->FindStudy("named"));
  const Outcome forced = Run("delete named --yes --force --keep-files --storage " + Url());
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_FALSE(store->FindStudy("named"));
  EXPECT_TRUE(fs::exists(dir_ / "runs" / "named"));  // --keep-files
  EXPECT_EQ(Run("delete nosuch --yes --storage " + Url()).exit_code, 2);
}

// --- the dashboard holds --------------------------------------------------------------------------------------

class Dashboard : public Reliability {
 protected:
  // Starts `dltune serve` on a free loopback port with `options`; returns the port.
  int Serve(const std::string& options) {
    (void)OpenStore(Url());  // an empty store to serve
    const std::string command = "cd '" + dir_.string() + "' && exec " + DLTUNE_CLI + " serve --port 0 --storage " +
                                Url() + " " + options + " > serve.out 2> serve.err";
    const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
    EXPECT_EQ(posix_spawn(&server_, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ), 0);
    for (int i = 0; i < 300; ++i) {
      std::smatch match;
      const std::string out = Slurp(dir_ / "serve.out");
      if (std::regex_search(out, match, std::regex(":(\\d+)/"))) return std::stoi(match[1]);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "dltune serve did not start: " << Slurp(dir_ / "serve.err");
    return 0;
  }
  void TearDown() override {
    if (server_ > 0) {
      ::kill(server_, SIGTERM);
      ::waitpid(server_, nullptr, 0);
    }
    Reliability::TearDown();
  }

  static int Connect(int port) {
    const int sock = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    timeval timeout{5, 0};  // no read in the test waits longer
    ::setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    EXPECT_EQ(::connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return sock;
  }

  // Sends `request` on a new connection and returns the whole response, and how long it took.
  static std::pair<std::string, double> Ask(int port, const std::string& request) {
    const auto start = Clock::now();
    const int sock = Connect(port);
    (void)!::send(sock, request.data(), request.size(), MSG_NOSIGNAL);
    std::string response;
    char buffer[4096];
    for (ssize_t n; (n = ::recv(sock, buffer, sizeof(buffer), 0)) > 0;) response.append(buffer, n);
    ::close(sock);
    return {response, std::chrono::duration<double>(Clock::now() - start).count()};
  }

  static std::string Get(int port, const std::string& path, const std::string& headers = "") {
    return "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" + headers +
           "Connection: close\r\n\r\n";
  }

  pid_t server_ = -1;
};

// 20 clients sending a header line every 2 s and 20 that send nothing hold no request up: fresh ones are answered
// in well under a second, and the slow ones are cut off at their deadline.
TEST_F(Dashboard, SlowClientsDoNotHoldUpFreshRequests) {
  const int port = Serve("");
  std::vector<int> slow, idle;
  for (int i = 0; i < 20; ++i) {
    slow.push_back(Connect(port));
    idle.push_back(Connect(port));
    (void)!::send(slow.back(), "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL);
  }
  std::atomic<bool> done{false};
  std::thread trickle([&] {
    for (int round = 0; round < 8 && !done; ++round) {
      for (const int sock : slow) (void)!::send(sock, "X-Slow: 1\r\n", 11, MSG_NOSIGNAL);
      for (int i = 0; i < 20 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (int i = 0; i < 5; ++i) {
    const auto [response, seconds] = Ask(port, Get(port, "/api/studies"));
    EXPECT_THAT(response, HasSubstr("HTTP/1.1 200"));
    EXPECT_LT(seconds, 1.0) << "request " << i;
  }
  // The trickling clients lose their connection at the request deadline (10 s), however often they send.
  const auto start = Clock::now();
  timeval timeout{15, 0};
  ::setsockopt(slow[0], SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char buffer[4096];
  ssize_t last = 0;
  while ((last = ::recv(slow[0], buffer, sizeof(buffer), 0)) > 0) {
  }
  EXPECT_EQ(last, 0) << "the server kept the trickling connection open";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 14);
  done = true;
  trickle.join();
  for (const int sock : slow) ::close(sock);
  for (const int sock : idle) ::close(sock);
}

// A trial's profile trace is served from where the store's records say the trial's checkpoints are, and nothing else:
// another trial's, a path in the request, or a trace that does not exist is a 404.
TEST_F(Dashboard, ServesATrialsProfileTraceAndNoOtherFile) {
  const fs::path trial_dir = dir_ / "runs" / "trial_0";
  fs::create_directories(trial_dir);
  const std::string trace = "{\"traceEvents\": [], \"otherData\": {\"dltune\": {\"profile_steps\": \"1:2\"}}}\n";
  std::ofstream(trial_dir / "profile.trace.json") << trace;
  std::ofstream(dir_ / "secret.json") << "{\"secret\": true}\n";
  {
    auto store = OpenStore(Url());
    const StudyRecord study = store->CreateStudy(
        {.name = "traced",
         .spec_text = "name: traced\nmax_train_steps: 10\ntraining: {profile_steps: '1:2'}\nspace: {lr: 0.1}\n"});
    store->AddTrials(study.id, {{.number = 0, .substudy_label = "all", .seed = 1},
                                {.number = 1, .substudy_label = "all", .seed = 2}});
    const auto claimed = store->ClaimNext(study.id, "w");
    ASSERT_TRUE(claimed.has_value());
    store->AddCheckpoint(claimed->second, {.step = 2, .path = (trial_dir / "checkpoints" / "step_00000002").string()});
  }
  const int port = Serve("");
  const std::string served = Ask(port, Get(port, "/api/studies/traced/trials/0/profile.trace.json")).first;
  EXPECT_THAT(served, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(served, HasSubstr("filename=\"trial_0.profile.trace.json\""));
  EXPECT_THAT(served, HasSubstr(trace));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies/traced/trials/0")).first, HasSubstr("\"profile_trace\":{\"bytes\""));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies/traced/trials/1/profile.trace.json")).first, HasSubstr("HTTP/1.1 404"));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies/traced/trials/9/profile.trace.json")).first, HasSubstr("HTTP/1.1 404"));
  for (const char* path : {"/api/studies/traced/trials/0/../../../secret.json",
                           "/api/studies/traced/trials/0/profile.trace.json/../../../../secret.json",
                           "/api/studies/traced/trials/0/%2e%2e/%2e%2e/secret.json"}) {
    const std::string response = Ask(port, Get(port, path)).first;
    EXPECT_THAT(response, Not(HasSubstr("secret"))) << path;
  }
}

TEST_F(Dashboard, ConnectionsPastTheLimitAreRefused) {
  const int port = Serve("--max-connections 4");
  std::vector<int> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(Connect(port));
    (void)!::send(held.back(), "GET / HTTP/1.1\r\n", 16, MSG_NOSIGNAL);  // begun, not finished: held open
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto [refused, seconds] = Ask(port, Get(port, "/api/studies"));
  EXPECT_THAT(refused, HasSubstr("HTTP/1.1 503"));
  EXPECT_THAT(refused, HasSubstr("too many open connections"));
  EXPECT_LT(seconds, 1.0);
  for (const int sock : held) ::close(sock);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies")).first, HasSubstr("HTTP/1.1 200"));
}

// Against DNS rebinding, a Host that does not name the server is refused; with a token, every request needs it.
TEST_F(Dashboard, HostAndTokenAreChecked) {
  const int port = Serve("--token s3cret");
  EXPECT_THAT(Ask(port, "GET /api/studies HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n").first,
              HasSubstr("HTTP/1.1 421"));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies")).first, HasSubstr("HTTP/1.1 401"));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies?token=wrong")).first, HasSubstr("HTTP/1.1 401"));
  const std::string page = Ask(port, Get(port, "/?token=s3cret")).first;
  EXPECT_THAT(page, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(page, HasSubstr("Set-Cookie: dltune_token=s3cret; Path=/; HttpOnly; SameSite=Strict"));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies", "Cookie: dltune_token=s3cret\r\n")).first, HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies", "Authorization: Bearer s3cret\r\n")).first,
              HasSubstr("HTTP/1.1 200"));
  EXPECT_THAT(Ask(port, "GET /api/studies HTTP/1.1\r\nHost: localhost:" + std::to_string(port) +
                            "\r\nCookie: dltune_token=s3cret\r\nConnection: close\r\n\r\n")
                  .first,
              HasSubstr("HTTP/1.1 200"));
}

// A note written from the dashboard's page is the row `dltune note` writes; a write without the token in its header,
// with a wrong one, from another origin, as a form or without the token header is refused and writes nothing.
TEST_F(Dashboard, WritesOnlyFromItsOwnPageAndAsDltuneNoteDoes) {
  const std::int64_t study = OpenStore(Url())
                                 ->CreateStudy({.name = "s",
                                                .spec_text = "name: s\nmax_train_steps: 10\nspace: "
                                                             "{lr: {min: 0.1, max: 1}}\n"})
                                 .id;
  const int port = Serve("");
  std::smatch match;
  const std::string out = Slurp(dir_ / "serve.out");
  ASSERT_TRUE(std::regex_search(out, match, std::regex("\\?token=([0-9a-f]{32})")))
      << "a token also on loopback: " << out;
  const std::string token = match[1].str();
  const std::string origin = "Origin: http://127.0.0.1:" + std::to_string(port) + "\r\n";
  const auto post = [&](const std::string& headers, const std::string& body,
                        const std::string& type = "application/json") {
    return Ask(port, "POST /api/studies/s/notes HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                         "\r\nContent-Type: " + type + "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
                         headers + "Connection: close\r\n\r\n" + body)
        .first;
  };
  const auto notes = [&] { return OpenStoreReadOnly(Url())->ListNotes(study); };
  const std::string note = R"({"text": "seen from the page"})";
  EXPECT_THAT(post(origin, note), HasSubstr("HTTP/1.1 401"));
  EXPECT_THAT(post(origin + "X-Dltune-Token: " + std::string(32, '0') + "\r\n", note), HasSubstr("HTTP/1.1 401"));
  EXPECT_THAT(post(origin + "Cookie: dltune_token=" + token + "\r\nAuthorization: Bearer " + token + "\r\n", note),
              HasSubstr("HTTP/1.1 401"));
  EXPECT_THAT(post("Origin: http://evil.example\r\nX-Dltune-Token: " + token + "\r\n", note),
              HasSubstr("HTTP/1.1 403"));
  EXPECT_THAT(post(origin + "X-Dltune-Token: " + token + "\r\n", "text=seen+from+the+page",
                   "application/x-www-form-urlencoded"),
              HasSubstr("HTTP/1.1 415"));
  EXPECT_TRUE(notes().empty()) << "a refused write wrote a note";
  EXPECT_THAT(post(origin + "X-Dltune-Token: " + token + "\r\nSec-Fetch-Site: same-origin\r\n", note),
              HasSubstr("HTTP/1.1 201"));
  ASSERT_EQ(test::RunDltune("note s 'seen from the page' --storage " + Url()).exit_code, 0);
  const std::vector<StudyNote> written = notes();
  ASSERT_EQ(written.size(), 2U);
  const StudyNote& page = written[0];
  const StudyNote& cli = written[1];
  EXPECT_EQ(page.text, "seen from the page");
  EXPECT_EQ(NoteKindName(page.kind), NoteKindName(cli.kind));
  EXPECT_EQ(page.text, cli.text);
  EXPECT_EQ(page.author, cli.author);
  EXPECT_EQ(page.adopt, cli.adopt);
  EXPECT_EQ(page.resolves, cli.resolves);
}

// Bound to every network, the dashboard makes up a token and prints the address that carries it.
TEST_F(Dashboard, ServingOtherMachinesRequiresATokenItPrints) {
  const int port = Serve("--host 0.0.0.0");
  std::smatch match;
  const std::string out = Slurp(dir_ / "serve.out");
  ASSERT_TRUE(std::regex_search(out, match, std::regex("\\?token=([0-9a-f]{32})"))) << out;
  EXPECT_THAT(Ask(port, Get(port, "/api/studies")).first, HasSubstr("HTTP/1.1 401"));
  EXPECT_THAT(Ask(port, Get(port, "/api/studies?token=" + match[1].str())).first, HasSubstr("HTTP/1.1 200"));
}

}  // namespace
}  // namespace dltune
