// `dltune show STUDY [TRIAL] --reproduce`, end to end: a study run from a git checkout with uncommitted changes is
// rebuilt from a clean clone at its commit and its stored patch, by running the commands the command prints, and the
// rerun's recorded series equal the original's bit for bit.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/files.h"
#include "core/strings.h"
#include "dltune/store/store.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

// A deterministic trial program: its series depend on its params, its seed and SCALE alone.
constexpr char kProgram[] = R"(import random
import dltune

SCALE = 1.0

trial = dltune.trial()
rng = random.Random(trial.seed)
weight = 1.0
for step in range(1, trial.max_train_steps + 1):
    weight -= trial.params["lr"] * (SCALE * weight + 0.1 * rng.gauss(0.0, 1.0))
    trial.report(step, loss=weight * weight, learning_rate=trial.params["lr"])
    if trial.evaluates_at(step):
        trial.record_evaluation(step, "valid", error_rate=abs(weight) / (1.0 + abs(weight)), loss=weight * weight)
)";

constexpr char kSpec[] = R"(name: repro
command: python3 trial.py
max_train_steps: 12
trials: 3
training: {eval_every_steps: 4}
space:
  lr: {min: 0.01, max: 0.3, scale: log}
)";

// A trial's series as comparable text: every training loss and learning rate, every evaluation, in order, with
// all the digits a double has.
std::string Series(Store& store, const std::string& study_name, std::uint64_t number) {
  const auto study = store.FindStudy(study_name);
  if (!study) return "no study " + study_name;
  const auto trial = store.FindTrial(study->id, number);
  if (!trial) return fmt::format("no trial {} of {}", number, study_name);
  std::string text = fmt::format("state {}\n", TrialStateName(trial->state));
  for (const TrainMeasurement& m : store.TrainSeries(trial->id)) {
    text += fmt::format("train {} {:.17g} {:.17g}\n", m.step, m.loss.value_or(-1), m.learning_rate.value_or(-1));
  }
  for (const EvalMeasurement& e : store.EvalSeries(trial->id)) {
    text += fmt::format("eval {} {} {} {:.17g}\n", e.step, e.split, e.metric, e.value);
  }
  return text;
}

class Reproduce : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("dltune_reproduce_" + std::to_string(::getpid()));
    RemoveTree(root_);
    std::filesystem::create_directories(root_ / "origin");
    std::filesystem::create_directories(root_ / "bin");
    std::filesystem::create_symlink(DLTUNE_CLI, root_ / "bin" / "dltune");
    url_ = "sqlite://" + (root_ / "studies.db").string();
    environment_ = "PYTHONPATH=" + ShellQuote(std::string(DLTUNE_SOURCE_DIR) + "/python") +
                   " PATH=" + ShellQuote((root_ / "bin").string() + ":" + std::getenv("PATH"));
    // The repository the study's code lives in, pushed to a remote the record names.
    Shell("git init -q --bare -b main upstream.git");
    Shell("cd origin && git init -q -b main && git remote add origin ../upstream.git");
    std::ofstream(root_ / "origin" / "trial.py") << kProgram;
    std::ofstream(root_ / "origin" / "study.yaml") << kSpec;
    Shell(
        "cd origin && git add trial.py study.yaml && git -c user.name=t -c user.email=t@t commit -q -m trial && "
        "git push -q origin main");
    // A change not committed: the series it makes are not those of the commit.
    std::ofstream(root_ / "origin" / "trial.py")
        << std::string(kProgram).replace(std::string(kProgram).find("SCALE = 1.0"), 11, "SCALE = 1.7");
    const test::Result run =
        test::RunDltune("run study.yaml --no-report --storage " + url_, root_ / "origin", environment_);
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  }
  void TearDown() override { RemoveTree(root_); }

  void Shell(const std::string& command) const {
    const std::string line = "cd " + ShellQuote(root_.string()) + " && " + command + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(line.c_str()), 0) << command;
  }

  // Runs `script` with bash -e in a new directory `where` under the root, as a user pasting it would; its output.
  test::Result RunScript(const std::string& script, const std::string& where) const {
    std::filesystem::create_directories(root_ / where);
    std::ofstream(root_ / where / "script.sh") << script;
    const std::string command =
        "cd " + ShellQuote((root_ / where).string()) + " && env " + environment_ + " bash -e script.sh >out.log 2>&1";
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, test::Slurp(root_ / where / "out.log"), ""};
  }

  std::filesystem::path root_;
  std::string url_;
  std::string environment_;
};

TEST_F(Reproduce, ATrialRerunFromACleanCloneAndTheStoredPatchRepeatsItsSeriesBitForBit) {
  const test::Result shown = test::RunDltune("show repro --storage " + url_, {}, environment_);
  EXPECT_THAT(shown.out, HasSubstr("uncommitted patch"));
  EXPECT_THAT(shown.out, HasSubstr("dltune show repro --patch"));
  EXPECT_THAT(shown.out,
              ::testing::ContainsRegex("trial runtimes +python [0-9.]+, .*\\(every trial that sent one: 3\\)"));
  const test::Result trial_shown = test::RunDltune("show repro 1 --storage " + url_, {}, environment_);
  EXPECT_THAT(trial_shown.out, ::testing::ContainsRegex("runtime +python [0-9]"));

  const test::Result script = test::RunDltune("show repro 1 --reproduce --storage " + url_, {}, environment_);
  ASSERT_EQ(script.exit_code, 0) << script.err;
  EXPECT_THAT(script.out, HasSubstr("git clone"));
  EXPECT_THAT(script.out, HasSubstr("--patch"));
  const test::Result rerun = RunScript(script.out, "work/elsewhere");  // the remote's path holds from anywhere
  ASSERT_EQ(rerun.exit_code, 0) << script.out << rerun.out;

  auto store = OpenStoreReadOnly(url_);
  const std::string original = Series(*store, "repro", 1);
  EXPECT_THAT(original, HasSubstr("train 12 "));
  EXPECT_THAT(original, HasSubstr("eval 12 valid error_rate "));
  EXPECT_EQ(Series(*store, "repro-rerun-1", 0), original);

  // Without the patch the commit alone makes other series: the patch is what reproduces them.
  std::string unpatched = script.out;
  const std::size_t apply = unpatched.find("&& git apply study.patch");
  ASSERT_NE(apply, std::string::npos);
  unpatched.erase(apply, std::string("&& git apply study.patch").size());
  for (std::size_t at; (at = unpatched.find("repro-rerun-1")) != std::string::npos;) {
    unpatched.replace(at, 13, "repro-control");
  }
  ASSERT_EQ(RunScript(unpatched, "control").exit_code, 0);
  store = OpenStoreReadOnly(url_);
  EXPECT_NE(Series(*store, "repro-control", 0), original);
}

TEST_F(Reproduce, TheWholeStudyRerunInAStoreOfItsOwnRepeatsEveryTrial) {
  const test::Result script = test::RunDltune("show repro --reproduce --storage " + url_, {}, environment_);
  ASSERT_EQ(script.exit_code, 0) << script.err;
  const test::Result rerun = RunScript(script.out, "work");
  ASSERT_EQ(rerun.exit_code, 0) << script.out << rerun.out;
  auto original = OpenStoreReadOnly(url_);
  auto again = OpenStoreReadOnly("sqlite://" + (root_ / "work" / "repro-reproduced" / "reproduced.db").string());
  for (std::uint64_t trial = 0; trial < 3; ++trial) {
    EXPECT_EQ(Series(*again, "repro", trial), Series(*original, "repro", trial)) << "trial " << trial;
  }
}

TEST_F(Reproduce, TheJsonNamesTheRecordTheRuntimeAndTheCommands) {
  const test::Result shown =
      test::RunDltune("show repro 2 --reproduce --format json --storage " + url_, {}, environment_);
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  const nlohmann::json out = nlohmann::json::parse(shown.out);
  EXPECT_EQ(out["study"], "repro");
  EXPECT_EQ(out["trial"], 2);
  EXPECT_EQ(out["git_dirty"], true);
  EXPECT_EQ(out["record"]["git"]["patch"]["stored"], true);
  EXPECT_TRUE(out["runtime"].contains("python"));
  EXPECT_EQ(out["rerun_study"], "repro-rerun-2");
  EXPECT_THAT(out["rerun_spec"].get<std::string>(), HasSubstr("name: list"));
  EXPECT_FALSE(out["commands"].empty());
  // --patch prints the patch git apply takes, byte for byte.
  const test::Result patch = test::RunDltune("show repro --patch --storage " + url_, {}, environment_);
  EXPECT_THAT(patch.out, HasSubstr("-SCALE = 1.0\n+SCALE = 1.7\n"));
  EXPECT_EQ(patch.out.size(), out["record"]["git"]["patch"]["bytes"].get<std::size_t>());
}

// A built-in trial (the synthetic workload on the CPU, one thread) trained again as `--reproduce` says, in the same
// store, repeats its series bit for bit, the trial of a sub-study too (one per scientific value); its record names
// the LibTorch and BLAS its process ran.
TEST(ReproduceBuiltIn, ATrialOfABuiltInWorkloadRerunRepeatsItsSeriesBitForBit) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dltune_reproduce_builtin_" + std::to_string(::getpid()));
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "s.yaml") << "name: builtin\nworkload: {name: synthetic, args: {hidden_sizes: [8]}}\n"
                                   "max_train_steps: 20\ntraining: {eval_every_steps: 10, threads: 1}\ntrials: 1\n"
                                   "space:\n  optimizer: {values: [nesterov, adam], role: scientific}\n"
                                   "  learning_rate: {min: 0.01, max: 0.5, scale: log}\n";
  const std::string url = "sqlite://" + (dir / "s.db").string();
  const test::Result run = test::RunDltune("run s.yaml --no-report --storage " + url, dir);
  if (run.exit_code != 0 && run.err.find("without its trainer") != std::string::npos) {
    RemoveTree(dir);
    GTEST_SKIP() << "this dltune was built without its trainer";
  }
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const test::Result script = test::RunDltune("show builtin 1 --reproduce --storage " + url);
  std::ofstream(dir / "script.sh") << script.out;
  const std::string command = "cd " + ShellQuote(dir.string()) +
                              " && PATH=" + ShellQuote(std::filesystem::path(DLTUNE_CLI).parent_path().string()) +
                              ":\"$PATH\" bash -e script.sh >out.log 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << script.out << test::Slurp(dir / "out.log");
  auto store = OpenStoreReadOnly(url);
  const std::string original = Series(*store, "builtin", 1);
  EXPECT_THAT(original, HasSubstr("eval 20 valid error_rate "));
  EXPECT_EQ(Series(*store, "builtin-rerun-1", 0), original);
  const test::Result trial = test::RunDltune("show builtin 1 --storage " + url);
  EXPECT_THAT(trial.out, ::testing::ContainsRegex("runtime +.*libtorch "));
  RemoveTree(dir);
}

// A trial whose process ran another LibTorch than the study was created with is named in `show`; a study created
// before dltune kept a record (or copied from such a store) says so instead of guessing.
TEST(ReproduceRecord, ATrialsOtherRuntimeAndAStudyWithoutARecordAreSaidSo) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("dltune_reproduce_record_" + std::to_string(::getpid()));
  RemoveTree(dir);
  std::filesystem::create_directories(dir);
  const std::string url = "sqlite://" + (dir / "s.db").string();
  {
    auto store = OpenStore(url);
    const StudyRecord study =
        store->CreateStudy({.name = "built",
                            .spec_text = "name: built\nworkload: {name: synthetic}\nmax_train_steps: 2\nspace:\n  "
                                         "learning_rate: {min: 0.01, max: 0.1}\n",
                            .spec_hash = "h",
                            .git_commit = "0123456789abcdef0123456789abcdef01234567",
                            .git_dirty = true,
                            .reproduction = R"({"libraries":{"libtorch":"1.13"},"git":{"patch":{"bytes":9000000,)"
                                            R"("stored":false,"note":"over the cap"}}})"});
    store->AddTrials(study.id, {{.number = 0, .substudy_label = "all", .params = {{"learning_rate", Value(0.05)}}},
                                {.number = 1, .substudy_label = "all", .params = {{"learning_rate", Value(0.07)}}}});
    for (const char* runtime :
         {R"({"runtime":{"libtorch":"2.1.0","blas_kernels":"Haswell"}})", R"({"runtime":{"libtorch":"1.13"}})"}) {
      const auto claim = store->ClaimNext(study.id, "w");
      ASSERT_TRUE(claim);
      store->Finish(claim->second, {.state = TrialState::kFailed, .reason = "test", .resources = runtime});
    }
    store->CreateStudy({.name = "old", .spec_text = "name: old\ncommand: x\nspace: {}\n", .spec_hash = "h"});
  }
  const test::Result trial = test::RunDltune("show built 0 --storage " + url);
  EXPECT_THAT(trial.out, HasSubstr("libtorch 2.1.0 (the study's record: 1.13)")) << trial.out << trial.err;
  const test::Result study = test::RunDltune("show built --storage " + url);
  EXPECT_THAT(study.out, HasSubstr("not stored (over the cap)"));
  EXPECT_THAT(study.out,
              HasSubstr("2 differ: blas_kernels Haswell, libtorch 2.1.0 (trial 0); libtorch 1.13 (trial 1)"));
  const test::Result reproduce = test::RunDltune("show built 0 --reproduce --storage " + url);
  EXPECT_THAT(reproduce.out, HasSubstr("trial's runtime differs from the study's record: libtorch 2.1.0"));
  EXPECT_THAT(reproduce.out, HasSubstr("it had uncommitted changes:"));
  EXPECT_THAT(reproduce.out, ::testing::Not(HasSubstr("git apply")));  // no patch stored: none to apply
  const test::Result no_patch = test::RunDltune("show built --patch --storage " + url);
  EXPECT_EQ(no_patch.exit_code, 2);
  EXPECT_THAT(no_patch.err, HasSubstr("has no stored patch"));

  const test::Result old = test::RunDltune("show old --reproduce --storage " + url);
  EXPECT_EQ(old.exit_code, 0) << old.err;
  EXPECT_THAT(old.out, HasSubstr("before dltune kept a reproduction record"));
  EXPECT_THAT(old.out, HasSubstr("dltune show old --spec"));
  RemoveTree(dir);
}

}  // namespace
}  // namespace dltune
