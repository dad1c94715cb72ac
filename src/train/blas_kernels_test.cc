#include "train/blas_kernels.h"
#include "scoped_variable_test_util.h"

#include <dlfcn.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dltune {
namespace {

using Environment = std::optional<std::pair<std::string, std::string>>;

using test::ScopedVariable;

// Whether this process's BLAS is an OpenBLAS that can switch kernels (DYNAMIC_ARCH, as Debian builds it).
bool SwitchableOpenBlas() {
  using StringFunction = char* (*)();
  auto* config = reinterpret_cast<StringFunction>(dlsym(RTLD_DEFAULT, "openblas_get_config"));
  return config != nullptr && std::string(config()).find("DYNAMIC_ARCH") != std::string::npos;
}

TEST(BlasKernelsTest, OffNeverAsksForOtherKernels) {
  const ScopedVariable core("OPENBLAS_CORETYPE", std::nullopt);
  for (const char* off : {"off", "OFF"}) {
    const ScopedVariable mode(kBlasKernelsVariable, off);
    EXPECT_EQ(FasterBlasEnvironment(), std::nullopt) << off;
  }
}

TEST(BlasKernelsTest, AnExplicitKernelSetIsReturnedAsIs) {
  if (!SwitchableOpenBlas()) GTEST_SKIP() << "the BLAS is not an OpenBLAS with DYNAMIC_ARCH";
  const ScopedVariable core("OPENBLAS_CORETYPE", std::nullopt);
  for (const char* name : {"Haswell", "skylakex", "Nehalem"}) {
    const ScopedVariable mode(kBlasKernelsVariable, name);
    EXPECT_EQ(FasterBlasEnvironment(), Environment({"OPENBLAS_CORETYPE", name}));
  }
}

TEST(BlasKernelsTest, TheUsersOpenBlasCoretypeIsNeverOverridden) {
  const ScopedVariable core("OPENBLAS_CORETYPE", "Nehalem");
  for (const char* name : {"auto", "SkylakeX"}) {
    const ScopedVariable mode(kBlasKernelsVariable, name);
    EXPECT_EQ(FasterBlasEnvironment(), std::nullopt) << name;
  }
  const ScopedVariable empty_core("OPENBLAS_CORETYPE", "");  // set, even empty: OpenBLAS reads it
  EXPECT_EQ(FasterBlasEnvironment(), std::nullopt);
}

// auto asks for the CPU's kernel set exactly when OpenBLAS's own choice is an older one. On this project's AVX-512
// machine OpenBLAS 0.3.21 picks Prescott, so this asks for SkylakeX.
TEST(BlasKernelsTest, AutoAsksForTheCpusKernelsWhenOpenBlasPickedOlderOnes) {
  if (!SwitchableOpenBlas()) GTEST_SKIP() << "the BLAS is not an OpenBLAS with DYNAMIC_ARCH";
  const ScopedVariable core("OPENBLAS_CORETYPE", std::nullopt);
  const std::string current = OpenBlasCore();
  const std::string target = OpenBlasCoreForCpu();
  const Environment expected =
      IsOlderOpenBlasCore(current, target) ? Environment({"OPENBLAS_CORETYPE", target}) : std::nullopt;
  for (const std::optional<std::string>& mode :
       {std::optional<std::string>(), std::optional<std::string>("auto"), std::optional<std::string>("")}) {
    const ScopedVariable variable(kBlasKernelsVariable, mode);
    EXPECT_EQ(FasterBlasEnvironment(), expected) << "OpenBLAS runs " << current << ", the CPU " << target;
  }
}

TEST(BlasKernelsTest, OnlyGenericAndSseOrAvxEraKernelsAreOlder) {
  EXPECT_TRUE(IsOlderOpenBlasCore("Prescott", "SkylakeX"));
  EXPECT_TRUE(IsOlderOpenBlasCore("core2", "Haswell"));
  EXPECT_TRUE(IsOlderOpenBlasCore("Katmai", "Haswell"));
  EXPECT_TRUE(IsOlderOpenBlasCore("Nehalem", "SkylakeX"));
  EXPECT_TRUE(IsOlderOpenBlasCore("Sandybridge", "SkylakeX"));
  EXPECT_FALSE(IsOlderOpenBlasCore("Haswell", "SkylakeX"));  // AVX2 vs AVX-512: depends on the CPU
  EXPECT_FALSE(IsOlderOpenBlasCore("Zen", "SkylakeX"));
  EXPECT_FALSE(IsOlderOpenBlasCore("SkylakeX", "Haswell"));
  EXPECT_FALSE(IsOlderOpenBlasCore("SkylakeX", "SkylakeX"));
  EXPECT_FALSE(IsOlderOpenBlasCore("Prescott", "Prescott"));
  EXPECT_FALSE(IsOlderOpenBlasCore("Prescott", ""));            // a CPU without AVX2: nothing to choose
  EXPECT_FALSE(IsOlderOpenBlasCore("NeoverseN1", "SkylakeX"));  // unknown names are never older
  EXPECT_FALSE(IsOlderOpenBlasCore("Prescott", "NoSuchCore"));
}

TEST(BlasKernelsTest, TheKernelsInUseComputeCorrectProducts) { EXPECT_TRUE(VerifyBlasKernels()); }

// The measure the check relies on: exact products pass, a product off in one element by more than rounding fails.
TEST(BlasKernelsTest, RelativeProductErrorSeesOneWrongElement) {
  const std::vector<float> a = {1.0f, 2.0f, -3.0f, 0.5f, 4.0f, -1.0f};  // 2 x 3
  const std::vector<float> b = {2.0f, 0.0f, -1.0f, 1.0f, 0.25f, 3.0f};  // 3 x 2
  const std::vector<float> exact = {-0.75f, -7.0f, -3.25f, 1.0f};       // 2 x 2
  EXPECT_EQ(RelativeProductError(a, b, exact, 2, 3, 2), 0.0);

  std::vector<float> rounded = exact;
  rounded[1] = std::nextafter(rounded[1], 0.0f);  // one unit in the last place: as a correct kernel may round
  EXPECT_LE(RelativeProductError(a, b, rounded, 2, 3, 2), kBlasKernelsTolerance);

  std::vector<float> wrong = exact;
  wrong[2] *= 1.001f;
  EXPECT_GT(RelativeProductError(a, b, wrong, 2, 3, 2), kBlasKernelsTolerance);

  std::vector<float> not_a_number = exact;
  not_a_number[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(RelativeProductError(a, b, not_a_number, 2, 3, 2), std::numeric_limits<double>::infinity());
  EXPECT_EQ(RelativeProductError(a, b, exact, 3, 2, 2), std::numeric_limits<double>::infinity());  // wrong sizes
}

}  // namespace
}  // namespace dltune
