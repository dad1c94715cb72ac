#include "checkpoint.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <stdexcept>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint_retention.h"
#include "core/files.h"
#include "core/sha256.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteText(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// The payload a test checkpoint holds: a model file and an optimizer file in a subdirectory.
std::string ModelText(std::int64_t step) { return "model weights of step " + std::to_string(step); }

auto WritePayload(std::int64_t step) {
  return [step](const fs::path& dir) {
    WriteText(dir / "model.bin", ModelText(step));
    fs::create_directory(dir / "optimizer");
    WriteText(dir / "optimizer" / "state.bin", "optimizer state " + std::to_string(step));
  };
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("dltune_checkpoint_test_" + std::to_string(::getpid()) + "_" + info->name());
    RemoveTree(dir_);
  }
  void TearDown() override { RemoveTree(dir_); }

  CheckpointOptions Options(int keep_latest, int keep_best, Direction direction = Direction::kMinimize) const {
    return CheckpointOptions{
        .dir = dir_.string(), .keep_latest = keep_latest, .keep_best = keep_best, .direction = direction};
  }

  // Names of everything in the checkpoint directory, sorted.
  std::vector<std::string> Entries() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  static std::vector<std::int64_t> Steps(const std::vector<CheckpointInfo>& infos) {
    std::vector<std::int64_t> steps;
    for (const auto& info : infos) steps.push_back(info.step);
    return steps;
  }

  fs::path dir_;
};

// A worker that records the trial's checkpoints says the newest one it has recorded (core/checkpoint_retention.h):
// retention keeps that one too until a newer one is recorded, so that a trial taken over after its worker died
// resumes from it. Without that file (a trial trained by hand) it keeps its pools only.
TEST_F(CheckpointTest, RetentionKeepsTheCheckpointTheWorkerRecordedLast) {
  const fs::path recorded = dir_.string() + "_recorded";
  CheckpointOptions options = Options(1, 0);
  options.recorded_step_file = recorded.string();
  CheckpointManager manager(options);
  manager.Save(100, std::nullopt, WritePayload(100));
  WriteRecordedCheckpointStep(recorded, 100);
  EXPECT_EQ(ReadRecordedCheckpointStep(recorded), 100);
  EXPECT_THAT(manager.Save(200, std::nullopt, WritePayload(200)).deleted, IsEmpty());
  // 200 is newer than the recorded one: a worker that is behind may record it next, so it stays until it is passed.
  EXPECT_THAT(manager.Save(300, std::nullopt, WritePayload(300)).deleted, IsEmpty());
  EXPECT_THAT(Entries(), ElementsAre("step_00000100", "step_00000200", "step_00000300"));

  WriteRecordedCheckpointStep(recorded, 300);
  EXPECT_THAT(manager.Save(400, std::nullopt, WritePayload(400)).deleted,
              ElementsAre(dir_ / "step_00000100", dir_ / "step_00000200"));
  EXPECT_THAT(Entries(), ElementsAre("step_00000300", "step_00000400"));

  RemoveTree(recorded);
  EXPECT_THAT(manager.Save(500, std::nullopt, WritePayload(500)).deleted,
              ElementsAre(dir_ / "step_00000300", dir_ / "step_00000400"));
  WriteFileAtomically(recorded, "not a step\n");
  EXPECT_EQ(ReadRecordedCheckpointStep(recorded), std::nullopt);
  RemoveTree(recorded);
}

TEST_F(CheckpointTest, DirNameIsZeroPadded) {
  EXPECT_EQ(CheckpointDirName(123), "step_00000123");
  EXPECT_EQ(CheckpointDirName(0), "step_00000000");
  EXPECT_EQ(CheckpointDirName(1234567890), "step_1234567890");
}

TEST_F(CheckpointTest, SaveWritesPayloadMetaAndCommitMarker) {
  CheckpointManager manager(Options(2, 1));
  const SavedCheckpoint saved = manager.Save(123, 0.25, WritePayload(123));
  EXPECT_EQ(saved.info.step, 123);
  EXPECT_EQ(saved.info.objective, 0.25);
  EXPECT_TRUE(saved.info.in_latest);
  EXPECT_TRUE(saved.info.in_best);
  EXPECT_THAT(saved.deleted, IsEmpty());
  EXPECT_EQ(saved.info.path, dir_ / "step_00000123");
  EXPECT_THAT(Entries(), ElementsAre("step_00000123"));  // no temp directory left behind

  const fs::path path = dir_ / "step_00000123";
  EXPECT_EQ(ReadText(path / "model.bin"), ModelText(123));
  const std::string meta_text = ReadText(path / "meta.json");
  EXPECT_EQ(ReadText(path / "COMMITTED"), Sha256Hex(meta_text) + "\n");
  const nlohmann::json meta = nlohmann::json::parse(meta_text);
  EXPECT_EQ(meta["format"], "dltune-checkpoint");
  EXPECT_EQ(meta["format_version"], CheckpointManager::kFormatVersion);
  EXPECT_EQ(meta["step"], 123);
  EXPECT_EQ(meta["objective"], 0.25);
  EXPECT_EQ(meta["minimize"], true);
  EXPECT_TRUE(meta["owner"].is_null());
  EXPECT_EQ(meta["pools"], nlohmann::json::array({"latest", "best"}));
  EXPECT_EQ(meta["files"]["model.bin"]["sha256"], Sha256Hex(ModelText(123)));
  EXPECT_EQ(meta["files"]["model.bin"]["bytes"], ModelText(123).size());
  EXPECT_EQ(meta["files"]["optimizer/state.bin"]["sha256"], Sha256Hex("optimizer state 123"));
  EXPECT_EQ(meta["files"].size(), 2u);

  const std::optional<LoadedCheckpoint> loaded = manager.LoadLatest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->info.step, 123);
  EXPECT_THAT(loaded->warnings, IsEmpty());
}

TEST_F(CheckpointTest, ThrowingWriteLeavesNothingHalfWritten) {
  CheckpointManager manager(Options(2, 1));
  manager.Save(1, 0.5, WritePayload(1));
  const auto crash = [](const fs::path& dir) {
    WriteText(dir / "model.bin", "half of the weights");
    throw std::runtime_error("disk on fire");
  };
  EXPECT_THROW(manager.Save(2, 0.1, crash), std::runtime_error);
  EXPECT_THAT(Entries(), ElementsAre("step_00000001"));
  EXPECT_THAT(Steps(manager.List()), ElementsAre(1));
  const std::optional<LoadedCheckpoint> loaded = manager.LoadLatest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->info.step, 1);
}

TEST_F(CheckpointTest, StartupRemovesTempDirsAndIgnoresUncommittedCheckpoints) {
  { CheckpointManager(Options(2, 1)).Save(5, 0.5, WritePayload(5)); }
  // A crash mid-write leaves a temp directory; one after the commit marker but before the rename leaves a complete
  // one still under its temp name. Neither may ever be loaded.
  fs::create_directories(dir_ / ".tmp-step_00000009-4242-0" / "optimizer");
  WriteText(dir_ / ".tmp-step_00000009-4242-0" / "model.bin", "torn");
  fs::copy(dir_ / "step_00000005", dir_ / ".tmp-step_00000007-4242-1", fs::copy_options::recursive);
  // A checkpoint-named directory without a commit marker (e.g. a copy in progress) is ignored, not loaded.
  fs::copy(dir_ / "step_00000005", dir_ / "step_00000010", fs::copy_options::recursive);
  fs::remove(dir_ / "step_00000010" / "COMMITTED");

  ::testing::internal::CaptureStderr();
  CheckpointManager manager(Options(2, 1));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, HasSubstr("step_00000010 ignored: no commit marker"));
  EXPECT_THAT(Entries(), ElementsAre("step_00000005", "step_00000010"));
  EXPECT_THAT(Steps(manager.List()), ElementsAre(5));
  const std::optional<LoadedCheckpoint> loaded = manager.LoadLatest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->info.step, 5);
}

TEST_F(CheckpointTest, CorruptNewestFallsBackWithWarning) {
  CheckpointManager manager(Options(3, 1));
  manager.Save(1, 0.5, WritePayload(1));
  manager.Save(2, 0.4, WritePayload(2));
  manager.Save(3, 0.3, WritePayload(3));
  // Same size, one byte flipped: only the checksum can tell.
  std::string model = ReadText(dir_ / "step_00000003" / "model.bin");
  model[0] = static_cast<char>(model[0] ^ 1);
  WriteText(dir_ / "step_00000003" / "model.bin", model);
  // Truncated file.
  WriteText(dir_ / "step_00000002" / "optimizer" / "state.bin", "opt");

  ::testing::internal::CaptureStderr();
  const std::optional<LoadedCheckpoint> loaded = manager.LoadLatest();
  const std::optional<LoadedCheckpoint> again = manager.LoadLatest();
  const std::string err = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->info.step, 1);
  ASSERT_EQ(loaded->warnings.size(), 2u);
  EXPECT_THAT(loaded->warnings[0], HasSubstr("step_00000003"));
  EXPECT_THAT(loaded->warnings[0], HasSubstr("model.bin does not match its sha256 checksum"));
  EXPECT_THAT(loaded->warnings[1], HasSubstr("step_00000002"));
  EXPECT_THAT(loaded->warnings[1], HasSubstr("optimizer/state.bin has 3 bytes"));
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->warnings, loaded->warnings);  // returned every time...
  // ...but printed once.
  EXPECT_EQ(err, "dltune: warning: " + loaded->warnings[0] + "\ndltune: warning: " + loaded->warnings[1] + "\n");

  EXPECT_THROW(manager.Load(3), Error);
  EXPECT_EQ(manager.Load(1).info.step, 1);
  EXPECT_THROW(manager.Load(99), Error);
}

TEST_F(CheckpointTest, TamperedMetaFailsVerification) {
  CheckpointManager manager(Options(2, 1));
  manager.Save(1, 0.5, WritePayload(1));
  manager.Save(2, 0.4, WritePayload(2));
  // Pointing the checksum at a corrupted file would defeat per-file checks; the commit marker covers meta.json.
  WriteText(dir_ / "step_00000002" / "model.bin", "garbage");
  nlohmann::json meta = nlohmann::json::parse(ReadText(dir_ / "step_00000002" / "meta.json"));
  meta["files"]["model.bin"] = {{"sha256", Sha256Hex("garbage")}, {"bytes", 7}};
  WriteText(dir_ / "step_00000002" / "meta.json", meta.dump(2) + "\n");

  ::testing::internal::CaptureStderr();
  const std::optional<LoadedCheckpoint> loaded = manager.LoadLatest();
  ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->info.step, 1);
  ASSERT_EQ(loaded->warnings.size(), 1u);
  EXPECT_THAT(loaded->warnings[0], HasSubstr("commit marker"));
}

TEST_F(CheckpointTest, NothingLoadableGivesNullopt) {
  CheckpointManager manager(Options(2, 1));
  EXPECT_FALSE(manager.LoadLatest().has_value());
  manager.Save(1, 0.5, WritePayload(1));
  fs::remove(dir_ / "step_00000001" / "model.bin");
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(manager.LoadLatest().has_value());
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("model.bin is missing"));
}

// keep_latest=2, keep_best=1 over one sequence of objectives: the directories left after each save.
struct RetentionCase {
  Direction direction;
  std::vector<std::vector<std::string>> remaining;  // after saving steps 1..6
  std::vector<std::vector<std::int64_t>> deleted;   // by each save
  std::int64_t best;
};

TEST_F(CheckpointTest, RetentionKeepsLatestAndBestMinimize) {
  const std::vector<double> objectives = {0.5, 0.3, 0.4, 0.6, 0.2, 0.7};
  const RetentionCase expected{Direction::kMinimize,
                               {{"step_00000001"},
                                {"step_00000001", "step_00000002"},
                                {"step_00000002", "step_00000003"},
                                {"step_00000002", "step_00000003", "step_00000004"},
                                {"step_00000004", "step_00000005"},
                                {"step_00000005", "step_00000006"}},
                               {{}, {}, {1}, {}, {2, 3}, {4}},
                               5};
  CheckpointManager manager(Options(2, 1, expected.direction));
  for (std::size_t i = 0; i < objectives.size(); ++i) {
    const auto step = static_cast<std::int64_t>(i + 1);
    const SavedCheckpoint saved = manager.Save(step, objectives[i], WritePayload(step));
    EXPECT_EQ(Entries(), expected.remaining[i]) << "after step " << step;
    std::vector<fs::path> deleted;
    for (const std::int64_t d : expected.deleted[i]) deleted.push_back(dir_ / CheckpointDirName(d));
    EXPECT_EQ(saved.deleted, deleted) << "after step " << step;
  }
  ASSERT_TRUE(manager.Best().has_value());
  EXPECT_EQ(manager.Best()->step, expected.best);
  const std::vector<CheckpointInfo> list = manager.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_TRUE(list[0].in_latest && list[0].in_best);   // step 5
  EXPECT_TRUE(list[1].in_latest && !list[1].in_best);  // step 6
}

TEST_F(CheckpointTest, RetentionKeepsLatestAndBestMaximize) {
  const std::vector<double> objectives = {0.5, 0.3, 0.4, 0.6, 0.2, 0.7};
  const std::vector<std::vector<std::string>> remaining = {{"step_00000001"},
                                                           {"step_00000001", "step_00000002"},
                                                           {"step_00000001", "step_00000002", "step_00000003"},
                                                           {"step_00000003", "step_00000004"},
                                                           {"step_00000004", "step_00000005"},
                                                           {"step_00000005", "step_00000006"}};
  const std::vector<std::int64_t> best = {1, 1, 1, 4, 4, 6};
  CheckpointManager manager(Options(2, 1, Direction::kMaximize));
  for (std::size_t i = 0; i < objectives.size(); ++i) {
    const auto step = static_cast<std::int64_t>(i + 1);
    manager.Save(step, objectives[i], WritePayload(step));
    EXPECT_EQ(Entries(), remaining[i]) << "after step " << step;
    EXPECT_EQ(manager.Best()->step, best[i]) << "after step " << step;
  }
}

TEST_F(CheckpointTest, NewestIsNeverDeletedEvenWhenWorst) {
  // orbax#526: best-N retention deleted the checkpoint needed to resume. Here the newest is the worst by far.
  CheckpointManager manager(Options(1, 2));
  manager.Save(1, 0.1, WritePayload(1));
  manager.Save(2, 0.2, WritePayload(2));
  const SavedCheckpoint saved = manager.Save(3, 0.9, WritePayload(3));
  EXPECT_TRUE(saved.info.in_latest);
  EXPECT_FALSE(saved.info.in_best);
  EXPECT_THAT(saved.deleted, IsEmpty());
  EXPECT_THAT(Entries(), ElementsAre("step_00000001", "step_00000002", "step_00000003"));
  manager.Save(4, 0.8, WritePayload(4));  // 3 leaves `latest` and was never in `best`
  EXPECT_THAT(Entries(), ElementsAre("step_00000001", "step_00000002", "step_00000004"));
  EXPECT_EQ(manager.LoadLatest()->info.step, 4);
}

TEST_F(CheckpointTest, CheckpointJustSavedIsKeptWhenOlderThanNewest) {
  // Resuming from an older checkpoint (the newest was corrupt) saves steps below the newest one on disk.
  CheckpointManager manager(Options(1, 1));
  manager.Save(1, 0.1, WritePayload(1));
  manager.Save(5, 0.5, WritePayload(5));
  const SavedCheckpoint saved = manager.Save(3, 0.9, WritePayload(3));
  EXPECT_FALSE(saved.info.in_latest);
  EXPECT_FALSE(saved.info.in_best);
  EXPECT_THAT(saved.deleted, IsEmpty());
  EXPECT_THAT(Entries(), ElementsAre("step_00000001", "step_00000003", "step_00000005"));
}

TEST_F(CheckpointTest, ObjectivelessCheckpointsOnlyInLatest) {
  CheckpointManager manager(Options(1, 1));
  manager.Save(1, 0.1, WritePayload(1));
  const SavedCheckpoint second = manager.Save(2, std::nullopt, WritePayload(2));
  EXPECT_FALSE(second.info.in_best);
  manager.Save(3, std::nullopt, WritePayload(3));
  EXPECT_THAT(Entries(), ElementsAre("step_00000001", "step_00000003"));
  EXPECT_EQ(manager.Best()->step, 1);
  const SavedCheckpoint nan = manager.Save(4, std::numeric_limits<double>::quiet_NaN(), WritePayload(4));
  EXPECT_FALSE(nan.info.objective.has_value());
  EXPECT_FALSE(nan.info.in_best);
  EXPECT_THAT(Entries(), ElementsAre("step_00000001", "step_00000004"));
  EXPECT_TRUE(nlohmann::json::parse(ReadText(dir_ / "step_00000004" / "meta.json"))["objective"].is_null());
}

TEST_F(CheckpointTest, NoBestWithoutObjectives) {
  CheckpointManager manager(Options(2, 1));
  EXPECT_FALSE(manager.Best().has_value());
  manager.Save(1, std::nullopt, WritePayload(1));
  EXPECT_FALSE(manager.Best().has_value());
}

TEST_F(CheckpointTest, RankingsAreRebuiltByANewManager) {
  {
    CheckpointManager first(Options(2, 1));
    first.Save(1, 0.5, WritePayload(1));
    first.Save(2, 0.3, WritePayload(2));
    first.Save(3, 0.4, WritePayload(3));
  }
  EXPECT_THAT(Entries(), ElementsAre("step_00000002", "step_00000003"));
  CheckpointManager second(Options(2, 1));
  const std::vector<CheckpointInfo> list = second.List();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].objective, 0.3);
  EXPECT_TRUE(list[0].in_best);
  EXPECT_EQ(second.Best()->step, 2);
  second.Save(4, 0.35, WritePayload(4));
  const SavedCheckpoint saved = second.Save(5, 0.6, WritePayload(5));
  EXPECT_THAT(saved.deleted, ElementsAre(dir_ / "step_00000003"));
  EXPECT_THAT(Entries(), ElementsAre("step_00000002", "step_00000004", "step_00000005"));
  EXPECT_EQ(second.Best()->step, 2);
  EXPECT_EQ(second.LoadLatest()->info.step, 5);
}

TEST_F(CheckpointTest, OppositeDirectionOnRestartIsAnError) {
  { CheckpointManager(Options(2, 1, Direction::kMinimize)).Save(1, 0.5, WritePayload(1)); }
  try {
    CheckpointManager manager(Options(2, 1, Direction::kMaximize));
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("step_00000001"));
    EXPECT_THAT(e.what(), HasSubstr("minimize"));
  }
}

// Another trial's checkpoints in the same directory (two studies sharing folders) are never loaded, ranked or
// deleted, and never replaced by a save of the same step.
TEST_F(CheckpointTest, CheckpointsOfAnotherOwnerAreNeverLoadedOrDeleted) {
  const nlohmann::json study_a = {{"study", "a"}, {"study_uid", "aaaaaaaaaaaa"}, {"trial", 0}, {"seed", 1}};
  const nlohmann::json study_b = {{"study", "b"}, {"study_uid", "bbbbbbbbbbbb"}, {"trial", 0}, {"seed", 2}};
  CheckpointOptions options_b = Options(2, 0);
  options_b.owner = study_b;
  {
    CheckpointManager b(options_b);
    b.Save(10, 0.5, WritePayload(10));
    b.Save(20, 0.4, WritePayload(20));
  }
  EXPECT_EQ(nlohmann::json::parse(ReadText(dir_ / "step_00000020" / "meta.json"))["owner"], study_b);

  CheckpointOptions options_a = Options(1, 0);
  options_a.owner = study_a;
  ::testing::internal::CaptureStderr();
  CheckpointManager a(options_a);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(warnings, HasSubstr("belongs to study \"b\" (uid bbbbbbbbbbbb) trial 0, seed 2"));
  EXPECT_THAT(Steps(a.List()), IsEmpty());
  EXPECT_FALSE(a.LoadLatest().has_value());
  EXPECT_THROW(a.Load(20), Error);
  ASSERT_EQ(a.Foreign().size(), 2u);
  EXPECT_EQ(a.Foreign()[1].step, 20);
  // Retention with keep_latest 1 deletes only a's own older checkpoints.
  a.Save(5, 0.9, WritePayload(5));
  a.Save(30, 0.8, WritePayload(30));
  EXPECT_THAT(Entries(), ElementsAre("step_00000010", "step_00000020", "step_00000030"));
  try {
    a.Save(20, 0.1, WritePayload(20));
    FAIL() << "a checkpoint of another owner was replaced";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("holds a checkpoint of study \"b\""));
  }
  EXPECT_EQ(ReadText(dir_ / "step_00000020" / "model.bin"), ModelText(20));

  // A checkpoint written without an owner (format_version 1) is not this owner's either.
  { CheckpointManager(Options(10, 0)).Save(40, 0.5, WritePayload(40)); }
  EXPECT_EQ(CheckpointManager(options_a).Foreign().size(), 3u);
  // A manager without an owner takes every checkpoint as its own.
  EXPECT_EQ(Steps(CheckpointManager(Options(5, 0)).List()), (std::vector<std::int64_t>{10, 20, 30, 40}));
}

TEST_F(CheckpointTest, NewerFormatVersionIsAnError) {
  { CheckpointManager(Options(2, 1)).Save(1, 0.5, WritePayload(1)); }
  nlohmann::json meta = nlohmann::json::parse(ReadText(dir_ / "step_00000001" / "meta.json"));
  meta["format_version"] = CheckpointManager::kFormatVersion + 1;
  const std::string text = meta.dump(2) + "\n";
  WriteText(dir_ / "step_00000001" / "meta.json", text);
  WriteText(dir_ / "step_00000001" / "COMMITTED", Sha256Hex(text) + "\n");
  EXPECT_THROW(CheckpointManager(Options(2, 1)), Error);
}

TEST_F(CheckpointTest, SavingAStepAgainReplacesIt) {
  CheckpointManager manager(Options(2, 1));
  manager.Save(7, 0.5, WritePayload(7));
  manager.Save(7, 0.4, [](const fs::path& dir) { WriteText(dir / "model.bin", "second"); });
  EXPECT_THAT(Entries(), ElementsAre("step_00000007"));
  EXPECT_EQ(ReadText(dir_ / "step_00000007" / "model.bin"), "second");
  EXPECT_FALSE(fs::exists(dir_ / "step_00000007" / "optimizer"));
  const std::optional<LoadedCheckpoint> loaded = manager.LoadLatest();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(loaded->info.objective, 0.4);
  EXPECT_THAT(loaded->warnings, IsEmpty());
}

TEST_F(CheckpointTest, LargeStepsRoundTrip) {
  { CheckpointManager(Options(2, 1)).Save(1234567890, 0.5, WritePayload(1234567890)); }
  CheckpointManager manager(Options(2, 1));
  EXPECT_THAT(Steps(manager.List()), ElementsAre(1234567890));
}

TEST_F(CheckpointTest, InvalidOptionsAndPayloadsAreErrors) {
  EXPECT_THROW(CheckpointManager(Options(0, 1)), Error);
  EXPECT_THROW(CheckpointManager(Options(1, -1)), Error);
  EXPECT_THROW(CheckpointManager(CheckpointOptions{}), Error);
  CheckpointManager manager(Options(2, 1));
  EXPECT_THROW(manager.Save(-1, 0.5, WritePayload(1)), Error);
  EXPECT_THROW(manager.Save(1, 0.5, [](const fs::path& dir) { WriteText(dir / "meta.json", "{}"); }), Error);
  EXPECT_THAT(Entries(), IsEmpty());
}

}  // namespace
}  // namespace dltune
