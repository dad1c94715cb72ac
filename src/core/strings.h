// Small text helpers shared by parsers and printers.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dltune {

// Levenshtein edit distance between two strings.
std::size_t EditDistance(std::string_view a, std::string_view b);

// The candidate closest to `word` when it is close enough to be a likely typo; empty otherwise.
std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" when ClosestMatch finds one, else "".
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// `text` as valid UTF-8 without NUL bytes: invalid sequences become U+FFFD, NULs are dropped. For text from
// outside (a crashed process's stderr) on its way into a database or a page.
std::string SanitizeUtf8(std::string_view text);

// `text` safe to print on a terminal: valid UTF-8 (as SanitizeUtf8), with control characters (escape sequences,
// carriage returns, backspaces, C1 controls) shown as \x1b or \u009b instead of acting on the terminal. Newlines
// and tabs are kept when `multiline`, shown as \n and \t otherwise.
std::string TerminalSafe(std::string_view text, bool multiline = true);

// "a, b or c" (with quotes around each item when `quote` is set).
std::string JoinAlternatives(const std::vector<std::string>& items, bool quote = true);

// The lines that differ between two texts, as a person reads a diff: "- old line" and "+ new line", each change
// with up to `context` unchanged lines around it ("  line") and "  ..." where unchanged lines are left out.
std::string LineDiff(std::string_view old_text, std::string_view new_text, std::size_t context = 1);

// A Unix time (seconds, fractions dropped) as strftime `format` writes it, in UTC or in the local time zone.
enum class TimeZone { kUtc, kLocal };
std::string FormatClockTime(double seconds, const char* format, TimeZone zone);

// `text` as one CSV field (RFC 4180): as it is, or quoted with inner quotes doubled when it holds a comma, a quote
// or a line break.
std::string CsvField(const std::string& text);

// `text` as one /bin/sh word: unchanged when it holds only letters, digits and `._+-/=:,@%`, else in single quotes.
std::string ShellQuote(const std::string& text);
// The part of a study's name before the last `marker`: NameBefore("quickstart-fit-steps-higher", "-fit-steps") is
// "quickstart", the name a lineage's later studies take after its start; `name` itself when `marker` is not in it
// past its first character.
std::string NameBefore(const std::string& name, const std::string& marker);

}  // namespace dltune
