// A trial's checkpoints on disk: atomic saves, checksums, and two retention pools — `latest` (to resume after a
// preemption) and `best` (the playbook's retrospective optimal checkpoint selection). The layout, the meta.json
// fields, the commit protocol and the recovery rules are specified in docs/checkpoint-layout.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/objective.h"
#include "dltune/train/training_reports.h"

namespace dltune {

// How a CheckpointManager names, keeps and ranks checkpoints. Validated by the CheckpointManager constructor.
struct CheckpointOptions {
  // The trial's checkpoint directory; created (with parents) if missing. Must not be empty.
  std::string dir;
  // Size of the `latest` pool: the newest keep_latest checkpoints by step. Must be >= 1.
  int keep_latest = 2;
  // Size of the `best` pool: the keep_best checkpoints with the best objective. Must be >= 0.
  int keep_best = 1;
  // Direction of the objective: minimize for a loss or an error rate, maximize for an accuracy.
  Direction direction = Direction::kMinimize;
  // Whose checkpoints these are (a JSON object: for a study's trial its study, study uid, trial number, seed and
  // params hash), recorded in every meta.json. A checkpoint recorded with another owner, or none, is foreign: never
  // listed, loaded, ranked or deleted. null: checkpoints of any owner are this manager's.
  nlohmann::json owner;
  // Where the worker says the step of the newest checkpoint it has recorded (core/checkpoint_retention.h): retention
  // keeps that one too, and every newer one (the worker may record it next). "": none (a trial trained by hand).
  std::string recorded_step_file;
};

// A committed checkpoint in the directory that belongs to another owner.
struct ForeignCheckpoint {
  std::int64_t step = 0;
  std::filesystem::path path;
  std::string owner;  // its recorded owner, for messages ("study 'b' (uid 3f9a2c1e07b4) trial 3, seed 7")
};

// One committed checkpoint as the manager knows it from its meta.json (the payload is not read).
struct CheckpointInfo {
  std::int64_t step = 0;
  // The objective it was saved with; nullopt when saved without one (then it can only be in `latest`).
  std::optional<double> objective;
  // Its directory, `<dir>/step_<step zero-padded to 8 digits>`.
  std::filesystem::path path;
  // Membership in the pools under the current options and the current set of checkpoints.
  bool in_latest = false;
  bool in_best = false;
};

// What Save() did.
struct SavedCheckpoint {
  // The checkpoint just committed (always kept: it is the newest).
  CheckpointInfo info;
  // Checkpoint directories retention removed after the commit, in ascending step order.
  std::vector<std::filesystem::path> deleted;
  // The SHA-256 (hex) of each payload file, by its path relative to the checkpoint, as meta.json records it.
  std::map<std::string, std::string> sha256;
};

// A committed checkpoint whose payload checksums verified; read the payload files from info.path.
struct LoadedCheckpoint {
  CheckpointInfo info;
  // One line per newer checkpoint that was skipped because it failed verification (empty when none was).
  std::vector<std::string> warnings;
};

// Owns the checkpoints of one trial directory. One manager per directory at a time (the run module guarantees one
// process per trial); two managers writing the same directory concurrently are not supported. Not thread-safe.
//
// Retention never deletes the checkpoint needed to resume: a checkpoint is removed only when it is in neither pool,
// and the newest checkpoint is always in `latest`. Checkpoints without a (finite) objective are never in `best`.
class CheckpointManager {
 public:
  // The format_version this code writes and the newest it reads (2 added `owner`).
  static constexpr int kFormatVersion = 2;

  // Validates `options`, creates the directory, removes leftover `.tmp-*` directories of interrupted saves, and
  // rebuilds both pools' rankings from the meta.json of every committed checkpoint (so rankings survive restarts).
  // Directories named like checkpoints but without a valid commit marker or readable meta.json are ignored (never
  // listed, loaded or deleted) with a warning on stderr. Throws Error on invalid options, an unusable directory, a
  // checkpoint saved with the opposite objective direction, or one written by a newer format_version. Checkpoints of
  // another owner (see CheckpointOptions::owner) are left alone, listed by Foreign(), with a warning on stderr.
  explicit CheckpointManager(CheckpointOptions options);

  // Saves the checkpoint of `step` (>= 0). `write` must create the payload files inside the directory it is given
  // (any names except meta.json and COMMITTED; subdirectories allowed). Atomic: the payload is written into a
  // temporary directory inside `dir`, every file is fsynced, meta.json with the per-file sha256 is written, then the
  // COMMITTED marker, then the directory is renamed to its final name and `dir` is fsynced — a crash at any point
  // leaves either the old state or the complete new checkpoint. A checkpoint already saved at `step` is replaced.
  // A non-finite objective (NaN, inf: a diverged trial) is recorded as no objective. Then applies retention, which
  // never deletes the checkpoint just saved. If `write` throws, the temporary directory is removed and the exception
  // propagates unchanged; I/O failures, a payload holding meta.json, COMMITTED or a symlink, and a step whose directory
  // holds another owner's checkpoint throw Error.
  SavedCheckpoint Save(std::int64_t step, std::optional<double> objective,
                       const std::function<void(const std::filesystem::path& dir)>& write);

  // The newest committed checkpoint whose files match their checksums, or nullopt when there is none. A newer one
  // that fails verification is skipped with a warning (in the result, and printed to stderr once per checkpoint per
  // manager); it stays on disk. Throws Error only on I/O failures of the directory itself.
  std::optional<LoadedCheckpoint> LoadLatest();

  // The committed checkpoint of `step`, verified. Throws Error when there is none or it fails verification.
  LoadedCheckpoint Load(std::int64_t step);

  // Every committed checkpoint, in ascending step order, with its current pool membership.
  std::vector<CheckpointInfo> List() const;
  // The checkpoint with the best objective (ties: the earliest step), or nullopt when none has an objective.
  std::optional<CheckpointInfo> Best() const;
  // Committed checkpoints of another owner, in ascending step order.
  const std::vector<ForeignCheckpoint>& Foreign() const { return foreign_; }

  const CheckpointOptions& options() const { return options_; }

 private:
  CheckpointInfo Describe(std::int64_t step) const;
  // Empty when the checkpoint of `step` verifies, else why not (one line).
  std::string Verify(std::int64_t step) const;
  // Deletes every checkpoint in neither pool except `keep_step`, the one the worker recorded last
  // (options.recorded_step_file) and the newer ones; returns the deleted directories.
  std::vector<std::filesystem::path> ApplyRetention(std::int64_t keep_step);
  // Prints `message` to stderr unless it was printed before by this manager.
  void Warn(const std::string& message);

  CheckpointOptions options_;
  std::filesystem::path dir_;
  std::map<std::int64_t, std::optional<double>> objectives_;  // committed checkpoints: step -> objective
  std::vector<ForeignCheckpoint> foreign_;
  std::set<std::string> warned_;
};

// The directory name of the checkpoint of `step`: "step_00000123" (at least 8 digits, more when needed).
std::string CheckpointDirName(std::int64_t step);
// The step in a checkpoint directory's name (step_00001200 -> 1200); 0 if it has none.
std::int64_t StepOfCheckpointDir(const std::filesystem::path& dir);

// A trainer's checkpoint written off the training thread: `state` (state.pt's bytes, taken on the training thread)
// saved through `checkpoints` (written, synced, older ones retired) on a thread of its own. `checkpoints` must
// outlive the future, and take no other Save until it is ready.
std::future<SavedCheckpoint> SaveStateInBackground(CheckpointManager& checkpoints, std::int64_t step,
                                                   std::optional<double> objective, std::string state);
// The same, with state.pt's bytes taken on that thread too, by `state` (what it reads must not change until the
// future is ready).
std::future<SavedCheckpoint> SaveStateInBackground(CheckpointManager& checkpoints, std::int64_t step,
                                                   std::optional<double> objective, std::function<std::string()> state);
// A saved checkpoint as the trainers' callbacks hear of it: it, then each checkpoint retention removed.
std::vector<CheckpointEvent> CheckpointEvents(const SavedCheckpoint& saved);

// A checkpoint owner for messages: "study 'b' (uid 3f9a2c1e07b4) trial 3, seed 7", or its JSON; "no owner" for null.
std::string DescribeCheckpointOwner(const nlohmann::json& owner);

}  // namespace dltune
