// The parsing of a spec's `sampler:` section (the library's users get it parsed, through LoadStudySpec).
#pragma once

#include "dltune/search/sampler.h"
#include "space/yaml_node.h"

namespace dltune {

// Parses `sampler: halton` or `sampler: {name: grid, points: 5}` / `{name: list, configs: [...]}`.
SamplerOptions ParseSamplerOptions(const YamlNode& node);

}  // namespace dltune
