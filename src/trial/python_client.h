// Where the Python trial client (`import dltune`, python/dltune) is, so that every program dltune starts can import
// it with no install step: an installed dltune's share/dltune/python beside its bin/, else the source tree's python/.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace dltune {

// The directory holding the `dltune` package; nullopt when neither place has it.
std::optional<std::filesystem::path> PythonClientDirectory();

// The PYTHONPATH a trial gets: the client's directory, then whatever this process's PYTHONPATH holds (the user's own
// packages win nothing away: the client's directory only adds the `dltune` package). Nullopt when there is no client.
std::optional<std::string> PythonPathWithClient();

}  // namespace dltune
