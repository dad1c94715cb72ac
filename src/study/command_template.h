// A study's `command:` — the trial program of a study that does not use a built-in workload — and its
// `{placeholder}` substitution (docs/trial-protocol.md, "Placeholders").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/strings.h"

namespace dltune {

// Names the runner substitutes besides the trial's params.
const std::vector<std::string>& BuiltinPlaceholders();

// The `{name}` placeholders of `command`, in order of appearance (repeats kept). `{{` and `}}` are literal braces.
// Throws Error for an unmatched brace or an empty or malformed name.
std::vector<std::string> CommandPlaceholders(const std::string& command);

// `command` with each `{name}` replaced by values.at(name), quoted for /bin/sh when it holds anything but letters,
// digits and `._+-/=:,@%`. Throws Error naming the first placeholder that has no value.
std::string RenderCommand(const std::string& command, const std::map<std::string, std::string>& values);

}  // namespace dltune
