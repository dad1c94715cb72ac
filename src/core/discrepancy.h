// Discrepancy of a point set in the unit hypercube: how far it is from uniform; lower is better.
//
// Used to measure the quality of quasi-random samplers. Both functions return exactly the quantity
// scipy.stats.qmc.discrepancy (scipy 1.10) returns for the same points, up to floating-point rounding
// (expected values in the tests come from tools/discrepancy_reference.py). They are pure functions: thread-safe,
// O(n^2 d) time, O(n d) scratch memory.
#pragma once

#include <cstddef>
#include <span>

namespace dltune {

// The SQUARED centered L2 discrepancy (Hickernell 1998), scipy's method='CD'. `points` is row-major, n =
// points.size() / dims points of `dims` coordinates, each in [0, 1]. Throws dltune::Error when dims == 0, the size
// is not a multiple of dims, there is no point, or a coordinate is outside [0, 1] (or NaN).
double CenteredL2Discrepancy(std::span<const double> points, std::size_t dims);

// The L2-star discrepancy (Warnock 1972), scipy's method='L2-star'; unlike CD this is NOT squared (scipy takes the
// square root). Same layout, preconditions and errors as CenteredL2Discrepancy.
double L2StarDiscrepancy(std::span<const double> points, std::size_t dims);

}  // namespace dltune
