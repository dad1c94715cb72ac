// The test functions, with the formulas and constants of Surjanovic & Bingham's Virtual Library of Simulation
// Experiments (sfu.ca/~ssurjano), written term by term in the same order as bench/peers/optuna_functions.py so that
// both sides compute the same doubles.
#include "test_functions.h"

#include <cmath>
#include <numbers>

#include <fmt/format.h>

namespace dltune::bench {

double Branin(std::span<const double> x) {
  constexpr double kPi = std::numbers::pi;
  const double a = 1.0;
  const double b = 5.1 / (4.0 * kPi * kPi);
  const double c = 5.0 / kPi;
  const double r = 6.0;
  const double s = 10.0;
  const double t = 1.0 / (8.0 * kPi);
  const double term = x[1] - b * x[0] * x[0] + c * x[0] - r;
  return a * term * term + s * (1.0 - t) * std::cos(x[0]) + s;
}

double Hartmann6(std::span<const double> x) {
  static constexpr double kAlpha[4] = {1.0, 1.2, 3.0, 3.2};
  static constexpr double kA[4][6] = {{10.0, 3.0, 17.0, 3.5, 1.7, 8.0},
                                      {0.05, 10.0, 17.0, 0.1, 8.0, 14.0},
                                      {3.0, 3.5, 1.7, 10.0, 17.0, 8.0},
                                      {17.0, 8.0, 0.05, 10.0, 0.1, 14.0}};
  static constexpr double kP[4][6] = {{0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886},
                                      {0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991},
                                      {0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650},
                                      {0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381}};
  double total = 0.0;
  for (int i = 0; i < 4; ++i) {
    double inner = 0.0;
    for (int j = 0; j < 6; ++j) {
      const double d = x[j] - kP[i][j];
      inner += kA[i][j] * d * d;
    }
    total += kAlpha[i] * std::exp(-inner);
  }
  return -total;
}

double Rosenbrock(std::span<const double> x) {
  double total = 0.0;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) {
    const double a = x[i + 1] - x[i] * x[i];
    const double b = 1.0 - x[i];
    total += 100.0 * a * a + b * b;
  }
  return total;
}

double Ackley(std::span<const double> x) {
  double squares = 0.0;
  double cosines = 0.0;
  for (const double v : x) {
    squares += v * v;
    cosines += std::cos(2.0 * std::numbers::pi * v);
  }
  const auto n = static_cast<double>(x.size());
  return -20.0 * std::exp(-0.2 * std::sqrt(squares / n)) - std::exp(cosines / n) + 20.0 + std::numbers::e;
}

bool TestFunction::Infeasible(std::span<const double> x) const {
  if (region.empty()) return false;
  for (const RegionSide& side : region) {
    if (x[side.dim] < side.range.lo || x[side.dim] > side.range.hi) return false;
  }
  return true;
}

double TestFunction::InfeasibleFraction() const {
  if (region.empty()) return 0;
  double fraction = 1;
  for (const RegionSide& side : region) {
    const Interval& whole = domain[side.dim];
    fraction *= (side.range.hi - side.range.lo) / (whole.hi - whole.lo);
  }
  return fraction;
}

std::string TestFunction::DomainText() const {
  bool same = true;
  for (const Interval& interval : domain) {
    same = same && interval.lo == domain[0].lo && interval.hi == domain[0].hi;
  }
  if (same && dims() > 1) return fmt::format("[{:g}, {:g}]^{}", domain[0].lo, domain[0].hi, dims());
  std::string text;
  for (const Interval& interval : domain) {
    text += fmt::format("{}[{:g}, {:g}]", text.empty() ? "" : " x ", interval.lo, interval.hi);
  }
  return text;
}

std::string TestFunction::RegionText() const {
  std::string text;
  for (const RegionSide& side : region) {
    text += fmt::format("{}x{} in [{:g}, {:g}]", text.empty() ? "" : ", ", side.dim + 1, side.range.lo, side.range.hi);
  }
  return text;
}

namespace {

std::vector<TestFunction> MakeTestFunctions() {
  std::vector<TestFunction> base = {
      // The three global minima of Branin.
      {.name = "branin",
       .evaluate = Branin,
       .domain = {{-5, 10}, {0, 15}},
       .minimum = 5.0 / (4.0 * std::numbers::pi),
       .minimizers = {{-std::numbers::pi, 12.275}, {std::numbers::pi, 2.275}, {3 * std::numbers::pi, 2.475}}},
      {.name = "hartmann6",
       .evaluate = Hartmann6,
       .domain = std::vector<Interval>(6, Interval{0, 1}),
       .minimum = -3.32237,
       .minimizers = {{0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573}}},
      // SFU's usual domain for Rosenbrock, [-5, 10]^d (rather than De Jong's [-2.048, 2.048]^d).
      {.name = "rosenbrock4",
       .evaluate = Rosenbrock,
       .domain = std::vector<Interval>(4, Interval{-5, 10}),
       .minimum = 0,
       .minimizers = {{1, 1, 1, 1}}},
      {.name = "ackley5",
       .evaluate = Ackley,
       .domain = std::vector<Interval>(5, Interval{-32.768, 32.768}),
       .minimum = 0,
       .minimizers = {{0, 0, 0, 0, 0}}},
  };
  // The infeasible regions: boxes covering about a quarter of the domain, next to the global minima and holding
  // good values, so that a sampler drawn to the good values keeps meeting them:
  //   branin: the slab between the minima at x1 = -pi and x1 = pi (26.7%; best value inside 6.0, better than 90% of
  //     the domain's);
  //   hartmann6: x1 in [0.25, 0.75], x6 in [0.1, 0.6] (25%), one corner 0.05 from the minimizer (best inside -3.21);
  //   rosenbrock4: x1 in [1.25, 8.75], x2 in [-5, 2.5] (25%), cutting the valley x2 = x1^2 just past (1, 1, ...)
  //     (best inside 2.2);
  //   ackley5: x1 in [1, 32.768], x2 in [-32.768, 1] (25%), one corner at (1, 1, 0, 0, 0) next to the minimum
  //     (2.38 there).
  const std::vector<std::vector<RegionSide>> regions = {
      {{0, {-2, 2}}},
      {{0, {0.25, 0.75}}, {5, {0.1, 0.6}}},
      {{0, {1.25, 8.75}}, {1, {-5, 2.5}}},
      {{0, {1, 32.768}}, {1, {-32.768, 1}}},
  };
  std::vector<TestFunction> all = base;
  for (std::size_t i = 0; i < base.size(); ++i) {
    TestFunction variant = base[i];
    variant.name += "_infeasible";
    variant.region = regions[i];
    all.push_back(std::move(variant));
  }
  return all;
}

}  // namespace

const std::vector<TestFunction>& TestFunctions() {
  static const std::vector<TestFunction> kFunctions = MakeTestFunctions();
  return kFunctions;
}

const TestFunction* FindTestFunction(const std::string& name) {
  for (const TestFunction& function : TestFunctions()) {
    if (function.name == name) return &function;
  }
  return nullptr;
}

}  // namespace dltune::bench
