#include "gpu/mps_daemon.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/files.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// tests/fixtures/fake_mps_control as the control program, a temporary directory of its own as TMPDIR, and the
// fake's log of what it was told.
class MpsDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = (fs::temp_directory_path() / "dltune-mps-test-XXXXXX").string();
    ASSERT_NE(::mkdtemp(name.data()), nullptr);
    dir_ = name;
    saved_tmpdir_ = std::getenv("TMPDIR") != nullptr ? std::optional<std::string>(std::getenv("TMPDIR")) : std::nullopt;
    ::setenv("TMPDIR", dir_.c_str(), 1);
    ::setenv("DLTUNE_MPS_CONTROL", DLTUNE_SOURCE_DIR "/tests/fixtures/fake_mps_control", 1);
    ::setenv("FAKE_MPS_LOG", (dir_ / "fake-mps.log").c_str(), 1);
  }
  void TearDown() override {
    ::unsetenv("DLTUNE_MPS_CONTROL");
    ::unsetenv("FAKE_MPS_LOG");
    ::unsetenv("FAKE_MPS_FAIL");
    if (saved_tmpdir_) {
      ::setenv("TMPDIR", saved_tmpdir_->c_str(), 1);
    } else {
      ::unsetenv("TMPDIR");
    }
    RemoveTree(dir_);
  }
  // Why a daemon for GPU-1 could not start, or "" where it did.
  static std::string StartError() {
    try {
      const MpsDaemon daemon({"GPU-1"});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  std::vector<std::string> Told() const {
    std::ifstream log(dir_ / "fake-mps.log");
    std::vector<std::string> lines;
    for (std::string line; std::getline(log, line);) lines.push_back(line);
    return lines;
  }

  fs::path dir_;
  std::optional<std::string> saved_tmpdir_;
};

TEST_F(MpsDaemonTest, StartsADaemonOfItsOwnForItsGpusAndQuitsItAtTheEnd) {
  std::string pipe;
  {
    const MpsDaemon daemon({"GPU-1", "GPU-2"});
    const auto environment = daemon.ClientEnvironment();
    pipe = environment.at("CUDA_MPS_PIPE_DIRECTORY");
    EXPECT_THAT(pipe, ::testing::StartsWith(MpsDirectoryOf(::getpid()).string()));
    EXPECT_TRUE(fs::is_directory(pipe));
    EXPECT_TRUE(fs::is_directory(environment.at("CUDA_MPS_LOG_DIRECTORY")));
    EXPECT_EQ(fs::path(pipe).parent_path().parent_path(), dir_) << "in the temporary directory";
    EXPECT_THAT(Told(), ElementsAre("start " + pipe + " GPU-1,GPU-2"));
    EXPECT_THAT(daemon.Describe(), HasSubstr("a private MPS control daemon"));
  }
  EXPECT_THAT(Told(), ElementsAre("start " + pipe + " GPU-1,GPU-2", "quit " + pipe));
  EXPECT_FALSE(fs::exists(fs::path(pipe).parent_path())) << "its directory is removed";
}

TEST_F(MpsDaemonTest, ADaemonThatCannotStartIsAnErrorSayingWhy) {
  ::setenv("FAKE_MPS_FAIL", "1", 1);
  EXPECT_THAT(StartError(), HasSubstr("-d failed (exit status 1): An instance of this daemon is already running"));
  const std::string ours = MpsDirectoryOf(::getpid()).filename().string();
  for (const fs::directory_entry& entry : fs::directory_iterator(dir_)) {
    EXPECT_FALSE(entry.path().filename().string().starts_with(ours)) << entry.path() << " left behind";
  }
  ::setenv("DLTUNE_MPS_CONTROL", "", 1);
  const std::string path = std::getenv("PATH");
  ::setenv("PATH", "/nonexistent", 1);
  EXPECT_THAT(StartError(), HasSubstr("nvidia-cuda-mps-control is not on PATH"));
  ::setenv("PATH", path.c_str(), 1);
}

TEST_F(MpsDaemonTest, ADaemonLeftByAKilledWorkerIsQuitByTheNextOne) {
  const pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ::waitpid(gone, nullptr, 0);
  const fs::path left = MpsDirectoryOf(gone).string() + "abc123";
  fs::create_directories(left / "pipe");
  const fs::path ours = MpsDirectoryOf(::getpid()).string() + "live00";  // a live worker's: left alone
  fs::create_directories(ours / "pipe");
  {
    const MpsDaemon daemon({"GPU-1"});
    EXPECT_FALSE(fs::exists(left));
    EXPECT_TRUE(fs::exists(ours));
    EXPECT_EQ(Told().front(), "quit " + (left / "pipe").string());
  }
}

}  // namespace
}  // namespace dltune
