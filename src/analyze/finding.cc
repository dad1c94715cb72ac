#include "dltune/analyze/finding.h"

#include <cctype>

namespace dltune {

std::string SeverityName(Severity severity) {
  switch (severity) {
    case Severity::kInfo: return "info";
    case Severity::kWarning: return "warning";
    case Severity::kProblem: return "problem";
  }
  return "unknown";
}

std::string PlaybookAnchor(const std::string& section) {
  std::string anchor;
  for (const char c : section) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == '-' || c == '_') {
      anchor += static_cast<char>(std::tolower(u));
    } else if (c == ' ') {
      anchor += '-';
    }
  }
  return anchor;
}

}  // namespace dltune
