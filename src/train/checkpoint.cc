#include "checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/checkpoint_retention.h"
#include "core/files.h"
#include "core/sha256.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;

constexpr const char* kMetaFile = "meta.json";
constexpr const char* kCommitFile = "COMMITTED";
constexpr const char* kTempPrefix = ".tmp-";
constexpr const char* kStepPrefix = "step_";
constexpr const char* kFormatName = "dltune-checkpoint";
constexpr std::size_t kReadChunk = 1 << 20;

std::atomic<std::uint64_t> temp_counter{0};

// A fresh name for a temporary entry of `dir`, unique within this process and across processes.
fs::path TempPath(const fs::path& dir, const std::string& what) {
  return dir / fmt::format("{}{}-{}-{}", kTempPrefix, what, static_cast<long>(::getpid()), temp_counter++);
}

[[noreturn]] void ThrowErrno(const std::string& what, const fs::path& path) {
  throw Error(fmt::format("checkpoint: {} {}: {}", what, path.string(), std::strerror(errno)));
}

// Flushes a file's or a directory's data and metadata to stable storage.
void FsyncPath(const fs::path& path, bool directory) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  if (fd < 0) ThrowErrno("cannot open", path);
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    ThrowErrno("cannot fsync", path);
  }
  ::close(fd);
}

// Creates (or truncates) `path` with `content` and fsyncs it.
void WriteFileSynced(const fs::path& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) ThrowErrno("cannot create", path);
  std::size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      errno = saved;
      ThrowErrno("cannot write", path);
    }
    written += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    ThrowErrno("cannot fsync", path);
  }
  if (::close(fd) != 0) ThrowErrno("cannot close", path);
}

struct FileDigest {
  std::string sha256;
  std::uintmax_t bytes = 0;
};

// SHA-256 and size of a file, or nullopt when it cannot be read.
std::optional<FileDigest> DigestFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  Sha256 hash;
  FileDigest digest;
  std::string buffer(kReadChunk, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const auto n = static_cast<std::size_t>(in.gcount());
    hash.Update(std::string_view(buffer.data(), n));
    digest.bytes += n;
  }
  if (in.bad()) return std::nullopt;
  digest.sha256 = hash.HexDigest();
  return digest;
}

// The step of a directory named exactly CheckpointDirName(step), or nullopt for any other name.
std::optional<std::int64_t> ParseDirName(const std::string& name) {
  const std::string prefix = kStepPrefix;
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  std::int64_t step = 0;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size();
  const auto [end, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || end != last || step < 0 || CheckpointDirName(step) != name) return std::nullopt;
  return step;
}

// Removes `path` recursively; returns the error text, empty on success.
std::string RemoveAll(const fs::path& path) {
  std::error_code ec;
  RemoveTree(path, ec);
  return ec ? ec.message() : std::string();
}

// The committed checkpoints (step -> objective) as the retention rule sees them, in ascending step order.
std::vector<RetentionCandidate> Candidates(const std::map<std::int64_t, std::optional<double>>& objectives) {
  std::vector<RetentionCandidate> candidates;
  candidates.reserve(objectives.size());
  for (const auto& [step, objective] : objectives) candidates.push_back({step, objective});
  return candidates;
}

// Steps of the checkpoints in each retention pool.
struct PoolSteps {
  std::set<std::int64_t> latest;
  std::set<std::int64_t> best;
};

PoolSteps Pools(const std::map<std::int64_t, std::optional<double>>& objectives, const CheckpointOptions& options) {
  const std::vector<RetentionCandidate> candidates = Candidates(objectives);
  const RetainedCheckpoints kept = RetainCheckpoints(
      candidates, {.keep_latest = options.keep_latest, .keep_best = options.keep_best, .direction = options.direction});
  PoolSteps pools;
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    if (kept.latest[i]) pools.latest.insert(candidates[i].step);
    if (kept.best[i]) pools.best.insert(candidates[i].step);
  }
  return pools;
}

// Parsed meta.json of a committed checkpoint.
struct Meta {
  int format_version = 0;
  std::int64_t step = 0;
  std::optional<double> objective;
  Direction direction = Direction::kMinimize;
  nlohmann::json owner;  // null when recorded without one (format_version 1)
  std::map<std::string, FileDigest> files;
};

// Reads and checks meta.json against the commit marker. Returns the meta, or sets `why` and returns nullopt.
std::optional<Meta> ReadMeta(const fs::path& checkpoint_dir, std::string& why) {
  const std::optional<std::string> marker = ReadFileIfReadable(checkpoint_dir / kCommitFile);
  if (!marker) {
    why = "no commit marker";
    return std::nullopt;
  }
  const std::optional<std::string> text = ReadFileIfReadable(checkpoint_dir / kMetaFile);
  if (!text) {
    why = "meta.json is missing or unreadable";
    return std::nullopt;
  }
  if (*marker != Sha256Hex(*text) + "\n") {
    why = "meta.json does not match the sha256 in the commit marker";
    return std::nullopt;
  }
  try {
    const nlohmann::json json = nlohmann::json::parse(*text);
    Meta meta;
    if (json.at("format").get<std::string>() != kFormatName) {
      why = "meta.json is not a dltune checkpoint";
      return std::nullopt;
    }
    meta.format_version = json.at("format_version").get<int>();
    meta.step = json.at("step").get<std::int64_t>();
    if (!json.at("objective").is_null()) meta.objective = json.at("objective").get<double>();
    // meta.json records the direction as `"minimize": true|false`.
    meta.direction = json.at("minimize").get<bool>() ? Direction::kMinimize : Direction::kMaximize;
    if (const auto owner = json.find("owner"); owner != json.end()) meta.owner = *owner;
    for (const auto& [name, file] : json.at("files").items()) {
      meta.files[name] = FileDigest{file.at("sha256").get<std::string>(), file.at("bytes").get<std::uintmax_t>()};
    }
    return meta;
  } catch (const nlohmann::json::exception& e) {
    why = fmt::format("meta.json is malformed ({})", e.what());
    return std::nullopt;
  }
}

}  // namespace

std::int64_t StepOfCheckpointDir(const std::filesystem::path& dir) {
  const std::string name = dir.filename().string();
  const auto underscore = name.rfind('_');
  try {
    return underscore == std::string::npos ? 0 : std::stoll(name.substr(underscore + 1));
  } catch (const std::exception&) {
    return 0;
  }
}

std::string CheckpointDirName(std::int64_t step) { return fmt::format("{}{:08d}", kStepPrefix, step); }

std::string DescribeCheckpointOwner(const nlohmann::json& owner) {
  if (owner.is_null()) return "no owner";
  if (owner.is_object() && owner.contains("study") && owner.contains("trial")) {
    return fmt::format("study {} (uid {}) trial {}, seed {}", owner.at("study").dump(), owner.value("study_uid", "?"),
                       owner.at("trial").dump(), owner.contains("seed") ? owner.at("seed").dump() : "?");
  }
  return owner.dump();
}

CheckpointManager::CheckpointManager(CheckpointOptions options) : options_(std::move(options)) {
  if (options_.dir.empty()) throw Error("checkpoint options: dir must not be empty");
  if (options_.keep_latest < 1) {
    throw Error(fmt::format("checkpoint options: keep_latest must be >= 1, got {}", options_.keep_latest));
  }
  if (options_.keep_best < 0) {
    throw Error(fmt::format("checkpoint options: keep_best must be >= 0, got {}", options_.keep_best));
  }
  dir_ = options_.dir;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_)) {
    throw IoError(fmt::format("checkpoint: cannot create directory {}: {}", dir_.string(),
                              ec ? ec.message() : "not a directory"));
  }
  fs::directory_iterator it(dir_, ec);
  if (ec) throw Error(fmt::format("checkpoint: cannot list {}: {}", dir_.string(), ec.message()));
  std::vector<fs::path> leftovers;
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kTempPrefix, 0) == 0) {
      leftovers.push_back(entry.path());
      continue;
    }
    const std::optional<std::int64_t> step = ParseDirName(name);
    if (!step || !entry.is_directory()) continue;
    std::string why;
    const std::optional<Meta> meta = ReadMeta(entry.path(), why);
    if (!meta) {
      Warn(fmt::format("checkpoint {} ignored: {}", entry.path().string(), why));
      continue;
    }
    if (meta->format_version > kFormatVersion) {
      throw Error(fmt::format("checkpoint {}: format_version {} is newer than this dltune reads ({})",
                              entry.path().string(), meta->format_version, kFormatVersion));
    }
    if (meta->step != *step) {
      Warn(fmt::format("checkpoint {} ignored: meta.json says step {}", entry.path().string(), meta->step));
      continue;
    }
    if (!options_.owner.is_null() && meta->owner != options_.owner) {
      foreign_.push_back({*step, entry.path(), DescribeCheckpointOwner(meta->owner)});
      Warn(fmt::format("checkpoint {} {}, not to {}: it is never loaded or deleted here", entry.path().string(),
                       meta->owner.is_null() ? "was saved without an owner (by an older dltune)"
                                             : "belongs to " + DescribeCheckpointOwner(meta->owner),
                       DescribeCheckpointOwner(options_.owner)));
      continue;
    }
    if (meta->objective && meta->direction != options_.direction) {
      throw Error(fmt::format("checkpoint {}: saved with an objective to {} but the manager is set to {} it",
                              entry.path().string(), DirectionName(meta->direction),
                              DirectionName(options_.direction)));
    }
    objectives_[*step] = meta->objective;
  }
  std::sort(foreign_.begin(), foreign_.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  for (const fs::path& path : leftovers) {
    const std::string error = RemoveAll(path);
    if (!error.empty()) Warn(fmt::format("checkpoint: cannot remove leftover {}: {}", path.string(), error));
  }
}

SavedCheckpoint CheckpointManager::Save(std::int64_t step, std::optional<double> objective,
                                        const std::function<void(const fs::path& dir)>& write) {
  if (step < 0) throw Error(fmt::format("checkpoint: step must be >= 0, got {} (in {})", step, dir_.string()));
  if (objective && !std::isfinite(*objective)) objective.reset();  // JSON has no NaN/inf; never the best either
  const std::string name = CheckpointDirName(step);
  for (const ForeignCheckpoint& foreign : foreign_) {
    if (foreign.step == step) {
      throw Error(fmt::format("checkpoint: {} holds a checkpoint of {}; it is not replaced by one of {}",
                              foreign.path.string(), foreign.owner, DescribeCheckpointOwner(options_.owner)));
    }
  }
  const fs::path temp = TempPath(dir_, name);
  std::map<std::string, std::string> digests;  // of the payload files
  std::error_code ec;
  if (!fs::create_directory(temp, ec) || ec) {
    throw IoError(fmt::format("checkpoint: cannot create {}: {}", temp.string(), ec ? ec.message() : "exists"));
  }
  try {
    write(temp);

    // Checksum and fsync the payload, deepest entries first so each directory is synced after its content.
    nlohmann::json files = nlohmann::json::object();
    std::vector<fs::path> directories;
    for (auto it = fs::recursive_directory_iterator(temp); it != fs::recursive_directory_iterator(); ++it) {
      const fs::path& path = it->path();
      const std::string relative = path.lexically_relative(temp).generic_string();
      if (it->is_symlink()) throw Error(fmt::format("checkpoint: payload {} is a symlink", path.string()));
      if (it->is_directory()) {
        directories.push_back(path);
        continue;
      }
      if (!it->is_regular_file()) throw Error(fmt::format("checkpoint: payload {} is not a file", path.string()));
      if (relative == kMetaFile || relative == kCommitFile) {
        throw Error(fmt::format("checkpoint: payload may not contain {} ({})", relative, path.string()));
      }
      FsyncPath(path, false);
      const std::optional<FileDigest> digest = DigestFile(path);
      if (!digest) throw IoError(fmt::format("checkpoint: cannot read {}", path.string()));
      files[relative] = {{"sha256", digest->sha256}, {"bytes", digest->bytes}};
      digests[relative] = digest->sha256;
    }
    for (auto dir = directories.rbegin(); dir != directories.rend(); ++dir) FsyncPath(*dir, true);

    // Pool membership as it will be once this checkpoint is committed (recorded for people reading meta.json).
    std::map<std::int64_t, std::optional<double>> after = objectives_;
    after[step] = objective;
    const PoolSteps pools_after = Pools(after, options_);
    nlohmann::json pools = nlohmann::json::array();
    if (pools_after.latest.contains(step)) pools.push_back("latest");
    if (pools_after.best.contains(step)) pools.push_back("best");

    nlohmann::json meta = {{"format", kFormatName},
                           {"format_version", kFormatVersion},
                           {"step", step},
                           {"objective", objective ? nlohmann::json(*objective) : nlohmann::json(nullptr)},
                           {"minimize", options_.direction == Direction::kMinimize},
                           {"owner", options_.owner},
                           {"pools", pools},
                           {"files", files}};
    const std::string meta_text = meta.dump(2) + "\n";
    WriteFileSynced(temp / kMetaFile, meta_text);
    WriteFileSynced(temp / kCommitFile, Sha256Hex(meta_text) + "\n");
    FsyncPath(temp, true);
  } catch (...) {
    RemoveAll(temp);
    throw;
  }

  // Publish: rename into place (moving aside a checkpoint saved before at the same step), then sync the parent.
  const fs::path final_path = dir_ / name;
  fs::path replaced;
  if (fs::exists(final_path, ec)) {
    replaced = TempPath(dir_, "replaced-" + name);
    fs::rename(final_path, replaced, ec);
    if (ec) {
      RemoveAll(temp);
      throw Error(fmt::format("checkpoint: cannot move aside {}: {}", final_path.string(), ec.message()));
    }
  }
  fs::rename(temp, final_path, ec);
  if (ec) {
    RemoveAll(temp);
    throw Error(
        fmt::format("checkpoint: cannot rename {} to {}: {}", temp.string(), final_path.string(), ec.message()));
  }
  FsyncPath(dir_, true);
  if (!replaced.empty()) RemoveAll(replaced);
  objectives_[step] = objective;

  SavedCheckpoint saved;
  saved.deleted = ApplyRetention(step);
  saved.sha256 = std::move(digests);
  saved.info = Describe(step);
  return saved;
}

std::vector<fs::path> CheckpointManager::ApplyRetention(std::int64_t keep_step) {
  const auto [latest, best] = Pools(objectives_, options_);
  // The newest one the worker has recorded, if it says so: a trial taken over resumes from it. And every newer one:
  // the worker may be behind, and record one of them next (a record whose files are gone leaves nothing to resume).
  const std::optional<std::int64_t> recorded =
      options_.recorded_step_file.empty() ? std::nullopt : ReadRecordedCheckpointStep(options_.recorded_step_file);
  std::vector<fs::path> deleted;
  for (auto it = objectives_.begin(); it != objectives_.end();) {
    const std::int64_t step = it->first;
    if (step == keep_step || latest.contains(step) || best.contains(step) || (recorded && step >= *recorded)) {
      ++it;
      continue;
    }
    const fs::path path = dir_ / CheckpointDirName(step);
    // Rename first so that a crash mid-deletion leaves a temp directory (cleaned at start-up), not a torn checkpoint.
    const fs::path doomed = TempPath(dir_, "deleted-" + CheckpointDirName(step));
    std::error_code ec;
    fs::rename(path, doomed, ec);
    if (ec) {
      Warn(fmt::format("checkpoint: retention cannot remove {}: {}", path.string(), ec.message()));
      ++it;
      continue;
    }
    const std::string error = RemoveAll(doomed);
    if (!error.empty()) Warn(fmt::format("checkpoint: cannot remove {}: {}", doomed.string(), error));
    deleted.push_back(path);
    it = objectives_.erase(it);
  }
  if (!deleted.empty()) FsyncPath(dir_, true);
  return deleted;
}

std::string CheckpointManager::Verify(std::int64_t step) const {
  const fs::path path = dir_ / CheckpointDirName(step);
  std::string why;
  const std::optional<Meta> meta = ReadMeta(path, why);
  if (!meta) return why;
  for (const auto& [name, expected] : meta->files) {
    const std::optional<FileDigest> actual = DigestFile(path / name);
    if (!actual) return fmt::format("{} is missing or unreadable", name);
    if (actual->bytes != expected.bytes) {
      return fmt::format("{} has {} bytes, meta.json says {}", name, actual->bytes, expected.bytes);
    }
    if (actual->sha256 != expected.sha256) return fmt::format("{} does not match its sha256 checksum", name);
  }
  return {};
}

std::optional<LoadedCheckpoint> CheckpointManager::LoadLatest() {
  std::vector<std::string> warnings;
  for (auto it = objectives_.rbegin(); it != objectives_.rend(); ++it) {
    const std::string why = Verify(it->first);
    if (why.empty()) return LoadedCheckpoint{Describe(it->first), std::move(warnings)};
    const std::string warning = fmt::format("checkpoint {} is corrupt ({}); falling back to an older checkpoint",
                                            (dir_ / CheckpointDirName(it->first)).string(), why);
    Warn(warning);
    warnings.push_back(warning);
  }
  return std::nullopt;
}

LoadedCheckpoint CheckpointManager::Load(std::int64_t step) {
  if (!objectives_.contains(step)) {
    throw Error(fmt::format("checkpoint: no committed checkpoint of step {} in {}", step, dir_.string()));
  }
  const std::string why = Verify(step);
  if (!why.empty()) {
    throw CorruptError(fmt::format("checkpoint {} is corrupt: {}", (dir_ / CheckpointDirName(step)).string(), why));
  }
  return LoadedCheckpoint{Describe(step), {}};
}

CheckpointInfo CheckpointManager::Describe(std::int64_t step) const {
  CheckpointInfo info;
  info.step = step;
  info.objective = objectives_.at(step);
  info.path = dir_ / CheckpointDirName(step);
  const PoolSteps pools = Pools(objectives_, options_);
  info.in_latest = pools.latest.contains(step);
  info.in_best = pools.best.contains(step);
  return info;
}

std::vector<CheckpointInfo> CheckpointManager::List() const {
  const auto [latest, best] = Pools(objectives_, options_);
  std::vector<CheckpointInfo> infos;
  for (const auto& [step, objective] : objectives_) {
    infos.push_back(
        CheckpointInfo{step, objective, dir_ / CheckpointDirName(step), latest.contains(step), best.contains(step)});
  }
  return infos;
}

std::optional<CheckpointInfo> CheckpointManager::Best() const {
  const std::vector<RetentionCandidate> candidates = Candidates(objectives_);
  const std::vector<std::size_t> ranked = RankByObjective(candidates, options_.direction);
  if (ranked.empty()) return std::nullopt;
  return Describe(candidates[ranked.front()].step);
}

void CheckpointManager::Warn(const std::string& message) {
  if (!warned_.insert(message).second) return;
  std::cerr << "dltune: warning: " << message << '\n';
}

std::future<SavedCheckpoint> SaveStateInBackground(CheckpointManager& checkpoints, std::int64_t step,
                                                   std::optional<double> objective, std::string state) {
  return SaveStateInBackground(checkpoints, step, objective,
                               [state = std::move(state)]() mutable { return std::move(state); });
}

std::future<SavedCheckpoint> SaveStateInBackground(CheckpointManager& checkpoints, std::int64_t step,
                                                   std::optional<double> objective,
                                                   std::function<std::string()> state) {
  return std::async(std::launch::async, [&checkpoints, step, objective, state = std::move(state)] {
    const std::string bytes = state();
    return checkpoints.Save(step, objective, [&](const std::filesystem::path& dir) {
      WriteFileAtomically(dir / "state.pt", bytes, /*sync=*/false);  // Save syncs its payload
    });
  });
}

std::vector<CheckpointEvent> CheckpointEvents(const SavedCheckpoint& saved) {
  const CheckpointInfo& info = saved.info;
  std::vector<CheckpointEvent> events = {
      {info.step, info.path.string(), info.objective, "sha256:" + saved.sha256.at("state.pt"), info.in_best, false}};
  for (const auto& removed : saved.deleted) {
    events.push_back({StepOfCheckpointDir(removed), removed.string(), std::nullopt, "", false, true});
  }
  return events;
}

}  // namespace dltune
