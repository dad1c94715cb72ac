#include "core/git.h"

#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "core/files.h"

namespace dltune {
namespace {

class GitCommit : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() / ("dltune_git_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(root_ / ".git/refs/heads");
    std::filesystem::create_directories(root_ / "sub/dir");
  }
  void TearDown() override { RemoveTree(root_); }
  void Write(const std::filesystem::path& file, const std::string& text) { std::ofstream(root_ / file) << text; }
  std::filesystem::path root_;
};

const std::string kCommit = "0123456789abcdef0123456789abcdef01234567";

TEST_F(GitCommit, FollowsHeadToALooseRefFromASubdirectory) {
  Write(".git/HEAD", "ref: refs/heads/main\n");
  Write(".git/refs/heads/main", kCommit + "\n");
  EXPECT_EQ(GitCommitOf(root_ / "sub/dir"), kCommit);
}

TEST_F(GitCommit, ReadsPackedRefsAndDetachedHeads) {
  Write(".git/HEAD", "ref: refs/heads/release\n");
  Write(".git/packed-refs", "# pack-refs with: peeled fully-peeled sorted\n" + kCommit + " refs/heads/release\n");
  EXPECT_EQ(GitCommitOf(root_), kCommit);
  Write(".git/HEAD", "fedcba9876543210fedcba9876543210fedcba98\n");
  EXPECT_EQ(GitCommitOf(root_), "fedcba9876543210fedcba9876543210fedcba98");
}

TEST_F(GitCommit, NoCheckoutOrNoCommitYet) {
  Write(".git/HEAD", "ref: refs/heads/main\n");  // a fresh repository: the branch has no commit
  EXPECT_EQ(GitCommitOf(root_), std::nullopt);
  EXPECT_EQ(GitCommitOf("/"), std::nullopt);
}

}  // namespace
}  // namespace dltune
