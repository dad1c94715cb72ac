#include "core/files.h"

#include <unistd.h>

#include <fstream>

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

}  // namespace
}  // namespace dltune
