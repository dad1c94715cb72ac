#include "text_table.h"

#include <algorithm>

#include "dltune/core/strings.h"

namespace dltune::cli {

void TextTable::AddRow(std::vector<std::string> row) {
  // Cells come from specs, trials and stores: nothing in them may act on the terminal or break the table's lines.
  for (auto& cell : row) cell = TerminalSafe(cell, false);
  rows_.push_back(std::move(row));
}

std::string TextTable::Render(int indent) const {
  std::vector<std::size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  std::string text;
  auto render = [&](const std::vector<std::string>& row) {
    std::string line(static_cast<std::size_t>(indent), ' ');
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - cell.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  };
  render(header_);
  for (const auto& row : rows_) render(row);
  return text;
}

}  // namespace dltune::cli
