// What a study or a trial needs to be reproduced beyond its spec and commit (the playbook's tracking column "specific
// reproduction commands or notes on what unsubmitted changes were necessary"): the patch of uncommitted changes, the
// versions and machine that decide the numbers, and the environment variables that choose kernels. Collected when a
// study is created (DescribeNewStudy) and by each trial process (its runtime line); docs/store-schema.md,
// "reproduction", describes the record.
#pragma once

#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dltune {

// The largest patch of uncommitted changes a study keeps; a larger one is not stored, and its record says so.
inline constexpr std::size_t kPatchCapBytes = std::size_t{1} << 20;

// `git diff --binary HEAD` of the checkout containing `directory` (paths from the checkout's root, whatever the
// user's diff settings), byte for byte; nullopt when there is no checkout or git cannot tell.
std::optional<std::string> GitPatchOf(const std::filesystem::path& directory);

// What a new study records (StudyRecord::reproduction, NewStudy::git_patch).
struct ReproductionCapture {
  std::string record;        // the JSON object (docs/store-schema.md, "reproduction")
  std::string stored_patch;  // the patch as stored: as it is, or base64 when it is not UTF-8 text; "" when not kept
};

// The record of a study created from `directory` now: its checkout's patch (kept up to `patch_cap` bytes: a larger
// one is left out, with a note saying so and its size), the checkout's untracked files, dltune's version, the OS,
// the CPU, the libraries this process has loaded (LibTorch, BLAS, CUDA: none is loaded to ask) and the environment
// variables that choose kernels.
ReproductionCapture CaptureReproduction(const std::filesystem::path& directory, std::size_t patch_cap = kPatchCapBytes);

// `record` with the machine's GPUs (their models, in order) and the driver's version added; unchanged when `models`
// is empty.
std::string WithGpus(const std::string& record, const std::vector<std::string>& models, const std::string& driver);

// The versions of the libraries loaded in this process, by name ("dltune", "libtorch", "blas", "blas_kernels",
// "cuda_runtime", "cuda_driver"), read from what is loaded: nothing is loaded or initialized to ask.
nlohmann::json ProcessRuntime();

// The environment variables of this process that choose kernels, threads or devices (OPENBLAS_*, OMP_NUM_THREADS,
// MKL_*, CUBLAS_WORKSPACE_CONFIG, CUDA_VISIBLE_DEVICES, PYTHONHASHSEED, DLTUNE_BLAS_KERNELS, ...), by name.
nlohmann::json KernelEnvironment();

// The stored patch of a study as the bytes `git apply` takes, from the record's patch entry; "" when none is kept.
// Throws Error when the stored text does not match the record's size and SHA-256.
std::string PatchBytes(const std::string& record, const std::string& stored_patch);

// The record as JSON (an empty object for a study recorded before dltune kept one, or an unreadable one).
nlohmann::json ParseRecord(const std::string& record);

// How a trial's runtime (the "runtime" of its resources) differs from its study's record: "libtorch 2.1.0 (the
// study's record: 1.13.1)", one per library both name with different versions; empty when none differs.
std::vector<std::string> RuntimeDifferences(const nlohmann::json& study_record, const nlohmann::json& trial_runtime);

// "1.2 KiB", "3.4 MiB".
std::string ByteSizeText(std::size_t bytes);

}  // namespace dltune
