#include "report/text_table.h"

#include <algorithm>

#include "core/strings.h"

namespace dltune {

void TextTable::AddRow(std::vector<std::string> row) {
  // Cells come from specs, trials and stores: nothing in them may act on the terminal or break the table's lines.
  for (auto& cell : row) cell = TerminalSafe(cell, false);
  rows_.push_back(std::move(row));
}

std::size_t Columns(const std::string& text) {
  return static_cast<std::size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string TextTable::Render(int indent) const {
  std::vector<std::size_t> widths(header_.size(), 0);
  auto measure = [&](const std::vector<std::string>& row) {
    for (std::size_t i = 0; i < row.size() && i < widths.size(); ++i) widths[i] = std::max(widths[i], Columns(row[i]));
  };
  measure(header_);
  for (const auto& row : rows_) measure(row);
  std::string text;
  auto render = [&](const std::vector<std::string>& row) {
    std::string line(static_cast<std::size_t>(indent), ' ');
    for (std::size_t i = 0; i < widths.size(); ++i) {
      const std::string cell = i < row.size() ? row[i] : "";
      line += cell;
      if (i + 1 < widths.size()) line += std::string(widths[i] - Columns(cell) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    text += line + "\n";
  };
  render(header_);
  for (const auto& row : rows_) render(row);
  return text;
}

}  // namespace dltune
