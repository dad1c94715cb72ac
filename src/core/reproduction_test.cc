#include "core/reproduction.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/files.h"
#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/version.h"

namespace dltune {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

void WriteBytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

class Reproduction : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("dltune_reproduction_" + std::to_string(::getpid()) + "_" +
                                                     ::testing::UnitTest::GetInstance()->current_test_info()->name());
    RemoveTree(dir_);
    std::filesystem::create_directories(dir_ / "repo" / "sub");
    Git("init -q");
    WriteBytes(dir_ / "repo" / "a.txt", "one\ntwo\n");
    WriteBytes(dir_ / "repo" / "sub" / "b.bin", std::string("\x00\x01\xff", 3));
    WriteBytes(dir_ / "repo" / "latin1.txt", "caf\xe9\n");
    Git("add a.txt sub/b.bin latin1.txt");
    Git("-c user.name=t -c user.email=t@t commit -q -m first");
  }
  void TearDown() override { RemoveTree(dir_); }

  void Git(const std::string& arguments, const std::string& where = "repo") const {
    const std::string command = "git -C " + ShellQuote((dir_ / where).string()) + " " + arguments + " >/dev/null 2>&1";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  // Uncommitted changes: a text edit, a binary edit (NUL and bytes that are not UTF-8: git writes it in base 85), an
  // edit of a text that is not UTF-8 (git writes its bytes as they are), an untracked file.
  void ChangeWithoutCommitting() const {
    WriteBytes(dir_ / "repo" / "a.txt", "one\nTWO\nthree\n");
    WriteBytes(dir_ / "repo" / "latin1.txt", "caf\xe9 cr\xe8me\n");
    WriteBytes(dir_ / "repo" / "sub" / "b.bin", std::string("\x00\x02\xfe\xff", 4));
    WriteBytes(dir_ / "repo" / "untracked.txt", "not in git\n");
  }

  std::filesystem::path dir_;
};

TEST_F(Reproduction, TheStoredPatchRebuildsTheUncommittedChangesInACleanClone) {
  ChangeWithoutCommitting();
  const ReproductionCapture capture = CaptureReproduction(dir_ / "repo" / "sub");
  const json record = ParseRecord(capture.record);
  const json& patch = record["git"]["patch"];
  EXPECT_EQ(patch["stored"], true);
  EXPECT_EQ(patch["encoding"], "base64");  // bytes that are not UTF-8: not text a database holds as it is
  EXPECT_EQ(record["git"]["prefix"], "sub/");
  EXPECT_EQ(record["git"]["untracked"], json::array({"untracked.txt"}));
  const std::string bytes = PatchBytes(capture.record, capture.stored_patch);
  EXPECT_EQ(bytes, GitPatchOf(dir_ / "repo").value());
  EXPECT_EQ(patch["bytes"], bytes.size());

  Git("clone -q repo clone", ".");
  WriteBytes(dir_ / "study.patch", bytes);
  Git("apply " + ShellQuote((dir_ / "study.patch").string()), "clone");
  EXPECT_EQ(ReadBytes(dir_ / "clone" / "a.txt"), ReadBytes(dir_ / "repo" / "a.txt"));
  EXPECT_EQ(ReadBytes(dir_ / "clone" / "sub" / "b.bin"), ReadBytes(dir_ / "repo" / "sub" / "b.bin"));
  EXPECT_EQ(ReadBytes(dir_ / "clone" / "latin1.txt"), "caf\xe9 cr\xe8me\n");
}

TEST_F(Reproduction, APatchOfTextIsStoredAsItIs) {
  WriteBytes(dir_ / "repo" / "a.txt", "one\nzwei é\n");
  const ReproductionCapture capture = CaptureReproduction(dir_ / "repo");
  EXPECT_EQ(ParseRecord(capture.record)["git"]["patch"]["encoding"], "text");
  EXPECT_THAT(capture.stored_patch, HasSubstr("+zwei é\n"));
  EXPECT_EQ(PatchBytes(capture.record, capture.stored_patch), capture.stored_patch);
}

TEST_F(Reproduction, APatchOverTheCapIsNotStoredAndTheRecordSaysSo) {
  ChangeWithoutCommitting();
  const std::size_t whole = GitPatchOf(dir_ / "repo").value().size();
  const ReproductionCapture capture = CaptureReproduction(dir_ / "repo", whole - 1);
  const json record = ParseRecord(capture.record);
  const json& patch = record["git"]["patch"];
  EXPECT_EQ(patch["stored"], false);
  EXPECT_EQ(patch["bytes"], whole);
  EXPECT_THAT(patch["note"].get<std::string>(),
              HasSubstr(fmt::format("({} bytes), over the {} bytes dltune keeps: not stored", whole, whole - 1)));
  EXPECT_EQ(capture.stored_patch, "");  // never a part of the patch as if it were the whole
  EXPECT_EQ(PatchBytes(capture.record, capture.stored_patch), "");
  // At the cap exactly, it is kept.
  const ReproductionCapture at_cap = CaptureReproduction(dir_ / "repo", whole);
  EXPECT_EQ(PatchBytes(at_cap.record, at_cap.stored_patch).size(), whole);
}

TEST_F(Reproduction, AStoredPatchThatDoesNotMatchItsRecordIsRefused) {
  WriteBytes(dir_ / "repo" / "a.txt", "changed\n");
  const ReproductionCapture capture = CaptureReproduction(dir_ / "repo");
  EXPECT_THROW(PatchBytes(capture.record, capture.stored_patch.substr(1)), CorruptError);
}

TEST_F(Reproduction, ACleanCheckoutHasAnEmptyPatchAndNoCheckoutNone) {
  const json clean = ParseRecord(CaptureReproduction(dir_ / "repo").record);
  EXPECT_EQ(clean["git"]["patch"]["bytes"], 0);
  const json outside = ParseRecord(CaptureReproduction(std::filesystem::temp_directory_path()).record);
  EXPECT_FALSE(outside.contains("git"));
  EXPECT_EQ(outside["dltune"]["version"], std::string(kVersion));
}

TEST(ReproductionRecord, KeepsTheVariablesThatChooseKernels) {
  ::setenv("OMP_NUM_THREADS", "3", 1);
  ::setenv("MKL_CBWR", "AVX2", 1);
  ::setenv("OPENBLAS_VERBOSE", "2", 1);
  ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", 1);
  const json environment = KernelEnvironment();
  EXPECT_EQ(environment["OMP_NUM_THREADS"], "3");
  EXPECT_EQ(environment["MKL_CBWR"], "AVX2");
  EXPECT_EQ(environment["CUBLAS_WORKSPACE_CONFIG"], ":4096:8");
  EXPECT_FALSE(environment.contains("OPENBLAS_VERBOSE"));
  EXPECT_FALSE(environment.contains("HOME"));
  for (const char* name : {"OMP_NUM_THREADS", "MKL_CBWR", "OPENBLAS_VERBOSE", "CUBLAS_WORKSPACE_CONFIG"}) {
    ::unsetenv(name);
  }
}

TEST(ReproductionRecord, SaysHowATrialsRuntimeDiffersFromTheStudys) {
  const json study = {{"dltune", {{"version", "0.1.0"}, {"build", "abc"}}},
                      {"libraries", {{"libtorch", "1.13"}, {"blas_kernels", "SkylakeX"}}}};
  EXPECT_TRUE(RuntimeDifferences(study, {{"libtorch", "1.13"}, {"python", "3.11"}}).empty());
  EXPECT_THAT(RuntimeDifferences(study, {{"libtorch", "2.1.0"}, {"blas_kernels", "SkylakeX"}}),
              ::testing::ElementsAre("libtorch 2.1.0 (the study's record: 1.13)"));
  EXPECT_THAT(RuntimeDifferences(study, {{"dltune", "0.2.0 (def)"}}),
              ::testing::ElementsAre("dltune 0.2.0 (def) (the study's record: 0.1.0 (abc))"));
}

}  // namespace
}  // namespace dltune
