#include "space/yaml_writer.h"

#include <algorithm>
#include <cmath>
#include <regex>
#include <string_view>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace dltune {
namespace {

constexpr std::size_t kFlowWidth = 100;  // a flow collection longer than this is written in block style

// Whether `text`, written plain, reads back as that text (not a number, bool or null) and parses as a plain scalar:
// in flow context ({a: b}, [a]) without flow indicators either.
bool IsPlainText(const std::string& text, bool flow) {
  if (text.empty() || text.front() == ' ' || text.back() == ' ' || text.back() == ':') return false;
  static const std::regex kNotText(
      R"([-+]?[0-9]+|[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?|true|True|TRUE|false|False|FALSE|)"
      R"(null|Null|NULL|~|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN))");
  if (std::regex_match(text, kNotText)) return false;
  if (std::string_view("-?:,[]{}#&*!|>'\"%@`").find(text.front()) != std::string_view::npos) return false;
  if (text.find(": ") != std::string::npos || text.find(" #") != std::string::npos) return false;
  if (flow && text.find_first_of(",[]{}") != std::string::npos) return false;
  return std::none_of(text.begin(), text.end(),
                      [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; });
}

std::string RealText(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  std::string text = fmt::format("{}", value);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

bool IsLeafCollection(const YamlTree& tree) {
  const auto scalar = [](const YamlTree& t) {
    return t.kind == YamlTree::Kind::kScalar || t.kind == YamlTree::Kind::kNull;
  };
  if (tree.kind == YamlTree::Kind::kMap) {
    for (const auto& [key, value] : tree.entries) {
      if (!scalar(value)) return false;
    }
    return true;
  }
  if (tree.kind == YamlTree::Kind::kSequence) {
    for (const auto& item : tree.items) {
      if (!scalar(item)) return false;
    }
    return true;
  }
  return false;
}

std::string KeyText(const std::string& key) {
  return IsPlainText(key, true) ? key
                                : nlohmann::json(key).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The tree on one line; `nested`: inside a flow collection, where flow indicators end a plain scalar.
std::string FlowText(const YamlTree& tree, bool nested = false) {
  switch (tree.kind) {
    case YamlTree::Kind::kNull: return "null";
    case YamlTree::Kind::kScalar: return YamlScalarText(tree.scalar, nested);
    case YamlTree::Kind::kMap: {
      std::string out = "{";
      for (const auto& [key, value] : tree.entries) {
        out += (out.size() > 1 ? ", " : "") + KeyText(key) + ": " + FlowText(value, true);
      }
      return out + "}";
    }
    case YamlTree::Kind::kSequence: {
      std::string out = "[";
      for (const auto& item : tree.items) out += (out.size() > 1 ? ", " : "") + FlowText(item, true);
      return out + "]";
    }
  }
  return "null";
}

void WriteComment(std::string& out, const std::string& comment, int indent) {
  if (comment.empty()) return;
  std::size_t start = 0;
  while (start <= comment.size()) {
    const std::size_t end = comment.find('\n', start);
    const std::string line = comment.substr(start, end == std::string::npos ? std::string::npos : end - start);
    out += std::string(static_cast<std::size_t>(indent), ' ') + (line.empty() ? "#" : "# " + line) + "\n";
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

bool Inline(const YamlTree& tree) {
  const bool empty_collection = (tree.kind == YamlTree::Kind::kMap && tree.entries.empty()) ||
                                (tree.kind == YamlTree::Kind::kSequence && tree.items.empty());
  return tree.kind == YamlTree::Kind::kScalar || tree.kind == YamlTree::Kind::kNull || tree.flow || empty_collection;
}

void WriteBlock(std::string& out, const YamlTree& tree, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  if (tree.kind == YamlTree::Kind::kMap) {
    for (const auto& [key, value] : tree.entries) {
      WriteComment(out, value.comment, indent);
      if (Inline(value)) {
        out += pad + KeyText(key) + ": " + FlowText(value) + "\n";
      } else {
        out += pad + KeyText(key) + ":\n";
        WriteBlock(out, value, indent + 2);
      }
    }
  } else if (tree.kind == YamlTree::Kind::kSequence) {
    for (const auto& item : tree.items) {
      WriteComment(out, item.comment, indent);
      if (Inline(item)) {
        out += pad + "- " + FlowText(item) + "\n";
      } else {
        // The item's first line follows the dash; the rest line up under it.
        std::string nested;
        WriteBlock(nested, item, indent + 2);
        out += pad + "- " + nested.substr(static_cast<std::size_t>(indent) + 2);
      }
    }
  } else {
    out += pad + FlowText(tree) + "\n";
  }
}

}  // namespace

YamlTree YamlTree::Of(Value value) {
  YamlTree tree;
  tree.kind = Kind::kScalar;
  tree.scalar = std::move(value);
  return tree;
}

YamlTree YamlTree::Map(bool flow) {
  YamlTree tree;
  tree.kind = Kind::kMap;
  tree.flow = flow;
  return tree;
}

YamlTree YamlTree::Sequence(bool flow) {
  YamlTree tree;
  tree.kind = Kind::kSequence;
  tree.flow = flow;
  return tree;
}

YamlTree YamlTree::From(const YamlNode& node) {
  YamlTree tree;
  if (node.IsNull()) return tree;
  if (node.IsScalar()) return Of(node.AsValue());
  if (node.IsMap()) {
    tree = Map();
    for (const auto& [key, child] : node.Entries()) tree.entries.push_back({key, From(child)});
  } else {
    tree = Sequence();
    for (const auto& child : node.Elements()) tree.items.push_back(From(child));
  }
  tree.flow = IsLeafCollection(tree) && FlowText(tree).size() <= kFlowWidth;
  return tree;
}

YamlTree* YamlTree::Find(const std::string& key) {
  for (auto& [name, value] : entries) {
    if (name == key) return &value;
  }
  return nullptr;
}

YamlTree& YamlTree::Set(const std::string& key, YamlTree value) {
  if (YamlTree* existing = Find(key)) {
    if (value.comment.empty()) value.comment = existing->comment;
    *existing = std::move(value);
    return *existing;
  }
  entries.push_back({key, std::move(value)});
  return entries.back().value;
}

void YamlTree::Erase(const std::string& key) {
  std::erase_if(entries, [&](const YamlEntry& entry) { return entry.key == key; });
}

YamlTree& YamlTree::Append(YamlTree item) {
  items.push_back(std::move(item));
  return items.back();
}

std::string ToYamlText(const YamlTree& tree) {
  std::string out;
  WriteComment(out, tree.comment, 0);
  if (Inline(tree)) return out + FlowText(tree) + "\n";
  WriteBlock(out, tree, 0);
  return out;
}

std::string YamlScalarText(const Value& value, bool in_flow) {
  if (const auto* b = std::get_if<bool>(&value)) return *b ? "true" : "false";
  if (const auto* i = std::get_if<std::int64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) return RealText(*d);
  const std::string& text = std::get<std::string>(value);
  return IsPlainText(text, in_flow)
             ? text
             : nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace dltune
