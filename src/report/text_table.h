// A plain-text table with aligned columns, for terminal output (the text renderings of the report module).
#pragma once

#include <string>
#include <vector>

namespace dltune {

// Columns a text takes on a terminal: UTF-8 code points ("±" and "…" take one), not bytes.
std::size_t Columns(const std::string& text);

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) : header_(std::move(header)) {}
  // Adds a row; cells are made safe to print (TerminalSafe, newlines shown as \n).
  void AddRow(std::vector<std::string> row);
  // Columns padded to their widest cell (in code points), two spaces apart, each line indented by `indent` spaces.
  std::string Render(int indent = 0) const;

 private:
  std::vector<std::string> header_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace dltune
