// Choosing OpenBLAS's kernels for the CPU, for the processes that train.
//
// LibTorch's Linear layers run in the BLAS it was built against; on Debian that is OpenBLAS with DYNAMIC_ARCH, which
// picks its kernels for the CPU when it loads. An OpenBLAS older than the CPU does not recognize it and falls back to
// its generic SSE3 "Prescott" kernels: on an AVX-512 Xeon, sgemm runs at a fifth of the speed of the "SkylakeX"
// kernels the same library holds. OpenBLAS reads OPENBLAS_CORETYPE only when it loads, so the choice has to be in the
// environment before the process starts: ReexecWithFasterBlasKernels() restarts the process with it, and
// FasterBlasEnvironment() tells a runner what to put in the environment of the trial processes it starts.
//
// The user decides with DLTUNE_BLAS_KERNELS:
//   auto (default)  switch only when OpenBLAS picked a generic or SSE/AVX-era kernel set (Prescott, Core2, Nehalem,
//                   Sandybridge, ...) clearly below what the CPU runs: SkylakeX for AVX-512 F/BW/VL/DQ, Haswell for
//                   AVX2 + FMA;
//   off             never touch OpenBLAS's choice and never check it;
//   NAME            that OpenBLAS kernel set (OPENBLAS_CORETYPE=NAME).
// An OPENBLAS_CORETYPE already in the environment is never replaced by another kernel set.
//
// Because an OpenBLAS older than the CPU may also compute wrong results with kernels it did not pick itself, a process
// that runs with OPENBLAS_CORETYPE set checks its products against a double-precision reference first
// (VerifyBlasKernels); if they are wrong, or OpenBLAS has no kernel set of the name dltune asked for, it prints one
// warning line and restarts with OpenBLAS's own choice (DLTUNE_BLAS_KERNELS=off, OPENBLAS_CORETYPE unset).
//
// This header is free of LibTorch types.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace dltune {

// The environment variable a user chooses the kernels with: "auto", "off" or an OpenBLAS kernel set name.
inline constexpr char kBlasKernelsVariable[] = "DLTUNE_BLAS_KERNELS";
// Set in the environment of a process that ReexecWithFasterBlasKernels restarted, so it never restarts in a loop.
inline constexpr char kBlasKernelsCheckedVariable[] = "DLTUNE_BLAS_KERNELS_CHECKED";
// The largest error VerifyBlasKernels accepts in a float32 product element, relative to sum_k |a_ik * b_kj|. Correct
// float32 kernels stay below k * 2^-24 (7.7e-6 for the inner dimension 129 checked; typically ~1e-7); wrong kernels
// are off by O(1).
inline constexpr double kBlasKernelsTolerance = 1e-5;

// The kernel set ("Prescott", "SkylakeX", ...) the OpenBLAS in this process runs; empty when the process's BLAS is
// not OpenBLAS.
std::string OpenBlasCore();

// The OpenBLAS kernel set this CPU runs best of those dltune chooses: "SkylakeX" when it has AVX-512 F, BW, VL and DQ,
// "Haswell" when it has AVX2 and FMA, else empty.
std::string OpenBlasCoreForCpu();

// True when `current` is a generic or SSE/AVX-era OpenBLAS kernel set (Prescott, Core2, Nehalem, Sandybridge, ...)
// and `target` one of wider vectors (Haswell: AVX2 + FMA; SkylakeX: AVX-512). An AVX2 set is not "older" than an
// AVX-512 one: which is faster depends on the CPU. Names compare case-insensitively; an unknown name is never older.
bool IsOlderOpenBlasCore(std::string_view current, std::string_view target);

// The environment variable and value a training process started from this one should get for faster BLAS kernels,
// e.g. {"OPENBLAS_CORETYPE", "SkylakeX"}, or nullopt: the BLAS is not OpenBLAS (or cannot switch kernels), the user
// set OPENBLAS_CORETYPE or DLTUNE_BLAS_KERNELS=off, or OpenBLAS's own choice is already as good. An explicit
// DLTUNE_BLAS_KERNELS=NAME is returned as is. Meant for dltune's own trial processes (which check the kernels, see
// above), not for arbitrary programs: another program's newer OpenBLAS may know the CPU better.
std::optional<std::pair<std::string, std::string>> FasterBlasEnvironment();

// Called first thing in main() of a command that trains. When FasterBlasEnvironment() says so and this process was
// not restarted already, sets the variable and restarts the program (execv of /proc/self/exe with the same argv);
// when that fails, goes on as it is. In a process running with OPENBLAS_CORETYPE set (by this or by a runner or the
// user), checks the kernels and restarts with OpenBLAS's own choice if they compute wrong results (see above).
// Does nothing when DLTUNE_BLAS_KERNELS=off.
void ReexecWithFasterBlasKernels(char** argv);

// Checks float32 matrix-matrix products (plain and with either operand transposed, as Linear layers run them) and
// matrix-vector products of this process's BLAS, through LibTorch on fixed pseudo-random 67x129 and 129x71 matrices,
// against a double-precision reference. True when every element is within kBlasKernelsTolerance.
bool VerifyBlasKernels();

// The largest error of `product` (m x n, row-major) against the exact product of `a` (m x k) and `b` (k x n), each
// element's error relative to sum_k |a_ik * b_kj| (0 when that and the error are 0; infinite for a NaN or infinite
// element, or when the sizes do not match). The measure VerifyBlasKernels compares with kBlasKernelsTolerance.
double RelativeProductError(std::span<const float> a, std::span<const float> b, std::span<const float> product,
                            std::size_t m, std::size_t k, std::size_t n);

}  // namespace dltune
