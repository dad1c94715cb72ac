#include "space/yaml_node.h"

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using ::testing::HasSubstr;

TEST(YamlNode, ResolvesScalarsWithTheCoreSchema) {
  const YamlNode root = YamlNode::Parse("a: 3\nb: 1.0e-3\nc: '3'\nd: true\ne: yes\nf: -2.5\ng: .5\n", "f.yaml");
  EXPECT_EQ(root.Find("a")->AsValue(), Value(std::int64_t{3}));
  EXPECT_EQ(root.Find("b")->AsValue(), Value(1.0e-3));
  EXPECT_EQ(root.Find("c")->AsValue(), Value(std::string("3")));
  EXPECT_EQ(root.Find("d")->AsValue(), Value(true));
  EXPECT_EQ(root.Find("e")->AsValue(), Value(std::string("yes")));  // YAML 1.2: not a boolean
  EXPECT_EQ(root.Find("f")->AsValue(), Value(-2.5));
  EXPECT_EQ(root.Find("g")->AsValue(), Value(0.5));
  EXPECT_EQ(root.Find("b")->AsDouble(), 1.0e-3);
  EXPECT_EQ(root.Find("a")->AsInt(), 3);
}

TEST(YamlNode, LocatesErrors) {
  const YamlNode root = YamlNode::Parse("top:\n  inner:\n    x: abc\n", "f.yaml");
  const YamlNode x = *root.Find("top")->Find("inner")->Find("x");
  EXPECT_EQ(x.path(), "top.inner.x");
  EXPECT_STREQ(x.Fail("is wrong").what(), "f.yaml:3:8: top.inner.x is wrong");
  try {
    x.AsDouble();
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_STREQ(e.what(), "f.yaml:3:8: top.inner.x must be a number");
  }
}

TEST(YamlNode, RefusesMalformedDuplicatedAndDeepDocuments) {
  EXPECT_THROW(YamlNode::Parse("a: [1, 2\n", "f.yaml"), SpecError);
  try {
    YamlNode::Parse("a:\n  b: 1\n  b: 2\n", "f.yaml");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("f.yaml:3:3: a.b is given twice"));
  }
  EXPECT_THROW(YamlNode::Parse(std::string(5000, '[') + std::string(5000, ']'), "f.yaml"), SpecError);
  EXPECT_THROW(YamlNode::Parse(std::string(5000, '{'), "f.yaml"), SpecError);
}

// Aliases nested to expand a 600-byte document into a billion values are refused at a budget, in about a second.
TEST(YamlNode, RefusesDocumentsThatExpandBeyondABudget) {
  std::string text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int level = 1; level <= 9; ++level) {
    text += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) text += (i ? ", *a" : "*a") + std::to_string(level - 1);
    text += "]\n";
  }
  const auto start = std::chrono::steady_clock::now();
  try {
    YamlNode::Parse(text, "f.yaml");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("expand to more than 2000000 values"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // A few aliases, as people use them, are fine.
  EXPECT_NO_THROW(YamlNode::Parse("base: &b {lr: 1}\nother: *b\n", "f.yaml"));
}

TEST(YamlNode, RefusesASecondDocument) {
  try {
    YamlNode::Parse("name: a\n---\nname: b\n", "f.yaml");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("f.yaml:3:1: starts a second YAML document"));
  }
  // Document markers around a single document are fine.
  EXPECT_NO_THROW(YamlNode::Parse("---\nname: a\n...\n", "f.yaml"));
  EXPECT_NO_THROW(YamlNode::Parse("name: a\n---\n", "f.yaml"));
}

// Block nesting of `levels` mappings, each indented `indent` spaces more than its parent.
std::string NestedBlocks(int levels, int indent) {
  std::string text;
  for (int level = 0; level < levels; ++level)
    text += std::string(static_cast<std::size_t>(level * indent), ' ') + "k:\n";
  return text + std::string(static_cast<std::size_t>(levels * indent), ' ') + "leaf: 1\n";
}

TEST(YamlNode, NestingLimitCountsLevelsNotColumns) {
  EXPECT_NO_THROW(YamlNode::Parse(NestedBlocks(60, 4), "f.yaml"));  // 240 columns, 60 levels
  try {
    YamlNode::Parse(NestedBlocks(70, 2), "f.yaml");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("is nested more than 64 levels deep"));
    EXPECT_THAT(e.what(), ::testing::StartsWith("f.yaml:6"));  // located at the deepest node
  }
  try {
    YamlNode::Parse(NestedBlocks(300, 2), "f.yaml");
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), ::testing::StartsWith("f.yaml:258: is nested"));  // refused before parsing
  }
}

TEST(YamlNode, ExpectMapSuggestsKeys) {
  const YamlNode root = YamlNode::Parse("seeed: 1\n", "f.yaml");
  try {
    root.ExpectMap({"seed", "name"});
    FAIL();
  } catch (const SpecError& e) {
    EXPECT_THAT(e.what(), HasSubstr("f.yaml:1:1: seeed is not a known key of top level (did you mean 'seed'?)"));
  }
}

}  // namespace
}  // namespace dltune
