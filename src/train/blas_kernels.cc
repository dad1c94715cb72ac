#include "train/blas_kernels.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include <torch/torch.h>

namespace dltune {
namespace {

constexpr char kCoreTypeVariable[] = "OPENBLAS_CORETYPE";
constexpr char kSelf[] = "/proc/self/exe";

// OpenBLAS's x86-64 kernel sets by the widest vector instructions their level-3 kernels use: 0 generic or SSE,
// 1 AVX, 2 AVX2 + FMA, 3 AVX-512.
struct CoreLevel {
  std::string_view name;
  int level;
};
constexpr std::array<CoreLevel, 27> kCoreLevels = {{
    {"Generic", 0},     {"Katmai", 0},         {"Coppermine", 0},  {"Northwood", 0},    {"Prescott", 0},
    {"Banias", 0},      {"Atom", 0},           {"Core2", 0},       {"Penryn", 0},       {"Dunnington", 0},
    {"Nehalem", 0},     {"Athlon", 0},         {"Opteron", 0},     {"Opteron_SSE3", 0}, {"Barcelona", 0},
    {"Nano", 0},        {"Bobcat", 0},         {"Sandybridge", 1}, {"Bulldozer", 1},    {"Piledriver", 1},
    {"Steamroller", 1}, {"Excavator", 1},      {"Haswell", 2},     {"Zen", 2},          {"SkylakeX", 3},
    {"Cooperlake", 3},  {"SapphireRapids", 3},
}};
constexpr int kNewestOlderLevel = 1;  // AVX: the last level whose kernels are "older" than any AVX2 or AVX-512 set

bool EqualNoCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    return lower(x) == lower(y);
  });
}

std::optional<int> LevelOf(std::string_view core) {
  for (const CoreLevel& entry : kCoreLevels) {
    if (EqualNoCase(entry.name, core)) return entry.level;
  }
  return std::nullopt;
}

// An OpenBLAS function returning a string, looked up in the process; nullopt when absent (not OpenBLAS).
std::optional<std::string> OpenBlasString(const char* function) {
  using StringFunction = char* (*)();
  auto* get = reinterpret_cast<StringFunction>(dlsym(RTLD_DEFAULT, function));
  if (get == nullptr) return std::nullopt;
  const char* text = get();
  return std::string(text != nullptr ? text : "");
}

// OpenBLAS built with DYNAMIC_ARCH holds every kernel set and honors OPENBLAS_CORETYPE; other builds hold one.
bool OpenBlasCanChooseKernels() {
  const auto config = OpenBlasString("openblas_get_config");
  return config && config->find("DYNAMIC_ARCH") != std::string::npos;
}

std::string Mode() {
  const char* mode = std::getenv(kBlasKernelsVariable);
  return mode != nullptr && *mode != '\0' ? mode : "auto";
}

// Restarts this program with OpenBLAS's own choice of kernels after one warning line; returns if exec fails.
void RestartWithDefaultKernels(char** argv, const std::string& problem) {
  std::fprintf(stderr,
               "dltune: warning: %s; restarting with OpenBLAS's own choice of kernels (%s=off to skip this check)\n",
               problem.c_str(), kBlasKernelsVariable);
  std::fflush(stderr);
  setenv(kBlasKernelsVariable, "off", 1);
  unsetenv(kCoreTypeVariable);
  execv(kSelf, argv);
}

// Fixed pseudo-random floats in [-1, 1), drawn without touching LibTorch's generators.
std::vector<float> RandomValues(std::size_t count, std::mt19937& generator) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(generator);
  return values;
}

std::vector<float> ToVector(const torch::Tensor& tensor) {
  const torch::Tensor flat = tensor.contiguous().to(torch::kFloat32);
  const float* data = flat.data_ptr<float>();
  return {data, data + flat.numel()};
}

}  // namespace

std::string OpenBlasCore() { return OpenBlasString("openblas_get_corename").value_or(""); }

std::string OpenBlasCoreForCpu() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
#endif
  return {};
}

bool IsOlderOpenBlasCore(std::string_view current, std::string_view target) {
  const auto current_level = LevelOf(current);
  const auto target_level = LevelOf(target);
  return current_level && target_level && *current_level <= kNewestOlderLevel && *current_level < *target_level;
}

std::optional<std::pair<std::string, std::string>> FasterBlasEnvironment() {
  const std::string mode = Mode();
  if (EqualNoCase(mode, "off") || std::getenv(kCoreTypeVariable) != nullptr) return std::nullopt;
  const std::string current = OpenBlasCore();
  if (current.empty() || !OpenBlasCanChooseKernels()) return std::nullopt;
  if (!EqualNoCase(mode, "auto")) return std::pair<std::string, std::string>(kCoreTypeVariable, mode);
  const std::string target = OpenBlasCoreForCpu();
  if (!IsOlderOpenBlasCore(current, target)) return std::nullopt;
  return std::pair<std::string, std::string>(kCoreTypeVariable, target);
}

void ReexecWithFasterBlasKernels(char** argv) {
  if (EqualNoCase(Mode(), "off")) return;
  const bool restarted = std::getenv(kBlasKernelsCheckedVariable) != nullptr;
  if (const char* forced = std::getenv(kCoreTypeVariable); forced != nullptr) {
    // Kernels OpenBLAS did not pick itself: by this process's restart, a runner, or the user.
    const std::string core = OpenBlasCore();
    if (core.empty()) return;
    if (restarted && !EqualNoCase(core, forced)) {
      RestartWithDefaultKernels(
          argv, "OpenBLAS has no kernel set '" + std::string(forced) + "' (it runs " + core + " instead)");
    } else if (!VerifyBlasKernels()) {
      RestartWithDefaultKernels(argv, "OpenBLAS's " + core + " kernels (" + kCoreTypeVariable + "=" + forced +
                                          ") compute wrong float32 products on this CPU");
    }
    return;
  }
  if (restarted) return;  // restarted once already: never loop
  const auto environment = FasterBlasEnvironment();
  if (!environment || EqualNoCase(environment->second, OpenBlasCore())) return;
  setenv(environment->first.c_str(), environment->second.c_str(), 1);
  setenv(kBlasKernelsCheckedVariable, "1", 1);
  execv(kSelf, argv);
  // Could not restart: go on with the kernels loaded, and let child processes inherit nothing misleading.
  unsetenv(environment->first.c_str());
  unsetenv(kBlasKernelsCheckedVariable);
}

bool VerifyBlasKernels() {
  constexpr std::size_t kM = 67;
  constexpr std::size_t kK = 129;
  constexpr std::size_t kN = 71;
  std::mt19937 generator(20240517);
  std::vector<float> a = RandomValues(kM * kK, generator);
  std::vector<float> b = RandomValues(kK * kN, generator);
  std::vector<float> x = RandomValues(kK, generator);
  std::vector<float> y = RandomValues(kM, generator);
  const auto m = static_cast<std::int64_t>(kM);
  const auto k = static_cast<std::int64_t>(kK);
  const auto n = static_cast<std::int64_t>(kN);
  try {
    torch::NoGradGuard no_grad;
    const torch::Tensor ta = torch::from_blob(a.data(), {m, k}, torch::kFloat32);
    const torch::Tensor tb = torch::from_blob(b.data(), {k, n}, torch::kFloat32);
    const torch::Tensor tx = torch::from_blob(x.data(), {k}, torch::kFloat32);
    const torch::Tensor ty = torch::from_blob(y.data(), {m}, torch::kFloat32);
    // The same products with an operand stored transposed: BLAS gets the transpose flags Linear layers use.
    const torch::Tensor ta_stored_transposed = ta.t().contiguous().t();
    const torch::Tensor tb_stored_transposed = tb.t().contiguous().t();
    double worst = 0;
    worst = std::max(worst, RelativeProductError(a, b, ToVector(torch::mm(ta, tb)), kM, kK, kN));
    worst = std::max(worst, RelativeProductError(a, b, ToVector(torch::mm(ta, tb_stored_transposed)), kM, kK, kN));
    worst = std::max(worst, RelativeProductError(a, b, ToVector(torch::mm(ta_stored_transposed, tb)), kM, kK, kN));
    worst = std::max(worst, RelativeProductError(a, x, ToVector(torch::mv(ta, tx)), kM, kK, 1));
    // a^T y, the transposed matrix-vector product, as the product of y^T (1 x m) and a (m x k).
    worst = std::max(worst, RelativeProductError(y, a, ToVector(torch::mv(ta.t(), ty)), 1, kM, kK));
    return worst <= kBlasKernelsTolerance;
  } catch (const std::exception&) {
    return false;
  }
}

double RelativeProductError(std::span<const float> a, std::span<const float> b, std::span<const float> product,
                            std::size_t m, std::size_t k, std::size_t n) {
  constexpr double kInfinite = std::numeric_limits<double>::infinity();
  if (a.size() != m * k || b.size() != k * n || product.size() != m * n) return kInfinite;
  double worst = 0;
  for (std::size_t i = 0; i < m; ++i) {
    for (std::size_t j = 0; j < n; ++j) {
      double exact = 0;  // float x float is exact in double; the sum's rounding is ~1e-16 of the scale
      double scale = 0;
      for (std::size_t p = 0; p < k; ++p) {
        const double term = static_cast<double>(a[i * k + p]) * static_cast<double>(b[p * n + j]);
        exact += term;
        scale += std::fabs(term);
      }
      const double value = product[i * n + j];
      if (!std::isfinite(value)) return kInfinite;
      const double error = std::fabs(value - exact);
      if (error == 0) continue;
      if (scale == 0) return kInfinite;
      worst = std::max(worst, error / scale);
    }
  }
  return worst;
}

}  // namespace dltune
