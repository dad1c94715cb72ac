// Writing YAML that dltune reads back to the same values: the specs `dltune plan` writes for people to read,
// commit and edit. Keys keep their order (a space's order decides its quasi-random dimensions), numbers keep their
// exact values, and a text that would read back as something else (true, 1.5, null) is quoted.
#pragma once

#include <string>
#include <vector>

#include "dltune/core/value.h"
#include "space/yaml_node.h"

namespace dltune {

struct YamlEntry;

// An ordered YAML document under construction. Plain value type.
struct YamlTree {
  enum class Kind { kNull, kScalar, kMap, kSequence };
  Kind kind = Kind::kNull;
  Value scalar;
  std::vector<YamlEntry> entries;  // kMap, in order
  std::vector<YamlTree> items;     // kSequence
  std::string comment;             // written as `# ...` lines above this entry or item (may hold several lines)
  bool flow = false;               // a map or sequence written on one line: {a: 1, b: 2}, [1, 2]

  static YamlTree Of(Value value);
  static YamlTree Map(bool flow = false);
  static YamlTree Sequence(bool flow = false);
  // A copy of `node`'s subtree with its resolved values, keys in document order. Maps and sequences of scalars that
  // fit on one line are written in flow style.
  static YamlTree From(const YamlNode& node);

  // The entry for `key` of a map (nullptr when absent).
  YamlTree* Find(const std::string& key);
  // Replaces the entry for `key`, or appends it.
  YamlTree& Set(const std::string& key, YamlTree value);
  void Erase(const std::string& key);
  YamlTree& Append(YamlTree item);
};

// A key of a map and its value.
struct YamlEntry {
  std::string key;
  YamlTree value;
};

// The document as text, block style but where `flow` is set, two-space indentation, ending in a newline.
std::string ToYamlText(const YamlTree& tree);

// One scalar as YAML text that reads back (YamlNode::AsValue) as `value`: shortest round-trip numbers (reals always
// with a `.` or an exponent, so they stay reals), texts quoted when needed (`in_flow`: inside {...} or [...], where
// commas and brackets need quotes too).
std::string YamlScalarText(const Value& value, bool in_flow = true);

}  // namespace dltune
