#include "run/trial_sink.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/files.h"

namespace dltune {
namespace {

// Removes the checkpoint at `path` when it really lies in `trial_dir`: the directories on its way are resolved
// through symbolic links first, so that a link never leads retention out of the trial directory (or onto dltune's
// own files in it), and a checkpoint that is itself a link loses the link, not what it points to. False when it
// lies elsewhere: nothing is removed.
bool RemoveInsideTrialDirectory(const std::filesystem::path& trial_dir, const std::filesystem::path& path) {
  std::error_code error;
  const std::filesystem::path real_dir = std::filesystem::canonical(trial_dir, error);
  if (error) return false;
  const std::filesystem::path real_parent = std::filesystem::weakly_canonical(path.parent_path(), error);
  if (error || !path.has_filename()) return false;
  const std::filesystem::path real = real_parent / path.filename();
  const std::filesystem::path inside = real.lexically_relative(real_dir);
  if (inside.empty() || *inside.begin() == "..") return false;
  try {
    CheckpointPathOf(real_dir, real.string());
  } catch (const ProtocolError&) {
    return false;
  }
  RemoveTree(real, error);
  return true;
}

// Whether `inner` lies strictly below `outer` (both normalized).
bool Holds(const std::filesystem::path& outer, const std::filesystem::path& inner) {
  const std::filesystem::path below = inner.lexically_relative(outer);
  return !below.empty() && below != "." && *below.begin() != "..";
}

}  // namespace

TrialSink::TrialSink(ActiveTrial& trial, TrialProgress& progress, std::filesystem::path trial_dir,
                     const CheckpointRetention& retention, const std::vector<CheckpointRecord>& recorded,
                     std::int64_t recorded_evaluation_step, TrialSinkHooks hooks)
    : trial_(trial),
      recorded_evaluation_step_(recorded_evaluation_step),
      progress_(progress),
      trial_dir_(std::move(trial_dir)),
      retention_(retention),
      hooks_(std::move(hooks)),
      last_written_at_(-std::numeric_limits<double>::infinity()) {
  for (const auto& checkpoint : recorded) {
    if (!checkpoint.deleted)
      checkpoints_.push_back({checkpoint.id, checkpoint.step, checkpoint.objective, checkpoint.path});
  }
  tensorboard_.emplace(trial_dir_);
  // A trial that keeps its checkpoints: until it says where this attempt resumed, it keeps every one it has.
  if (std::filesystem::exists(trial_dir_ / kRecordedCheckpointFile)) TellRecorded(0);
}

std::int64_t TrialSink::ResumeLimit() const {
  std::int64_t limit = std::max<std::int64_t>(0, recorded_evaluation_step_);
  for (const auto& checkpoint : checkpoints_) limit = std::max(limit, checkpoint.step);
  return limit;
}

void TrialSink::Feed(std::string_view bytes, bool at_eof) {
  if (!protocol_error_.empty() || lease_lost_) return;  // what it writes now is not read, nor kept
  reader_.Feed(bytes);
  try {
    while (auto line = reader_.Next(at_eof)) Handle(*line);
  } catch (const LeaseLostError& e) {
    lease_lost_ = true;
    hooks_.lease_lost(e.what());
  } catch (const StoreUnavailableError&) {
    throw;  // not the trial's doing: the loop waits for the store (what the trial reported is kept to be written)
  } catch (const Error& e) {
    protocol_error_ = e.what();  // ProtocolError, or a rule ActiveTrial enforces (steps must increase)
    hooks_.protocol_broken();
  }
}

void TrialSink::Handle(const ReportLine& line) {
  if (line.start) {
    HandleStart(*line.start);
  } else if (line.train) {
    trial_.ReportTrain(*line.train);
    ToTensorBoard([&](TfEventsWriter& events) { events.AddTrainMeasurement(*line.train, WallSeconds()); });
    progress_.step = line.train->step;
  } else if (line.eval) {
    HandleEval(*line.eval);
  } else if (line.checkpoint) {
    HandleCheckpoint(*line.checkpoint);
  } else if (line.end) {
    end_ = line.end;
  } else if (line.timing) {
    trial_.AddTime(line.timing->seconds);
  } else if (line.warm) {
    warm_offered_ = true;
    warm_program_ = line.warm_program;
    warm_reuse_ = line.warm_reuse;
  } else if (line.runtime) {
    trial_.SetRuntime(*line.runtime);
  }
}

void TrialSink::HandleStart(const ReportStart& start) {
  trial_.AddTime({{"startup", WallSeconds() - spawned_at_}});
  start_seen_ = true;
  trial_.Begin(start.step);
  manages_checkpoints_ = start.manages_checkpoints;
  progress_.step = start.step;
  // Checkpoints after the resume point belong to a future that will be trained again (Begin forgot their records).
  std::erase_if(checkpoints_, [&](const KeptCheckpoint& c) { return c.step > start.step; });
  if (manages_checkpoints_) {
    std::int64_t newest = 0;
    for (const auto& checkpoint : checkpoints_) newest = std::max(newest, checkpoint.step);
    TellRecorded(newest);
  }
}

void TrialSink::HandleEval(const ReportEval& eval) {
  trial_.ReportEval(eval.step, eval.split, eval.metrics, eval.examples);
  ToTensorBoard([&](TfEventsWriter& events) {
    for (const auto& [metric, value] : eval.metrics) {
      events.AddEvalMeasurement({.step = eval.step, .split = eval.split, .metric = metric, .value = value},
                                WallSeconds());
    }
    events.Flush();
  });
  progress_.step = std::max(progress_.step, eval.step);
  progress_.objective = trial_.final_value();
  progress_.best = trial_.best_value();
  last_written_at_ = WallSeconds();
}

// A write that fails (a full disk) is the machine's fault, not the trial's: the trial is asked to stop (it
// checkpoints if it can) and recorded as stopped, to resume when run again; what it reports meanwhile is still
// recorded.
void TrialSink::ToTensorBoard(const std::function<void(TfEventsWriter&)>& write) {
  if (!tensorboard_) return;
  try {
    write(*tensorboard_);
  } catch (const IoError& e) {
    tensorboard_.reset();
    disk_fault_ = e.what();
    hooks_.disk_fault(e.what());
  }
}

void TrialSink::HandleCheckpoint(const ReportCheckpoint& reported) {
  const std::filesystem::path path = CheckpointPathOf(trial_dir_, reported.path);  // or ProtocolError
  // A checkpoint that holds another kept one, or lies in one, would take it along when retired.
  for (const auto& other : checkpoints_) {
    if (reported.deleted || !(Holds(path, other.path) || Holds(other.path, path))) continue;
    throw ProtocolError(fmt::format(
        "checkpoint path '{}' {} the checkpoint of step {} recorded at {}: a checkpoint is a file or directory of "
        "its own, apart from the trial's other checkpoints",
        reported.path, Holds(path, other.path) ? "holds" : "lies inside", other.step, other.path.string()));
  }
  // A checkpoint saved again at the same place replaces the files of the one recorded there, and a deletion
  // removes them: either way, every record of that place is done with.
  for (auto it = checkpoints_.begin(); it != checkpoints_.end();) {
    if (it->path != path) {
      ++it;
      continue;
    }
    trial_.MarkCheckpointDeleted(it->id);
    it = checkpoints_.erase(it);
  }
  if (reported.deleted) return;
  const std::int64_t id =
      trial_.ReportCheckpoint({.step = reported.step,
                               .path = path.string(),
                               .objective = reported.objective,
                               .checksum = reported.checksum,
                               .pool = reported.best ? CheckpointPool::kBest : CheckpointPool::kLatest});
  checkpoints_.push_back({id, reported.step, reported.objective, path});
  if (!manages_checkpoints_) {
    ApplyRetention();
  } else if (reported.step >= recorded_step_told_) {
    TellRecorded(reported.step);
  }
}

void TrialSink::TellRecorded(std::int64_t step) {
  // The trial's retention keeps this one and the newer ones until a newer one is recorded
  // (core/checkpoint_retention.h).
  try {
    WriteRecordedCheckpointStep(trial_dir_ / kRecordedCheckpointFile, step);
    recorded_step_told_ = step;
  } catch (const Error&) {
    // Not told: the trial keeps its usual pools, and a takeover may start further back.
  }
}

void TrialSink::ApplyRetention() {
  std::vector<RetentionCandidate> candidates;
  for (const auto& c : checkpoints_) candidates.push_back({c.step, c.objective});
  const RetainedCheckpoints kept = RetainCheckpoints(candidates, retention_);
  std::size_t index = 0;  // of the checkpoint `it` points to, in `candidates`
  for (auto it = checkpoints_.begin(); it != checkpoints_.end(); ++index) {
    if (kept.Kept(index) || !RemoveInsideTrialDirectory(trial_dir_, it->path)) {
      ++it;
      continue;
    }
    trial_.MarkCheckpointDeleted(it->id);
    it = checkpoints_.erase(it);
  }
}

void TrialSink::AccountProcessTime(double now) {
  const double lifetime = now - spawned_at_;
  if (!start_seen_) {
    trial_.AddTime({{"startup", lifetime}});
    return;
  }
  double accounted = 0;
  for (const char* phase : {"startup", "data_load", "train", "evaluation", "checkpoint"}) {
    const auto it = trial_.time_split().find(phase);
    if (it != trial_.time_split().end()) accounted += it->second;
  }
  trial_.AddTime({{"other", std::max(0.0, lifetime - accounted)}});
}

}  // namespace dltune
