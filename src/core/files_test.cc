#include "core/files.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

namespace dltune {
namespace {

namespace fs = std::filesystem;

class RemoveTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("dltune_remove_tree_test_" + std::to_string(::getpid()));
    fs::create_directories(root_);
  }
  void TearDown() override {
    std::error_code ignored;
    RemoveTree(root_, ignored);
  }
  fs::path root_;
};

TEST_F(RemoveTreeTest, RemovesADirectoryWithEverythingUnderItAndCountsTheEntries) {
  const fs::path tree = root_ / "tree";
  fs::create_directories(tree / "a/b/c");
  std::ofstream(tree / "top.txt") << "x";
  std::ofstream(tree / "a/b/c/deep.txt") << "y";
  std::ofstream(tree / "a/b/.hidden") << "z";
  std::error_code error;
  EXPECT_EQ(RemoveTree(tree, error), 7u);  // tree, a, b, c and three files
  EXPECT_FALSE(error) << error.message();
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::exists(root_));
}

TEST_F(RemoveTreeTest, RemovesASymbolicLinkWithoutFollowingIt) {
  const fs::path kept = root_ / "kept";
  fs::create_directories(kept);
  std::ofstream(kept / "file.txt") << "kept";
  const fs::path tree = root_ / "tree";
  fs::create_directories(tree);
  fs::create_directory_symlink(kept, tree / "link_to_kept");
  fs::create_directory_symlink(kept, root_ / "top_link");
  EXPECT_EQ(RemoveTree(tree), 2u);
  EXPECT_EQ(RemoveTree(root_ / "top_link"), 1u);
  EXPECT_TRUE(fs::exists(kept / "file.txt"));
}

TEST_F(RemoveTreeTest, AFileIsOneEntryAndAMissingPathIsNoError) {
  std::ofstream(root_ / "file.txt") << "x";
  EXPECT_EQ(RemoveTree(root_ / "file.txt"), 1u);
  std::error_code error;
  EXPECT_EQ(RemoveTree(root_ / "never_there", error), 0u);
  EXPECT_FALSE(error);
}

TEST_F(RemoveTreeTest, APathThatCannotBeReachedIsAnErrorNamingIt) {
  std::ofstream(root_ / "file.txt") << "x";
  const fs::path under_a_file = root_ / "file.txt" / "child";
  std::error_code error;
  EXPECT_EQ(RemoveTree(under_a_file, error), static_cast<std::uintmax_t>(-1));
  EXPECT_EQ(error, std::errc::not_a_directory);
  try {
    RemoveTree(under_a_file);
    ADD_FAILURE() << "no error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find(under_a_file.string()), std::string::npos) << e.what();
  }
  EXPECT_TRUE(fs::exists(root_ / "file.txt"));
}

// A tree with many files, for a removal that takes long enough for a writer to race it.
void FillTree(const fs::path& tree) {
  fs::create_directories(tree / "trials/1/checkpoints");
  for (int i = 0; i < 2000; ++i) std::ofstream(tree / "trials/1" / ("log-" + std::to_string(i))) << i;
}

// A deleted study's trials go on writing checkpoints by path until their runner learns of the deletion: none of what
// they write may make its removal fail ("Directory not empty") or land back in the tree.
TEST_F(RemoveTreeTest, ATreeInUseIsRemovedWhileAWriterKeepsWritingIntoItByPath) {
  const fs::path tree = root_ / "study";
  FillTree(tree);
  std::atomic<bool> removed{false};
  std::thread writer([&] {
    for (int i = 0; !removed.load(); ++i) {
      const std::string file = (tree / "trials/1/checkpoints" / ("step-" + std::to_string(i))).string();
      const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) ::close(fd);
    }
  });
  std::error_code error;
  RemoveTreeInUse(tree, error, std::chrono::minutes(1));
  removed = true;
  writer.join();
  EXPECT_FALSE(error) << error.message();
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::is_empty(root_)) << "nothing left beside it";
}

// A writer that holds a directory of the tree open (a program whose working directory it is) can still make files in
// it after the rename: the removal empties the tree again until it stays empty.
TEST_F(RemoveTreeTest, ATreeInUseIsRemovedWhileAWriterMakesFilesThroughADirectoryItHoldsOpen) {
  const fs::path tree = root_ / "study";
  FillTree(tree);
  const int held = ::open((tree / "trials/1").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(held, 0);
  std::atomic<bool> started{false};
  std::thread writer([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    for (int i = 0; std::chrono::steady_clock::now() < until; ++i) {
      const int fd = ::openat(held, ("late-" + std::to_string(i)).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
      if (fd >= 0) ::close(fd);
      started = true;
    }
  });
  while (!started.load()) std::this_thread::yield();
  std::error_code error;
  RemoveTreeInUse(tree, error, std::chrono::minutes(1));
  writer.join();
  ::close(held);
  EXPECT_FALSE(error) << error.message();
  EXPECT_FALSE(fs::exists(tree));
  EXPECT_TRUE(fs::is_empty(root_)) << "nothing left beside it";
}

TEST_F(RemoveTreeTest, ATreeInUseThatIsNotThereIsNoError) {
  std::error_code error;
  RemoveTreeInUse(root_ / "never_there", error);
  EXPECT_FALSE(error) << error.message();
}

}  // namespace
}  // namespace dltune
