// A fixture for the tests that run dltune in a directory of their own.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <utility>

#include "core/files.h"

namespace dltune::test {

// Each test gets a fresh dir_, $TMPDIR/dltune_<prefix>_<pid>_<test>: kept when the test fails, for a look at what
// the run left there, removed when it passes.
class InOwnDirectory : public ::testing::Test {
 protected:
  explicit InOwnDirectory(std::string prefix) : prefix_(std::move(prefix)) {}

  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dltune_" + prefix_ + "_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    dltune::RemoveTree(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    if (!HasFailure()) dltune::RemoveTree(dir_);
  }

  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace dltune::test
