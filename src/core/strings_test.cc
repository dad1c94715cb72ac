#include "core/strings.h"

#include <gtest/gtest.h>

namespace dltune {
namespace {

TEST(Strings, EditDistanceCountsSwapsAsOneEdit) {
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  EXPECT_EQ(EditDistance("scale", "scal"), 1u);
  EXPECT_EQ(EditDistance("width", "wdith"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
}

TEST(Strings, SuggestsOnlyLikelyTypos) {
  const std::vector<std::string> keys = {"min", "max", "scale", "values", "trials"};
  EXPECT_EQ(ClosestMatch("trails", keys), "trials");
  EXPECT_EQ(ClosestMatch("Scale", keys), "scale");
  EXPECT_EQ(ClosestMatch("banana", keys), "");
  EXPECT_EQ(DidYouMean("valeus", keys), " (did you mean 'values'?)");
  EXPECT_EQ(DidYouMean("zzz", keys), "");
  EXPECT_EQ(JoinAlternatives({"a", "b", "c"}), "'a', 'b' or 'c'");
  EXPECT_EQ(JoinAlternatives({"a"}, false), "a");
}

TEST(Strings, SanitizeUtf8KeepsValidTextAndReplacesTheRest) {
  EXPECT_EQ(SanitizeUtf8("plain ascii"), "plain ascii");
  EXPECT_EQ(SanitizeUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(SanitizeUtf8(std::string("a\0b", 3)), "ab");
  EXPECT_EQ(SanitizeUtf8("bad \xFF end"), "bad \xEF\xBF\xBD end");
  EXPECT_EQ(SanitizeUtf8("cut \xE2\x82"), "cut \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("overlong \xC0\xAF"), "overlong \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(SanitizeUtf8("surrogate \xED\xA0\x80"), "surrogate \xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace dltune

namespace dltune {
namespace {

TEST(Strings, TerminalSafeShowsControlCharactersInsteadOfActingOnThem) {
  EXPECT_EQ(TerminalSafe("plain text, ünïcode"), "plain text, ünïcode");
  EXPECT_EQ(TerminalSafe("a\x1b[2Jb\rc\bd\x7f"), "a\\x1b[2Jb\\x0dc\\x08d\\x7f");
  EXPECT_EQ(TerminalSafe("line 1\nline 2\tend"), "line 1\nline 2\tend");
  EXPECT_EQ(TerminalSafe("line 1\nline 2\tend", false), "line 1\\nline 2\\tend");
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "31m"),
            "\\u009b31m");  // the C1 control sequence introducer
  EXPECT_EQ(TerminalSafe("bad \xff byte"), "bad \xef\xbf\xbd byte");
}

TEST(Strings, LineDiffShowsChangesWithContext) {
  EXPECT_EQ(LineDiff("a\nb\nc\nd\ne\nf\n", "a\nb\nC\nd\ne\nf\n"), "  b\n- c\n+ C\n  d\n");
  EXPECT_EQ(LineDiff("a\nb\nc\nd\ne\nf\ng", "a\nB\nc\nd\ne\nf\nG"), "  a\n- b\n+ B\n  c\n  ...\n  f\n- g\n+ G\n");
  EXPECT_EQ(LineDiff("x\n", "x\ny\n"), "  x\n+ y\n");
  EXPECT_EQ(LineDiff("same\n", "same\n"), "");
}

TEST(FormatClockTime, UtcWithFractionsDropped) {
  // 2026-11-22 07:01:47.9 UTC.
  EXPECT_EQ(FormatClockTime(1795330907.9, "%Y-%m-%dT%H:%M:%S", TimeZone::kUtc), "2026-11-22T07:01:47");
  EXPECT_EQ(FormatClockTime(0, "%Y-%m-%d %H:%M UTC", TimeZone::kUtc), "1970-01-01 00:00 UTC");
  EXPECT_EQ(FormatClockTime(1795330907.9, "%H:%M:%S", TimeZone::kLocal).size(), 8u);
}

}  // namespace
}  // namespace dltune
