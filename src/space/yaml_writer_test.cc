#include "space/yaml_writer.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace dltune {
namespace {

using ::testing::HasSubstr;

Value ReadBack(const std::string& scalar_text) {
  return YamlNode::Parse("x: " + scalar_text + "\n", "t.yaml").Find("x")->AsValue();
}

TEST(YamlWriter, EveryScalarReadsBackAsItself) {
  const std::vector<Value> values = {Value(true),
                                     Value(false),
                                     Value(std::int64_t{0}),
                                     Value(std::int64_t{-42}),
                                     Value(std::int64_t{1} << 62),
                                     Value(0.1),
                                     Value(1e-8),
                                     Value(3.0),
                                     Value(-2.5e300),
                                     Value(0.051234567891234567),
                                     Value(2.2250738585072014e-308),
                                     Value(std::string("nesterov")),
                                     Value(std::string("true")),
                                     Value(std::string("1.5")),
                                     Value(std::string("12")),
                                     Value(std::string("null")),
                                     Value(std::string("~")),
                                     Value(std::string("")),
                                     Value(std::string("a: b")),
                                     Value(std::string(" padded")),
                                     Value(std::string("it's")),
                                     Value(std::string("say \"hi\"")),
                                     Value(std::string("#not a comment")),
                                     Value(std::string("[1, 2]")),
                                     Value(std::string("línea\nnueva")),
                                     Value(std::string("-")),
                                     Value(std::string(".inf"))};
  for (const Value& value : values) {
    const std::string text = YamlScalarText(value);
    const Value back = ReadBack(text);
    EXPECT_TRUE(back == value) << FormatValue(value) << " written as " << text << " reads back as "
                               << FormatValue(back);
  }
  EXPECT_EQ(YamlScalarText(Value(3.0)), "3.0");  // stays a real
  EXPECT_EQ(YamlScalarText(Value(std::string("adam"))), "adam");
  EXPECT_EQ(YamlScalarText(Value(std::string("true"))), "\"true\"");
}

TEST(YamlWriter, ASpecCopiedThroughTheTreeMeansTheSameInTheSameOrder) {
  std::ifstream in(std::string(DLTUNE_SOURCE_DIR) + "/examples/quickstart.yaml");
  std::stringstream text;
  text << in.rdbuf();
  const YamlNode original = YamlNode::Parse(text.str(), "quickstart.yaml");
  const std::string written = ToYamlText(YamlTree::From(original));
  const YamlNode back = YamlNode::Parse(written, "written.yaml");
  EXPECT_EQ(back.AsJson(), original.AsJson()) << written;
  std::vector<std::string> original_order, written_order;
  for (const auto& [key, node] : original.Find("space")->Entries()) original_order.push_back(key);
  for (const auto& [key, node] : back.Find("space")->Entries()) written_order.push_back(key);
  EXPECT_EQ(written_order, original_order);
  EXPECT_THAT(written, HasSubstr("  optimizer:\n    values: [nesterov, adam]\n    role: scientific\n"));
}

TEST(YamlWriter, CommentsFlowAndNesting) {
  YamlTree root = YamlTree::Map();
  root.comment = "first line\nsecond line";
  root.Set("name", YamlTree::Of(std::string("s")));
  YamlTree& list = root.Set("configs", YamlTree::Sequence());
  list.comment = "the configurations";
  YamlTree item = YamlTree::Map(true);
  item.Set("lr", YamlTree::Of(0.5));
  item.comment = "trial 3";
  list.Append(item);
  YamlTree nested = YamlTree::Map();
  nested.Set("a", YamlTree::Of(std::int64_t{1}));
  nested.Set("b", YamlTree::Sequence());
  list.Append(nested);
  const std::string text = ToYamlText(root);
  EXPECT_EQ(text,
            "# first line\n# second line\nname: s\n# the configurations\nconfigs:\n  # trial 3\n  - {lr: 0.5}\n"
            "  - a: 1\n    b: []\n");
  EXPECT_EQ(YamlNode::Parse(text, "t").Find("configs")->Elements()[1].Find("a")->AsInt(), 1);
  YamlTree block = YamlTree::Map();
  block.Set("description", YamlTree::Of(std::string("Nesterov vs Adam, at 2000 steps?")));
  block.Set("values", YamlTree::Sequence(true)).Append(YamlTree::Of(std::string("a, b")));
  EXPECT_EQ(ToYamlText(block), "description: Nesterov vs Adam, at 2000 steps?\nvalues: [\"a, b\"]\n");
  root.Erase("name");
  EXPECT_EQ(root.Find("name"), nullptr);
}

}  // namespace
}  // namespace dltune
