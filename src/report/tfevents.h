// TensorBoard event files: every trial writes its scalars (training loss, learning rate, gradient norm, evaluation
// metrics) as a tfevents file in its trial directory, so `tensorboard --logdir runs/<study>` shows them.
// docs/tensorboard.md describes the file and the tags dltune writes.
//
// Format: a sequence of TFRecords, each
//   uint64 length (little-endian), uint32 masked CRC-32C of those 8 bytes, `length` bytes of data,
//   uint32 masked CRC-32C of the data,
// whose data is a serialized tensorflow.Event protobuf. The first record is Event{wall_time, file_version:
// "brain.Event:2"}; each scalar is Event{wall_time, step, summary{value{tag, simple_value}}}. The protobuf is
// encoded by hand (it is five fields); tfevents.cc names the .proto files the field numbers were checked against.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dltune/core/error.h"
#include "dltune/store/store.h"

namespace dltune {

// The file_version of the first Event of every event file TensorBoard reads today.
inline constexpr std::string_view kTfEventsFileVersion = "brain.Event:2";

// The TensorBoard tag of evaluation metric `metric` on split `split`: "<split>/<metric>" ("valid/error_rate").
std::string TfEventsEvalTag(std::string_view split, std::string_view metric);

// Appends scalars to a new TensorBoard event file.
//
// - File: <dir>/events.out.tfevents.<unix seconds>.<hostname>, TensorBoard's own naming; each writer creates a new
//   file (never appends to or overwrites an old one), which is how TensorBoard expects a restarted process to
//   continue a run. If that name exists already (two writers in one second), ".1", ".2", ... is appended.
// - Durability: records are buffered; Flush() hands them to the operating system (TensorBoard then sees them).
//   Nothing is fsync'ed: a machine crash may lose the tail, and ReadTfEvents then reports a truncated record.
// - Thread safety: none. One writer per file, used by one thread at a time.
// - Errors: creating or writing the file throws dltune::Error naming the file.
class TfEventsWriter {
 public:
  // Creates the file in `dir` (created if missing) and writes the file_version Event stamped `wall_time`
  // (seconds since the Unix epoch; also names the file).
  TfEventsWriter(const std::filesystem::path& dir, double wall_time);
  // The same, stamped with the current time.
  explicit TfEventsWriter(const std::filesystem::path& dir);

  TfEventsWriter(TfEventsWriter&&) noexcept = default;
  TfEventsWriter& operator=(TfEventsWriter&&) noexcept = default;
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  // Flushes and closes the file; errors are ignored here (call Close() to see them).
  ~TfEventsWriter();

  // Writes Event{wall_time, step, summary{value{tag, simple_value: value}}}. TensorBoard's simple_value is a
  // float: `value` is rounded to the nearest float (NaN and infinities are kept).
  void AddScalar(std::string_view tag, std::int64_t step, double value, double wall_time);

  // The scalars of one training step that are present: train/loss, train/learning_rate, train/grad_norm.
  void AddTrainMeasurement(const TrainMeasurement& train, double wall_time);
  // One evaluation value, tagged TfEventsEvalTag(split, metric).
  void AddEvalMeasurement(const EvalMeasurement& eval, double wall_time);

  // Hands the buffered records to the operating system.
  void Flush();
  // Flushes and closes the file; later calls of the Add functions and Flush throw. Closing twice is a no-op.
  void Close();

  // The file being written.
  const std::filesystem::path& path() const { return path_; }

 private:
  struct FileCloser {
    void operator()(std::FILE* file) const;
  };

  void WriteRecord(std::string_view data);

  std::filesystem::path path_;
  std::unique_ptr<std::FILE, FileCloser> file_;
};

// One scalar of an Event's summary.
struct TfScalar {
  std::string tag;
  float value = 0;
};

// An Event as ReadTfEvents decodes it. Fields it does not know (graphs, images, tensor summaries, ...) are skipped.
struct TfEvent {
  double wall_time = 0;
  std::int64_t step = 0;
  std::string file_version;       // empty unless this is a file_version Event
  std::vector<TfScalar> scalars;  // the summary's simple_value entries, in order
};

// Reads a whole event file, for tests and tools: checks the framing and both CRCs of every record and decodes the
// Events. Throws dltune::Error naming the file and the record (counting from 0; the file_version Event is record 0)
// on a CRC mismatch, a truncated record or undecodable protobuf, and naming the file when it cannot be read.
std::vector<TfEvent> ReadTfEvents(const std::filesystem::path& path);

}  // namespace dltune
