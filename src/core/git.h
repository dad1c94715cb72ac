// What commit a directory's git checkout is at, read from .git without running git.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace dltune {

// The full commit hash HEAD points at in the git checkout containing `directory` (searched upwards; worktrees and
// packed refs understood); nullopt when there is no checkout or HEAD has no commit yet.
std::optional<std::string> GitCommitOf(const std::filesystem::path& directory);

// Whether the git checkout containing `directory` has uncommitted changes to tracked files (`git status
// --porcelain --untracked-files=no` prints anything); nullopt when there is no checkout or git cannot tell (not
// installed, not a repository it can read).
std::optional<bool> GitDirtyOf(const std::filesystem::path& directory);

}  // namespace dltune
