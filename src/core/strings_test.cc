#include "dltune/core/strings.h"

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

}  // namespace
}  // namespace dltune
