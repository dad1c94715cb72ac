// The dltune command and its trainer module (src/trainer/trainer_table.h): the commands that do not train never load
// LibTorch or the module (glibc's loader lists what a process loads under LD_DEBUG=files), a command: study runs
// where the module cannot be loaded, and what trains loads it or says clearly why it cannot.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "core/files.h"
#include "dltune/store/store.h"
#include "quickstart_store.h"

namespace dltune {
namespace {

using test::RunDltune;
using ::testing::HasSubstr;

// What a process loaded that only training needs, from glibc's LD_DEBUG=files lines: LibTorch's libraries and the
// trainer module.
std::vector<std::string> TrainingLibraries(const std::string& loader_log) {
  std::vector<std::string> found;
  std::istringstream lines(loader_log);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t file = line.find("file=");
    if (file == std::string::npos) continue;
    const std::string name = line.substr(file + 5, line.find(' ', file) - file - 5);
    if (name.find("libtorch") != std::string::npos || name.find("libc10") != std::string::npos ||
        name.find("trainer.so") != std::string::npos) {
      found.push_back(name);
    }
  }
  return found;
}

class TrainerModuleCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dltune_trainer_module_cli_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    storage_ = " --storage sqlite://" + (dir_ / "runs.db").string();
  }
  void TearDown() override { dltune::RemoveTree(dir_); }

  // The quickstart study (a built-in workload) with 2 trials completed, 1 infeasible and 1 waiting.
  void AddQuickstartStudy() const { test::FillQuickstartStore("sqlite://" + (dir_ / "runs.db").string()); }

  // A study of 3 trials of a shell program reporting one evaluation each.
  std::filesystem::path CommandStudy() const {
    std::ofstream(dir_ / "trial.sh")
        << "printf '{\"type\":\"eval\",\"step\":1,\"split\":\"valid\",\"metrics\":{\"error_rate\":0.1%s}}\\n' \"$1\" "
           ">> \"$DLTUNE_REPORT\"\n";
    std::ofstream(dir_ / "command.yaml") << "name: command_study\ncommand: sh " << (dir_ / "trial.sh").string()
                                         << " {trial_number}\nmax_train_steps: 1\ntrials: 3\n"
                                            "space: {lr: {min: 0.01, max: 1, scale: log}}\n";
    return dir_ / "command.yaml";
  }

  std::filesystem::path dir_;
  std::string storage_;
};

TEST_F(TrainerModuleCli, CommandsThatDoNotTrainNeverLoadLibTorch) {
  AddQuickstartStudy();
  for (const std::string& command :
       {std::string("--version"), std::string("--help"), "studies" + storage_, "show quickstart" + storage_,
        "next quickstart" + storage_, "doctor quickstart" + storage_, "next" + storage_,
        "report quickstart -o report.html" + storage_,
        std::string("space sample " DLTUNE_SOURCE_DIR "/examples/quickstart.yaml -n 2")}) {
    const test::Result result = RunDltune(command, dir_, "LD_DEBUG=files");
    EXPECT_EQ(result.exit_code, 0) << command << "\n" << result.out;
    EXPECT_THAT(result.err, HasSubstr("file=libc.so")) << "no loader log for " << command;
    EXPECT_THAT(TrainingLibraries(result.err), ::testing::IsEmpty()) << command;
  }
}

TEST_F(TrainerModuleCli, ACommandStudyRunsWhereTheTrainerModuleCannotBeLoaded) {
  const std::string missing = "DLTUNE_TRAINER_MODULE=" + (dir_ / "missing" / "trainer.so").string();
  const test::Result run =
      RunDltune("run " + CommandStudy().string() + " --no-report" + storage_, dir_, missing + " LD_DEBUG=files");
  EXPECT_EQ(run.exit_code, 0) << run.out
                              << run.err.substr(run.err.size() - std::min<std::size_t>(run.err.size(), 4000));
  EXPECT_THAT(TrainingLibraries(run.err), ::testing::IsEmpty());
  const test::Result studies = RunDltune("studies" + storage_, dir_);
  EXPECT_THAT(studies.out, HasSubstr("command_study"));
  EXPECT_THAT(studies.out, HasSubstr("command_study  3 done")) << studies.out;

  // What trains says which module it could not load, and how to name another.
  std::ofstream(dir_ / "builtin.yaml") << "name: builtin\nworkload: synthetic\nmax_train_steps: 10\ntrials: 1\n"
                                          "space: {learning_rate: {min: 0.01, max: 1, scale: log}}\n";
  for (const std::string& command : {"run builtin.yaml --no-report" + storage_,
                                     std::string("train synthetic --steps 5 --out ") + (dir_ / "t").string()}) {
    const test::Result refused = RunDltune(command, dir_, missing);
    EXPECT_EQ(refused.exit_code, 74) << command << "\n" << refused.out << refused.err;
    EXPECT_THAT(refused.err, HasSubstr("cannot load dltune's trainer " + (dir_ / "missing" / "trainer.so").string()))
        << command;
    EXPECT_THAT(refused.err, HasSubstr("command: programs do not")) << command;
  }
  // A study's refusal points at its spec's workload: key and names the workload.
  EXPECT_THAT(RunDltune("run builtin.yaml --no-report" + storage_, dir_, missing).err,
              HasSubstr("builtin.yaml:2:11: workload 'synthetic' cannot train"));
}

TEST_F(TrainerModuleCli, TrainingLoadsTheTrainerModule) {
  const test::Result trained = RunDltune(
      "train synthetic --set optimizer=sgd --set learning_rate=0.1 --steps 20 --eval-every 10 --threads 1 --out " +
          (dir_ / "t").string(),
      dir_, "LD_DEBUG=files");
  EXPECT_EQ(trained.exit_code, 0) << trained.out;
  EXPECT_THAT(TrainingLibraries(trained.err), ::testing::Contains(HasSubstr("trainer.so")));
  EXPECT_THAT(TrainingLibraries(trained.err), ::testing::Contains(HasSubstr("libtorch")));
  EXPECT_TRUE(std::filesystem::exists(dir_ / "t" / "metrics.jsonl"));
}

// OpenMP reads its wait policy when it loads, and the dltune command loads it (with the trainer module) only once it
// trains, after setting the policy: `dltune train` with several threads starts once, not twice.
TEST_F(TrainerModuleCli, TrainingSetsTheWaitPolicyBeforeOpenMpLoadsWithoutARestart) {
  const test::Result trained =
      RunDltune("train synthetic --steps 10 --threads 2 --out " + (dir_ / "t").string(), dir_,
                "-u OMP_WAIT_POLICY -u GOMP_SPINCOUNT DLTUNE_BLAS_KERNELS=off OMP_DISPLAY_ENV=TRUE LD_DEBUG=files");
  EXPECT_EQ(trained.exit_code, 0) << trained.out;
  std::size_t loads = 0;  // the loader's "file=.../trainer.so [0];  dynamically loaded by ..." lines
  std::istringstream lines(trained.err);
  for (std::string line; std::getline(lines, line);) {
    loads += line.find("trainer.so [0];  dynamically loaded by") != std::string::npos;
  }
  EXPECT_EQ(loads, 1u) << "the trainer module was loaded again: the process restarted";
  EXPECT_THAT(trained.err, HasSubstr("OMP_WAIT_POLICY = 'PASSIVE'"));
}

}  // namespace
}  // namespace dltune
