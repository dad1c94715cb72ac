// Which of a trial's checkpoints to keep: the `keep_latest` newest (to resume from after a preemption) and the
// `keep_best` best by the objective (the playbook's retrospective optimal checkpoint selection). The rule only
// chooses; deleting the others is the caller's (the built-in trainer's CheckpointManager, or the worker for trials
// that leave their checkpoints to dltune).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "dltune/core/objective.h"

namespace dltune {

// How many checkpoints each pool keeps, and which way the objective is better.
struct CheckpointRetention {
  int keep_latest = 2;
  int keep_best = 1;
  Direction direction = Direction::kMinimize;
};

// A checkpoint as the rule sees it. Several may share a step (saved at different places).
struct RetentionCandidate {
  std::int64_t step = 0;
  std::optional<double> objective;  // none, or a non-finite one: never in the best pool
};

// Pool membership of each candidate, by its index in the list given to RetainCheckpoints.
struct RetainedCheckpoints {
  std::vector<bool> latest;
  std::vector<bool> best;
  bool Kept(std::size_t index) const { return latest[index] || best[index]; }
};

// Indices of the candidates with a finite objective, best first; ties: the earlier step first, then the one earlier
// in the list.
std::vector<std::size_t> RankByObjective(const std::vector<RetentionCandidate>& checkpoints, Direction direction);

// The `latest` pool: the keep_latest candidates of the highest steps (of one step, the one later in the list first);
// the `best` pool: the first keep_best of RankByObjective. Non-positive pool sizes keep none in that pool.
RetainedCheckpoints RetainCheckpoints(const std::vector<RetentionCandidate>& checkpoints,
                                      const CheckpointRetention& retention);

// The step of the newest checkpoint of a trial that manages its own (the built-in trainer) that its worker has
// recorded in the store, which the worker writes to this file of the trial directory (docs/trial-protocol.md). The
// trainer's retention keeps that checkpoint as well, and every newer one (the worker, behind, may record it next): a
// worker that dies takes the measurements it had not recorded yet with it, and the trial taken over resumes at or
// before the last recorded ones (DLTUNE_RESUME_MAX_STEP) — from that checkpoint when the trainer had saved more than
// its `latest` pool since. A new attempt's worker writes 0 until the trial says where it resumed (keep them all).
inline constexpr const char* kRecordedCheckpointFile = "recorded_checkpoint";
// Writes `step` to `file` (atomically). Throws IoError; the caller may ignore it (the file only keeps one more).
void WriteRecordedCheckpointStep(const std::filesystem::path& file, std::int64_t step);
// The step in `file`; nullopt without the file (a trial trained by hand) or with one that holds no step.
std::optional<std::int64_t> ReadRecordedCheckpointStep(const std::filesystem::path& file);

}  // namespace dltune
