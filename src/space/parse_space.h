// The parsing of a spec's `space:` section (the library's users get it parsed, through LoadStudySpec).
#pragma once

#include "dltune/space/search_space.h"
#include "space/yaml_node.h"

namespace dltune {

// Parses the `space:` mapping of a study spec. Each entry is a param:
//   id: {min, max, scale, type, values, value, role, when, name, description}
// Throws SpecError naming file:line:column and the key for every mistake.
SearchSpace ParseSearchSpace(const YamlNode& space);

}  // namespace dltune
