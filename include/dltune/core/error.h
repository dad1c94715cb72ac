// Errors dltune reports to its users.
//
// Everything that goes wrong outside dltune's own code (a bad spec, an unreachable database, a full disk, a corrupt
// checkpoint) is thrown as a dltune::Error or a subclass; its what() is one line that says what is wrong and where,
// ready to print as it is, and its kind says what to do about it (and is the `dltune` command's exit status, see
// docs/exit-statuses.md). Programmer errors are assertions, never dltune::Error.
#pragma once

#include <stdexcept>
#include <string>

namespace dltune {

// What went wrong, by what a person or a script should do next.
enum class ErrorKind {
  kInvalidInput,  // a mistake in a spec, a command line, a param or a file a user wrote: fix it, do not retry
  kUnavailable,   // the store's database cannot be reached right now: retry later
  kIo,            // a file could not be read or written (disk full, permissions): fix the machine, then retry
  kConflict,      // the records changed under the command (a spec changed, a lease lost): look before retrying
  kCorrupt,       // recorded data is damaged or from another version (a checkpoint, a trial report, the schema)
};

// The `dltune` command's exit statuses, one meaning each, following sysexits.h where it has a value. This is the
// table of docs/exit-statuses.md.
inline constexpr int kExitDone = 0;          // did what it was asked; `run`: every trial completed or is infeasible
inline constexpr int kExitSomeFailed = 1;    // `run`, `worker`: every trial ended, some failed
inline constexpr int kExitInvalidInput = 2;  // a mistake in a spec, a command line, a param or a file a user wrote
inline constexpr int kExitHalted = 3;        // `run`, `worker`: stopped because trials kept failing the same way
inline constexpr int kExitInfeasible = 4;    // `train`: the training diverged (the playbook's infeasible trial)
inline constexpr int kExitCorrupt = 65;      // EX_DATAERR: recorded data is damaged or from another version
inline constexpr int kExitUnavailable = 69;  // EX_UNAVAILABLE: the store's database cannot be reached
inline constexpr int kExitInternal = 70;     // EX_SOFTWARE: a bug in dltune
inline constexpr int kExitIo = 74;           // EX_IOERR: a file could not be read or written
inline constexpr int kExitStopped = 75;      // EX_TEMPFAIL: stopped, resumable; a trial process: stopped, resumable
inline constexpr int kExitConflict = 76;     // the records changed under the command

// The exit status for an error of `kind`: kExitInvalidInput, kExitUnavailable, kExitIo, kExitConflict, kExitCorrupt.
int ExitStatusFor(ErrorKind kind);

// Base of every error dltune reports. The message is complete and printable as one line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::kInvalidInput)
      : std::runtime_error(message), kind_(kind) {}

  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

// A file that could not be read or written for a reason of the machine's (ErrorKind::kIo).
class IoError : public Error {
 public:
  explicit IoError(const std::string& message) : Error(message, ErrorKind::kIo) {}
};

// Recorded data that is damaged (ErrorKind::kCorrupt).
class CorruptError : public Error {
 public:
  explicit CorruptError(const std::string& message) : Error(message, ErrorKind::kCorrupt) {}
};

// A position in a text file a user wrote; line and column count from 1, 0 when unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  // "file:line:column", "file:line", "file" or "" depending on what is known.
  std::string ToString() const;
};

// A mistake in a study spec. what() is "file:line:column: key message", e.g.
// "study.yaml:7:5: space.learning_rate.min must be > 0 for scale: log".
class SpecError : public Error {
 public:
  SpecError(SourceLocation where, std::string key, const std::string& message);

  const SourceLocation& where() const { return where_; }
  // Dotted path of the offending key ("space.learning_rate.min"); empty when the whole file is at fault.
  const std::string& key() const { return key_; }

 private:
  SourceLocation where_;
  std::string key_;
};

}  // namespace dltune
