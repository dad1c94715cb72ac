// Errors dltune reports to its users.
//
// A user's mistake (a bad spec, a bad command-line value, a missing file) is thrown as a dltune::Error or a
// subclass; its what() is one line that says what is wrong and where, ready to print as it is. Programmer errors
// are assertions, never dltune::Error.
#pragma once

#include <stdexcept>
#include <string>

namespace dltune {

// Base of every error caused by a user's input. The message is complete and printable as one line.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
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
