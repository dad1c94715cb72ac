// Writing files so that a reader never sees half of one.
#pragma once

#include <filesystem>
#include <string_view>

namespace dltune {

// Writes `content` to `path` through a temporary file beside it, renamed into place once complete: on any failure
// (a full disk, no permission) `path` is left as it was — never empty or cut short — the temporary file is removed,
// and Error says what failed and where.
void WriteFileAtomically(const std::filesystem::path& path, std::string_view content);

}  // namespace dltune
