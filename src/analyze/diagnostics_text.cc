// The checklist's findings and the next step as text: each finding wrapped under its severity, most serious first.
#include "analyze/diagnostics_text.h"

#include <cctype>

#include <fmt/format.h>

#include "core/strings.h"

namespace dltune {
namespace {

// Wraps `text` at `width` columns, every line after the first indented by `indent` spaces.
std::string Wrap(const std::string& text, std::size_t indent, std::size_t width = 100) {
  std::string out, line;
  std::size_t start = 0;
  while (start < text.size()) {
    auto end = text.find(' ', start);
    if (end == std::string::npos) end = text.size();
    const std::string word = text.substr(start, end - start);
    if (!line.empty() && indent + line.size() + 1 + word.size() > width) {
      out += line + "\n" + std::string(indent, ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    start = end + 1;
  }
  return out + line;
}

}  // namespace

std::string DiagnosticsText(const std::string& study, const std::vector<Diagnostic>& diagnostics) {
  int counts[3] = {};
  std::size_t handled = 0;
  for (const auto& d : diagnostics) {
    if (d.handled.empty()) {
      ++counts[static_cast<int>(d.severity)];
    } else {
      ++handled;
    }
  }
  std::string out;
  if (diagnostics.empty()) {
    return TerminalSafe(fmt::format("study {}: no finding — none of the playbook's checks applies to it\n", study));
  }
  const std::size_t open = diagnostics.size() - handled;
  out += fmt::format("study {}: {} finding{} ({} problem{}, {} warning{}, {} note{}){}\n", study, open,
                     open == 1 ? "" : "s", counts[2], counts[2] == 1 ? "" : "s", counts[1], counts[1] == 1 ? "" : "s",
                     counts[0], counts[0] == 1 ? "" : "s",
                     handled == 0 ? "" : fmt::format(", and {} marked handled", handled));
  constexpr std::size_t kIndent = 10;
  for (const auto& d : diagnostics) {
    std::string label = d.handled.empty() ? SeverityName(d.severity) : "handled";
    for (auto& c : label) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    const std::string& title = d.title;  // names the sub-study when there are several
    out += fmt::format("\n{:<{}}{}\n", label, kIndent, Wrap(title, kIndent));
    const std::string pad(kIndent, ' ');
    if (!d.handled.empty()) {
      out += pad + Wrap(fmt::format("Marked handled by {} ({})", d.handled, d.id), kIndent) + "\n";
      continue;
    }
    if (!d.detail.empty()) out += pad + Wrap(d.detail, kIndent) + "\n";
    if (!d.suggestion.empty()) out += pad + Wrap("Suggestion: " + d.suggestion, kIndent) + "\n";
    if (!d.section.empty()) out += pad + Wrap("Playbook: \"" + d.section + "\"", kIndent) + "\n";
    out += pad + fmt::format("Finding: {}", d.id) + "\n";
  }
  return TerminalSafe(out);
}

std::string NextStepText(const NextStep& step) {
  std::string out =
      step.study.empty() ? fmt::format("{}\n", step.title) : fmt::format("study {}: {}\n", step.study, step.title);
  out += "  because: " + step.why + "\n";
  if (!step.command.empty()) out += "  run:     " + step.command + "\n";
  for (const std::string& other : step.alternatives) out += "  or:      " + other + "\n";
  if (!step.section.empty()) out += "  playbook: \"" + step.section + "\"\n";
  return TerminalSafe(out);
}

}  // namespace dltune
