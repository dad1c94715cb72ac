// The report lines of the trial protocol (docs/trial-protocol.md): parsing what a trial program writes, and writing
// it from C++ (the built-in trainer's process speaks the same protocol as any external program).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dltune/core/error.h"
#include "dltune/store/store.h"

namespace dltune {

inline constexpr int kTrialProtocolVersion = 1;
// A trial that stopped with a checkpoint and can be resumed exits with kExitStopped (dltune/core/error.h).

// A report line that breaks the protocol; the message names the line number.
class ProtocolError : public Error {
 public:
  explicit ProtocolError(const std::string& message) : Error(message, ErrorKind::kCorrupt) {}
};

struct ReportStart {
  std::int64_t step = 0;
  bool manages_checkpoints = false;
};
struct ReportEval {
  std::int64_t step = 0;
  std::string split;
  std::map<std::string, double> metrics;
  std::int64_t examples = 0;
};
struct ReportCheckpoint {
  std::int64_t step = 0;
  std::string path;
  std::optional<double> objective;
  std::string checksum;
  bool best = false;
  bool deleted = false;
};
// How the program says it ended. `stopped` is the in-band form of exit status 75: a launcher such as torchrun turns
// its workers' 75 into a failure of its own, so the line, not the exit status, tells dltune the trial stopped.
enum class EndState { kCompleted, kInfeasible, kStopped };
struct ReportEnd {
  EndState state = EndState::kCompleted;
  std::string reason;
  std::optional<std::int64_t> step;  // a stopped trial's last step (optional)
};
// Where the program's time went, in seconds by phase (TimeSplit's: data_load, train, data_wait, evaluation,
// checkpoint; other names are kept as they are). Optional; sent before the end line (or before stopping).
struct ReportTiming {
  TimeSplit seconds;
};

// One parsed line; exactly one member is set, none for a type this version does not know (ignored by design).
struct ReportLine {
  std::optional<ReportStart> start;
  std::optional<TrainMeasurement> train;
  std::optional<ReportEval> eval;
  std::optional<ReportCheckpoint> checkpoint;
  std::optional<ReportEnd> end;
  std::optional<ReportTiming> timing;
  // {"type": "warm", "program": PATH}: the program answers DLTUNE_WARM_OFFER, and can serve the study's next trials
  // warm (docs/trial-protocol.md, "Warm trial processes (Python programs)"). Not a measurement: start may follow it.
  // `warm_program`: the file it runs (its script, or its -m module's), when it says; empty otherwise.
  // `warm_reuse` ("reuse": true): its server runs the trials in its own process, one at a time.
  bool warm = false;
  std::string warm_program;
  bool warm_reuse = false;
  // {"type": "runtime", "runtime": {"python": "3.11.2", "torch": "2.1.0"}}: the versions of the program's own
  // runtime, by name (docs/trial-protocol.md, "runtime"). Not a measurement: start may follow it.
  std::optional<std::map<std::string, std::string>> runtime;
};

// Parses one line (without its newline). Accepts NaN, Infinity and -Infinity for a training loss, as Python's
// json.dumps writes them. Throws ProtocolError "report line N: ..." for anything that breaks the protocol.
ReportLine ParseReportLine(std::string_view line, std::size_t line_number);

// The reported checkpoint `path` (ReportCheckpoint::path) as dltune records it: made absolute against the trial
// directory and normalized. Throws ProtocolError for a path that is the trial directory or one of its ancestors, one
// of dltune's own files in it (params.json, trial.json, the logs, the TensorBoard events), or a relative path that
// leaves it by "..": none is a checkpoint, and retention would delete it. An absolute path elsewhere is allowed (and
// never deleted by dltune).
std::filesystem::path CheckpointPathOf(const std::filesystem::path& trial_dir, const std::string& path);

// Splits a byte stream into lines and parses them, checking the rules that span lines (start comes first and once,
// nothing after end).
class ReportReader {
 public:
  // Appends bytes read from the report channel.
  void Feed(std::string_view bytes);
  // The next complete line, parsed; nullopt when no complete line is buffered. With `at_eof`, a last line without
  // its newline counts too. Throws ProtocolError for a bad line, and for a line longer than `max_line_bytes`
  // (counted as it arrives, so a line without end never holds more memory than that).
  std::optional<ReportLine> Next(bool at_eof = false);
  std::size_t lines_read() const { return line_number_; }

  static constexpr std::size_t kMaxLineBytes = 1 << 20;

 private:
  std::string buffer_;
  std::size_t start_ = 0;  // where the unread part of buffer_ begins
  std::size_t line_number_ = 0;
  bool measured_ = false;
  bool ended_ = false;
};

// Report lines as JSON text (no newline), for C++ trial programs.
std::string StartLine(std::int64_t step, bool manages_checkpoints);
std::string TrainLine(const TrainMeasurement& measurement);
std::string EvalLine(const ReportEval& eval);
std::string CheckpointLine(const ReportCheckpoint& checkpoint);
std::string EndLine(const ReportEnd& end);
std::string TimingLine(const TimeSplit& seconds);
// The runtime line of this process: the libraries it has loaded (core/reproduction.h, ProcessRuntime).
std::string RuntimeLine();

}  // namespace dltune
