// Standard test functions for black-box optimizers (Branin, Hartmann 6-D, Rosenbrock 4-D, Ackley 5-D), and a variant
// of each with an infeasible region where evaluation "diverges". Used by bench/gp_bench.cc; the Python peer
// bench/peers/optuna_functions.py defines the same functions, domains and regions (gp_bench --check-functions
// compares the two).
#pragma once

#include <span>
#include <string>
#include <vector>

namespace dltune::bench {

// A closed interval [lo, hi].
struct Interval {
  double lo = 0;
  double hi = 0;
};

// One side of the infeasible box: dimension `dim` (0-based) within `range`.
struct RegionSide {
  std::size_t dim = 0;
  Interval range;
};

// A function to minimize over a box. Plain value type.
struct TestFunction {
  std::string name;                                       // "branin", "branin_infeasible", ...
  double (*evaluate)(std::span<const double>) = nullptr;  // defined on the whole domain
  std::vector<Interval> domain;                           // one interval per dimension
  double minimum = 0;                                     // the value of the global minimum
  std::vector<std::vector<double>> minimizers;            // where it is reached
  // The infeasible region: the points whose every constrained dimension lies in its interval (closed); empty
  // for a function without one. No minimizer lies in it.
  std::vector<RegionSide> region;

  std::size_t dims() const { return domain.size(); }
  // Whether evaluating x diverges (x lies in the infeasible region).
  bool Infeasible(std::span<const double> x) const;
  // The share of the domain's volume the infeasible region covers.
  double InfeasibleFraction() const;
  // "[-5, 10] x [0, 15]", "[0, 1]^6".
  std::string DomainText() const;
  // "x1 in [-2, 2]", "x1 in [0.25, 0.75], x6 in [0.1, 0.6]"; "" without a region.
  std::string RegionText() const;
};

double Branin(std::span<const double> x);
double Hartmann6(std::span<const double> x);
double Rosenbrock(std::span<const double> x);
double Ackley(std::span<const double> x);

// branin, hartmann6, rosenbrock4, ackley5, then the four *_infeasible variants.
const std::vector<TestFunction>& TestFunctions();
// The function named `name`, or nullptr.
const TestFunction* FindTestFunction(const std::string& name);

}  // namespace dltune::bench
