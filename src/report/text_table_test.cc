#include "report/text_table.h"

#include <gtest/gtest.h>

namespace dltune {
namespace {

TEST(TextTable, CountsColumnsInCodePoints) {
  EXPECT_EQ(Columns("abc"), 3u);
  EXPECT_EQ(Columns("0.1 ±0.02 t3…"), 13u);  // "±" and "…" are one column each, not two and three bytes
}

TEST(TextTable, AlignsColumnsTwoSpacesApartWithoutTrailingSpaces) {
  TextTable table({"name", "value"});
  table.AddRow({"µ", "1"});
  table.AddRow({"longer name", ""});
  EXPECT_EQ(table.Render(2),
            "  name         value\n"
            "  µ            1\n"
            "  longer name\n");
}

TEST(TextTable, CellsCannotActOnTheTerminalOrBreakTheirLine) {
  TextTable table({"cell"});
  table.AddRow({"a\nb\x1b[2J"});
  EXPECT_EQ(table.Render(), "cell\na\\nb\\x1b[2J\n");
}

}  // namespace
}  // namespace dltune
