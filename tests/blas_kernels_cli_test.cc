// `dltune train` choosing OpenBLAS's kernels, through the command as a user runs it. OPENBLAS_VERBOSE=2 makes OpenBLAS
// print "Core: NAME" each time it loads, so stderr shows the kernels of the first process and of the restarted one.
// An OPENBLAS_CORETYPE set in the environment these tests run in (some machines set one because OpenBLAS's own choice
// is broken on them) is left as it is: the tests that need OpenBLAS's own choice are skipped there.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_runner.h"
#include "core/files.h"
#include "src/train/scoped_variable_test_util.h"
#include "train/blas_kernels.h"

namespace {

using dltune::test::RunDltune;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

using dltune::test::ScopedVariable;

// The NAMEs of OpenBLAS's "Core: NAME" lines, in order.
std::vector<std::string> CoreLines(const std::string& err) {
  std::vector<std::string> cores;
  std::istringstream lines(err);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("Core: ")) cores.push_back(line.substr(6));
  }
  return cores;
}

std::size_t Count(const std::string& text, const std::string& word) {
  std::size_t count = 0;
  for (std::size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++count;
  return count;
}

class BlasKernelsCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dltune_blas_kernels_cli_" + std::to_string(::getpid()));
    dltune::RemoveTree(dir_);
    if (const char* core = std::getenv("OPENBLAS_CORETYPE"); core != nullptr) environment_core_ = core;
    // The kernels OpenBLAS picks by itself (or is told to by the environment): those of a command that loads the
    // trainer (and with it OpenBLAS) without training, `dltune space check` of a built-in workload's spec.
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "check.yaml") << "name: check\nworkload: synthetic\nmax_train_steps: 10\n"
                                          "space: {learning_rate: {min: 0.01, max: 1, scale: log}}\n";
    const auto own = RunDltune("space check " + (dir_ / "check.yaml").string());
    ASSERT_EQ(own.exit_code, 0) << own.err;
    const auto cores = CoreLines(own.err);
    if (cores.empty()) GTEST_SKIP() << "the BLAS is not OpenBLAS, or OPENBLAS_VERBOSE is not honored";
    ASSERT_EQ(cores.size(), 1u) << own.err;  // commands that do not train never restart
    own_core_ = cores[0];
  }
  void TearDown() override { dltune::RemoveTree(dir_); }

  // A short training run; its exit code and stderr are checked by the caller.
  dltune::test::Result Train(const std::string& name) {
    return RunDltune("train synthetic --steps 20 --eval-every 10 --seed 1 --out " + (dir_ / name).string());
  }

  // For the tests that need OpenBLAS's own choice.
  bool EnvironmentSetsKernels() const { return environment_core_.has_value(); }

  ScopedVariable verbose_{"OPENBLAS_VERBOSE", "2"};
  // The wait policy chosen beforehand: training commands restart once to set it (docs/parallel-layout.md, "A shared
  // machine"), which would load OpenBLAS a second time; the restarts counted here are the kernels' alone.
  ScopedVariable wait_policy_{"OMP_WAIT_POLICY", "PASSIVE"};
  ScopedVariable mode_{dltune::kBlasKernelsVariable, std::nullopt};
  ScopedVariable checked_{dltune::kBlasKernelsCheckedVariable, std::nullopt};
  std::filesystem::path dir_;
  std::optional<std::string> environment_core_;  // OPENBLAS_CORETYPE as this test process found it
  std::string own_core_;
};

constexpr char kSetByEnvironment[] = "OPENBLAS_CORETYPE is set in this environment; the test leaves it alone";

// By default a training run restarts once with the CPU's kernel set when OpenBLAS picked an older one (on this
// project's AVX-512 machine: Prescott, then SkylakeX), and trains with it; otherwise it does not restart.
TEST_F(BlasKernelsCli, AutoTrainsWithTheCpusKernelsWhenOpenBlasPickedOlderOnes) {
  if (EnvironmentSetsKernels()) GTEST_SKIP() << kSetByEnvironment;
  const std::string target = dltune::OpenBlasCoreForCpu();
  const auto run = Train("auto");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_THAT(run.err, Not(HasSubstr("warning")));
  if (dltune::IsOlderOpenBlasCore(own_core_, target)) {
    EXPECT_THAT(CoreLines(run.err), ElementsAre(own_core_, target)) << run.err;
  } else {
    EXPECT_THAT(CoreLines(run.err), ElementsAre(own_core_)) << run.err;
  }
}

TEST_F(BlasKernelsCli, OffKeepsOpenBlasesOwnChoice) {
  if (EnvironmentSetsKernels()) GTEST_SKIP() << kSetByEnvironment;
  const ScopedVariable mode(dltune::kBlasKernelsVariable, "off");
  const auto run = Train("off");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_THAT(CoreLines(run.err), ElementsAre(own_core_)) << run.err;
}

TEST_F(BlasKernelsCli, TheUsersOpenBlasCoretypeIsKept) {
  // The environment's own setting if it has one, else Nehalem (SSE4.2: every x86-64 CPU this project runs on has it).
  const ScopedVariable core("OPENBLAS_CORETYPE", environment_core_.value_or("Nehalem"));
  const std::string expected = EnvironmentSetsKernels() ? own_core_ : "Nehalem";
  const auto run = Train("user");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_THAT(CoreLines(run.err), ElementsAre(expected)) << run.err;
  EXPECT_THAT(run.err, Not(HasSubstr("warning")));
}

TEST_F(BlasKernelsCli, AnExplicitKernelSetIsUsed) {
  if (EnvironmentSetsKernels()) GTEST_SKIP() << kSetByEnvironment;
  const ScopedVariable mode(dltune::kBlasKernelsVariable, "Nehalem");
  const auto run = Train("explicit");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  const auto cores = CoreLines(run.err);
  ASSERT_FALSE(cores.empty()) << run.err;
  EXPECT_EQ(cores.back(), "Nehalem") << run.err;
  EXPECT_LE(cores.size(), 2u) << run.err;
}

// A kernel set this OpenBLAS does not hold: one warning line, then training with OpenBLAS's own choice.
TEST_F(BlasKernelsCli, AnUnknownKernelSetFallsBackToOpenBlasesOwnChoice) {
  if (EnvironmentSetsKernels()) GTEST_SKIP() << kSetByEnvironment;
  const ScopedVariable mode(dltune::kBlasKernelsVariable, "NoSuchCore");
  const auto run = Train("unknown");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_EQ(Count(run.err, "dltune: warning:"), 1u) << run.err;
  EXPECT_THAT(run.err, HasSubstr("OpenBLAS has no kernel set 'NoSuchCore'"));
  const auto cores = CoreLines(run.err);
  ASSERT_FALSE(cores.empty()) << run.err;
  EXPECT_EQ(cores.back(), own_core_) << run.err;
  EXPECT_THAT(run.out, HasSubstr("step"));
}

}  // namespace
