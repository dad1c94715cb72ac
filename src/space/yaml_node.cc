#include "space/yaml_node.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>
#include <nlohmann/json.hpp>

#include "core/strings.h"

namespace dltune {
namespace {

std::string ChildPath(const std::string& parent, const std::string& key) {
  return parent.empty() ? key : parent + "." + key;
}

// The first line (1-based) whose flow brackets nest deeper than YamlNode::kMaxDepth or whose indentation exceeds
// kMaxIndent columns, or 0. A cheap guard, before parsing, against the parser's recursion on hostile input; the
// exact depth limit is checked on the parsed tree.
constexpr std::size_t kMaxIndent = 512;

int FirstTooDeepLine(const std::string& text) {
  int depth = 0;
  int line = 1;
  char quote = 0;
  bool comment = false;
  std::size_t indent = 0;
  bool at_line_start = true;
  for (const char c : text) {
    if (c == '\n') {
      ++line;
      comment = false;
      at_line_start = true;
      indent = 0;
      continue;
    }
    if (at_line_start) {
      if (c == ' ' || c == '-') {
        if (++indent > kMaxIndent) return line;
        continue;
      }
      at_line_start = false;
    }
    if (comment) continue;
    if (quote != 0) {
      if (c == quote) quote = 0;
      continue;
    }
    if (c == '"' || c == '\'') quote = c;
    if (c == '#') comment = true;
    if ((c == '[' || c == '{') && ++depth > YamlNode::kMaxDepth) return line;
    if ((c == ']' || c == '}') && depth > 0) --depth;
  }
  return 0;
}

// Values a document may expand to, aliases (*name) counted at every place they are used: far more than any spec
// holds, far fewer than a "billion laughs" document's nested aliases expand to.
constexpr std::size_t kMaxExpandedValues = 2000000;

void CheckDuplicateKeys(const YAML::Node& node, const std::string& path, const std::string& file, int depth,
                        std::size_t& visited) {
  if (++visited > kMaxExpandedValues) {
    throw SpecError({file, node.Mark().line + 1, node.Mark().column + 1}, path,
                    fmt::format("makes the document expand to more than {} values (its aliases, *name, are "
                                "copied wherever they are used); a spec is never that large",
                                kMaxExpandedValues));
  }
  if (depth > YamlNode::kMaxDepth) {
    throw SpecError({file, node.Mark().line + 1, node.Mark().column + 1}, path,
                    fmt::format("is nested more than {} levels deep", YamlNode::kMaxDepth));
  }
  if (node.IsMap()) {
    std::set<std::string> seen;
    for (const auto& entry : node) {
      if (!entry.first.IsScalar()) {
        const auto mark = entry.first.Mark();
        throw SpecError({file, mark.line + 1, mark.column + 1}, path, "has a key that is not a plain name");
      }
      const std::string key = entry.first.Scalar();
      if (!seen.insert(key).second) {
        const auto mark = entry.first.Mark();
        throw SpecError({file, mark.line + 1, mark.column + 1}, ChildPath(path, key), "is given twice");
      }
      CheckDuplicateKeys(entry.second, ChildPath(path, key), file, depth + 1, visited);
    }
  } else if (node.IsSequence()) {
    std::size_t index = 0;
    for (const auto& element : node) {
      CheckDuplicateKeys(element, fmt::format("{}[{}]", path, index++), file, depth + 1, visited);
    }
  }
}

// Notes where the first value of a document is (a null document has none worth reporting).
class FirstValue final : public YAML::EventHandler {
 public:
  std::optional<YAML::Mark> mark;

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark& at, YAML::anchor_t) override { Note(at); }
  void OnScalar(const YAML::Mark& at, const std::string&, YAML::anchor_t, const std::string&) override { Note(at); }
  void OnSequenceStart(const YAML::Mark& at, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Note(at);
  }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark& at, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    Note(at);
  }
  void OnMapEnd() override {}

 private:
  void Note(const YAML::Mark& at) {
    if (!mark) mark = at;
  }
};

// Where a second, non-empty YAML document of `text` starts, if it has one. Only the first two documents are read
// (yaml-cpp's LoadAll can loop forever on some malformed input).
std::optional<YAML::Mark> SecondDocument(const std::string& text) {
  const bool may_have_one =
      text.find("\n---") != std::string::npos || text.find("\n...") != std::string::npos || text.rfind("---", 0) == 0;
  if (!may_have_one) return std::nullopt;
  std::istringstream stream(text);
  YAML::Parser parser(stream);
  FirstValue first, second;
  if (!parser.HandleNextDocument(first)) return std::nullopt;
  if (!parser.HandleNextDocument(second)) return std::nullopt;
  return second.mark;
}

const std::regex& IntPattern() {
  static const std::regex kPattern(R"([-+]?[0-9]+)");
  return kPattern;
}
const std::regex& FloatPattern() {
  static const std::regex kPattern(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  return kPattern;
}

}  // namespace

YamlNode YamlNode::Parse(const std::string& text, const std::string& file_name) {
  auto file = std::make_shared<const std::string>(file_name);
  if (const int line = FirstTooDeepLine(text); line != 0) {
    throw SpecError({file_name, line, 0}, "", fmt::format("is nested more than {} levels deep", kMaxDepth));
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
    if (const auto second = SecondDocument(text)) {
      throw SpecError({file_name, second->line + 1, second->column + 1}, "",
                      "starts a second YAML document (after ---); a spec is one document, and the second would be "
                      "ignored");
    }
  } catch (const YAML::Exception& e) {
    throw SpecError({file_name, e.mark.line + 1, e.mark.column + 1}, "", "is not valid YAML: " + e.msg);
  }
  std::size_t visited = 0;
  CheckDuplicateKeys(root, "", file_name, 0, visited);
  return YamlNode(root, "", std::move(file));
}

YamlNode::YamlNode(const YAML::Node& node, std::string path, std::shared_ptr<const std::string> file)
    : node_(node), path_(std::move(path)), file_(std::move(file)) {}

SourceLocation YamlNode::Location() const {
  const YAML::Mark mark = node_.Mark();
  if (mark.line < 0) return {*file_, 0, 0};
  return {*file_, mark.line + 1, mark.column + 1};
}

SpecError YamlNode::Fail(const std::string& message) const { return SpecError(Location(), path_, message); }

void YamlNode::ExpectMap(const std::vector<std::string>& allowed) const {
  if (!IsMap()) throw Fail("must be a mapping of keys to values");
  for (const auto& entry : node_) {
    const std::string key = entry.first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    const auto mark = entry.first.Mark();
    const std::string where = path_.empty() ? "top level" : path_;
    throw SpecError({*file_, mark.line + 1, mark.column + 1}, ChildPath(path_, key),
                    fmt::format("is not a known key of {}{}; known keys: {}", where, DidYouMean(key, allowed),
                                JoinAlternatives(allowed, false)));
  }
}

std::optional<YamlNode> YamlNode::Find(const std::string& key) const {
  if (!IsMap()) throw Fail("must be a mapping of keys to values");
  for (const auto& entry : node_) {
    if (entry.first.Scalar() == key) return YamlNode(entry.second, ChildPath(path_, key), file_);
  }
  return std::nullopt;
}

SourceLocation YamlNode::KeyLocation(const std::string& key) const {
  if (IsMap()) {
    for (const auto& entry : node_) {
      if (entry.first.Scalar() == key) return {*file_, entry.first.Mark().line + 1, entry.first.Mark().column + 1};
    }
  }
  return Location();
}

std::vector<std::pair<std::string, YamlNode>> YamlNode::Entries() const {
  if (!IsMap()) throw Fail("must be a mapping of keys to values");
  std::vector<std::pair<std::string, YamlNode>> entries;
  for (const auto& entry : node_) {
    const std::string key = entry.first.Scalar();
    entries.emplace_back(key, YamlNode(entry.second, ChildPath(path_, key), file_));
  }
  return entries;
}

std::vector<YamlNode> YamlNode::Elements() const {
  if (!IsSequence()) throw Fail("must be a list");
  std::vector<YamlNode> elements;
  std::size_t index = 0;
  for (const auto& element : node_) {
    elements.emplace_back(element, fmt::format("{}[{}]", path_, index++), file_);
  }
  return elements;
}

std::string YamlNode::AsString() const {
  if (!IsScalar()) throw Fail("must be a single value (text)");
  return node_.Scalar();
}

double YamlNode::AsDouble() const {
  const Value value = IsScalar() ? AsValue() : Value(false);
  if (const auto number = NumericValue(value)) return *number;
  throw Fail("must be a number");
}

std::int64_t YamlNode::AsInt() const {
  const Value value = IsScalar() ? AsValue() : Value(false);
  if (const auto* integer = std::get_if<std::int64_t>(&value)) return *integer;
  if (const auto* real = std::get_if<double>(&value)) {
    // Accept 1e5 and 3000.0 where an integer is meant, but never silently drop a fraction.
    if (std::isfinite(*real) && std::floor(*real) == *real && std::fabs(*real) < 9.0e15) {
      return static_cast<std::int64_t>(*real);
    }
  }
  throw Fail("must be a whole number");
}

bool YamlNode::AsBool() const {
  const Value value = IsScalar() ? AsValue() : Value(std::string());
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  throw Fail("must be true or false");
}

Value YamlNode::AsValue() const {
  if (!IsScalar()) throw Fail("must be a single value");
  const std::string& text = node_.Scalar();
  if (node_.Tag() == "!") return text;  // quoted: always a string
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  if (std::regex_match(text, IntPattern())) {
    try {
      return static_cast<std::int64_t>(std::stoll(text));
    } catch (const std::out_of_range&) {
      throw Fail("is a whole number too large to represent");
    }
  }
  if (std::regex_match(text, FloatPattern())) {
    try {
      return std::stod(text);
    } catch (const std::out_of_range&) {
      throw Fail("is a number too large or too small to represent");
    }
  }
  if (text == ".inf" || text == ".Inf" || text == "+.inf") return std::numeric_limits<double>::infinity();
  if (text == "-.inf" || text == "-.Inf") return -std::numeric_limits<double>::infinity();
  if (text == ".nan" || text == ".NaN" || text == ".NAN") return std::numeric_limits<double>::quiet_NaN();
  return text;
}

nlohmann::json YamlNode::AsJson() const {
  if (IsNull()) return nullptr;
  if (IsScalar()) return ValueToJson(AsValue());
  if (IsSequence()) {
    auto array = nlohmann::json::array();
    for (const auto& element : Elements()) array.push_back(element.AsJson());
    return array;
  }
  auto object = nlohmann::json::object();
  for (const auto& [key, child] : Entries()) object[key] = child.AsJson();
  return object;
}

}  // namespace dltune
