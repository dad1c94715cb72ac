#include "core/strings.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <ctime>

#include <fmt/format.h>

namespace dltune {

std::size_t EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insertions, deletions, substitutions and swaps of neighbours each cost 1.
  const std::size_t columns = b.size() + 1;
  std::vector<std::size_t> d((a.size() + 1) * columns);
  for (std::size_t i = 0; i <= a.size(); ++i) d[i * columns] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      std::size_t best =
          std::min({d[(i - 1) * columns + j] + 1, d[i * columns + j - 1] + 1, d[(i - 1) * columns + j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        best = std::min(best, d[(i - 2) * columns + j - 2] + 1);
      }
      d[i * columns + j] = best;
    }
  }
  return d[a.size() * columns + b.size()];
}

std::string ClosestMatch(std::string_view word, const std::vector<std::string>& candidates) {
  std::string lowered(word);
  std::transform(lowered.begin(), lowered.end(), lowered.begin(), [](unsigned char c) { return std::tolower(c); });
  std::string best;
  std::size_t best_distance = SIZE_MAX;
  for (const auto& candidate : candidates) {
    const std::size_t distance = EditDistance(lowered, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // A typo changes at most about a third of a word, and never all of a short one.
  const std::size_t allowed = std::max<std::size_t>(1, std::min(word.size(), best.size()) / 3);
  return best_distance <= allowed ? best : std::string();
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string match = ClosestMatch(word, candidates);
  return match.empty() ? std::string() : " (did you mean '" + match + "'?)";
}

std::string SanitizeUtf8(std::string_view text) {
  std::string clean;
  clean.reserve(text.size());
  std::size_t i = 0;
  while (i < text.size()) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte == 0) {
      ++i;
      continue;
    }
    // Length of the sequence this lead byte starts, and the smallest code point it may encode (no overlongs).
    std::size_t length = 0;
    std::uint32_t code = 0;
    std::uint32_t minimum = 0;
    if (byte < 0x80) {
      clean += static_cast<char>(byte);
      ++i;
      continue;
    } else if ((byte & 0xE0) == 0xC0) {
      length = 2, code = byte & 0x1Fu, minimum = 0x80;
    } else if ((byte & 0xF0) == 0xE0) {
      length = 3, code = byte & 0x0Fu, minimum = 0x800;
    } else if ((byte & 0xF8) == 0xF0) {
      length = 4, code = byte & 0x07u, minimum = 0x10000;
    }
    bool valid = length != 0 && i + length <= text.size();
    for (std::size_t k = 1; valid && k < length; ++k) {
      const auto next = static_cast<unsigned char>(text[i + k]);
      valid = (next & 0xC0) == 0x80;
      code = (code << 6) | (next & 0x3Fu);
    }
    valid = valid && code >= minimum && code <= 0x10FFFF && (code < 0xD800 || code > 0xDFFF);
    if (valid) {
      clean.append(text.substr(i, length));
      i += length;
    } else {
      clean += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    }
  }
  return clean;
}

std::string TerminalSafe(std::string_view text, bool multiline) {
  const std::string clean = SanitizeUtf8(text);
  std::string safe;
  safe.reserve(clean.size());
  for (std::size_t i = 0; i < clean.size(); ++i) {
    const auto byte = static_cast<unsigned char>(clean[i]);
    if (byte == '\n' || byte == '\t') {
      if (multiline) {
        safe += static_cast<char>(byte);
      } else {
        safe += byte == '\n' ? "\\n" : "\\t";
      }
    } else if (byte < 0x20 || byte == 0x7f) {
      safe += fmt::format("\\x{:02x}", byte);
    } else if (byte == 0xC2 && i + 1 < clean.size() && static_cast<unsigned char>(clean[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(clean[i + 1]) <= 0x9F) {
      safe += fmt::format("\\u{:04x}", static_cast<unsigned char>(clean[++i]));  // a C1 control, e.g. CSI
    } else {
      safe += static_cast<char>(byte);
    }
  }
  return safe;
}

std::string JoinAlternatives(const std::vector<std::string>& items, bool quote) {
  std::string text;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) text += (i + 1 == items.size()) ? " or " : ", ";
    text += quote ? "'" + items[i] + "'" : items[i];
  }
  return text;
}

}  // namespace dltune

namespace dltune {
namespace {

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  while (!text.empty()) {
    const auto end = text.find('\n');
    lines.push_back(text.substr(0, end));
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

}  // namespace

std::string LineDiff(std::string_view old_text, std::string_view new_text, std::size_t context) {
  const auto a = SplitLines(old_text);
  const auto b = SplitLines(new_text);
  // Longest common subsequence by dynamic programming: specs are short.
  std::vector<std::vector<std::size_t>> common(a.size() + 1, std::vector<std::size_t>(b.size() + 1, 0));
  for (std::size_t i = a.size(); i-- > 0;) {
    for (std::size_t j = b.size(); j-- > 0;) {
      common[i][j] = a[i] == b[j] ? common[i + 1][j + 1] + 1 : std::max(common[i + 1][j], common[i][j + 1]);
    }
  }
  struct Line {
    char mark;
    std::string_view text;
  };
  std::vector<Line> lines;
  std::size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (i < a.size() && j < b.size() && a[i] == b[j]) {
      lines.push_back({' ', a[i++]});
      ++j;
    } else if (i < a.size() && (j == b.size() || common[i + 1][j] >= common[i][j + 1])) {
      lines.push_back({'-', a[i++]});
    } else {
      lines.push_back({'+', b[j++]});
    }
  }
  std::vector<bool> shown(lines.size(), false);
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (lines[k].mark == ' ') continue;
    const std::size_t from = k >= context ? k - context : 0;
    for (std::size_t m = from; m < lines.size() && m <= k + context; ++m) shown[m] = true;
  }
  std::string out;
  bool skipped = false;
  for (std::size_t k = 0; k < lines.size(); ++k) {
    if (!shown[k]) {
      skipped = true;
      continue;
    }
    if (skipped && !out.empty()) out += "  ...\n";
    skipped = false;
    out += lines[k].mark;
    out += ' ';
    out.append(lines[k].text);
    out += '\n';
  }
  return out;
}

std::string FormatClockTime(double seconds, const char* format, TimeZone zone) {
  const auto time = static_cast<std::time_t>(seconds);
  std::tm parts{};
  if (zone == TimeZone::kUtc) {
    gmtime_r(&time, &parts);
  } else {
    localtime_r(&time, &parts);
  }
  char buffer[64];
  const std::size_t length = std::strftime(buffer, sizeof buffer, format, &parts);
  return std::string(buffer, length);
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) quoted += (c == '"') ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

std::string ShellQuote(const std::string& text) {
  const auto safe_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("._+-/=:,@%").find(c) != std::string_view::npos;
  };
  if (!text.empty() && std::all_of(text.begin(), text.end(), safe_char)) return text;
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string NameBefore(const std::string& name, const std::string& marker) {
  const std::size_t at = name.rfind(marker);
  return at == std::string::npos || at == 0 ? name : name.substr(0, at);
}

}  // namespace dltune
