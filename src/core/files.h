// Writing files so that a reader never sees half of one, and reading one whole.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace dltune {

// Writes `content` to `path` through a temporary file beside it, renamed into place once complete: on any failure
// (a full disk, no permission) `path` is left as it was — never empty or cut short — the temporary file is removed,
// and Error says what failed and where. With `sync`, the data reaches the disk before the rename (a file that must
// survive a crash of the machine); without, a crash may leave the old file, never a torn one.
void WriteFileAtomically(const std::filesystem::path& path, std::string_view content, bool sync = true);

// The bytes of the file at `path`. Throws IoError naming it when it cannot be read.
std::string ReadWholeFile(const std::filesystem::path& path);

// The bytes of the file at `path`, or nullopt when it cannot be read (missing, gone, not this user's): for a file
// whose absence is an answer rather than an error.
std::optional<std::string> ReadFileIfReadable(const std::filesystem::path& path);

}  // namespace dltune
