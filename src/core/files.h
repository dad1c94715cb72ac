// Writing files so that a reader never sees half of one, and reading one whole.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

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

// Removes `path` and, when it is a directory, everything under it; a symbolic link is removed, never followed. A path
// that does not exist is no error. Returns how many entries were removed; on failure, sets `error` and returns -1 (as
// std::filesystem::remove_all does). dltune calls this, never std::filesystem::remove_all: a pip LibTorch's libraries
// export copies of libstdc++'s std::filesystem functions (pytorch/pytorch#133437), and in a program linked with them
// remove_all can resolve to torch 2.11's copy, which jumps to address 0.
std::uintmax_t RemoveTree(const std::filesystem::path& path, std::error_code& error) noexcept;
// As above; a failure throws IoError naming the path.
std::uintmax_t RemoveTree(const std::filesystem::path& path);

// Removes the directory tree at `path` while other processes may still be writing into it (a deleted study's running
// trials, until their runner learns of the deletion): the tree is first renamed aside in its parent, so that what they
// write by path no longer lands in a tree being emptied, and a file made meanwhile through a directory they hold open
// is removed on a second pass. Fails (setting `error`) only where the tree cannot be moved or emptied within
// `patience`.
void RemoveTreeInUse(const std::filesystem::path& path, std::error_code& error,
                     std::chrono::milliseconds patience = std::chrono::seconds(10)) noexcept;

}  // namespace dltune
