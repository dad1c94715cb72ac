// A YAML node that knows where it came from, so every error names file:line:column and the key.
//
// Parsers of study specs walk the document through YamlNode instead of raw yaml-cpp nodes: each accessor checks
// the node's shape and type and throws SpecError ("study.yaml:7:5: space.lr.min must be a number") on a mismatch.
// Scalars are resolved with the YAML 1.2 core schema (quoted scalars are always strings). Immutable; cheap to copy.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "dltune/core/error.h"
#include "dltune/core/value.h"

namespace dltune {

class YamlNode {
 public:
  // Parses a whole document. Throws SpecError on malformed YAML, on duplicate keys and on nesting deeper
  // than kMaxDepth levels (or indented more than 512 columns: deep nesting would exhaust the parser's stack).
  static YamlNode Parse(const std::string& text, const std::string& file_name);

  static constexpr int kMaxDepth = 64;

  YamlNode(const YAML::Node& node, std::string path, std::shared_ptr<const std::string> file);

  // Dotted key path from the document root, e.g. "space.learning_rate.min"; "" for the root.
  const std::string& path() const { return path_; }
  SourceLocation Location() const;
  // A SpecError at this node.
  [[nodiscard]] SpecError Fail(const std::string& message) const;

  bool IsMap() const { return node_.IsMap(); }
  bool IsSequence() const { return node_.IsSequence(); }
  bool IsScalar() const { return node_.IsScalar(); }
  bool IsNull() const { return node_.IsNull(); }

  // Throws unless the node is a map whose keys are all in `allowed`; an unknown key gets a "did you mean".
  void ExpectMap(const std::vector<std::string>& allowed) const;
  // The map's entry for `key`, if present (the node must be a map).
  std::optional<YamlNode> Find(const std::string& key) const;
  // Where `key` is written in this map (the map's own location if absent).
  SourceLocation KeyLocation(const std::string& key) const;
  // The map's entries in document order.
  std::vector<std::pair<std::string, YamlNode>> Entries() const;
  // The sequence's elements (throws unless a sequence).
  std::vector<YamlNode> Elements() const;

  // Typed scalars; each throws "<path> must be ..." on a mismatch.
  std::string AsString() const;
  double AsDouble() const;
  std::int64_t AsInt() const;
  bool AsBool() const;
  // A scalar resolved to bool, integer, real or string by the YAML 1.2 core schema.
  Value AsValue() const;
  // The subtree as JSON (maps, sequences, resolved scalars).
  nlohmann::json AsJson() const;

 private:
  YAML::Node node_;
  std::string path_;
  std::shared_ptr<const std::string> file_;
};

}  // namespace dltune
