// The periodic-validation check on made-up curves: a repeating wave on a falling trend is found, noise and a smooth
// curve are not.
#include <cmath>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyze_test_util.h"
#include "core/rng.h"
#include "dltune/analyze/diagnostics.h"

namespace dltune {
namespace {

using testing::AddEvals;
using testing::AddTrial;
using ::testing::HasSubstr;
using testing::MakeData;

// Three trials whose objective is `shape(trial, evaluation)` at 24 evaluations.
template <typename Shape>
StudyData Curves(Shape shape) {
  StudyData data = MakeData("name: p\nworkload: synthetic\nmax_train_steps: 2400\nspace: {lr: {min: 0.01, max: 1}}\n");
  for (std::uint64_t t = 0; t < 3; ++t) {
    AddTrial(data, t, TrialState::kCompleted, {{"lr", Value(0.1 * static_cast<double>(t + 1))}}, 0.1, 100);
    std::vector<std::pair<std::int64_t, double>> points;
    for (int i = 0; i < 24; ++i) points.emplace_back((i + 1) * 100, shape(t, i));
    AddEvals(data, t, "valid", "error_rate", points);
  }
  return data;
}

const Diagnostic* Periodic(const std::vector<Diagnostic>& found) {
  for (const auto& d : found) {
    if (d.id == "periodic_validation") return &d;
  }
  return nullptr;
}

TEST(Periodicity, AWaveOnATrendIsFound) {
  const StudyData data = Curves([](std::uint64_t t, int i) {
    return 0.5 * std::exp(-0.1 * i) + 0.15 + 0.02 * std::sin(2 * M_PI * i / 6.0 + static_cast<double>(t));
  });
  const Diagnostic* d = Periodic(Diagnose(data));
  ASSERT_NE(d, nullptr);
  EXPECT_THAT(d->title, HasSubstr("of 3 of 3 trials rises and falls periodically"));
  EXPECT_THAT(d->detail, HasSubstr("every 6 evaluations"));
}

TEST(Periodicity, NoiseAndSmoothCurvesAreNot) {
  Rng rng(7);
  const StudyData noisy = Curves([&](std::uint64_t, int i) { return 0.5 * std::exp(-0.1 * i) + 0.02 * rng.Uniform(); });
  EXPECT_EQ(Periodic(Diagnose(noisy)), nullptr);
  const StudyData smooth = Curves([](std::uint64_t, int i) { return 0.5 * std::exp(-0.1 * i) + 0.1; });
  EXPECT_EQ(Periodic(Diagnose(smooth)), nullptr);
}

}  // namespace
}  // namespace dltune
