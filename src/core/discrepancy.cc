#include "core/discrepancy.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "dltune/core/error.h"

namespace dltune {
namespace {

// Checks the layout and the range of every coordinate; returns the number of points.
std::size_t CheckPoints(std::span<const double> points, std::size_t dims, const char* what) {
  const std::string prefix = std::string(what) + ": ";
  if (dims == 0) throw Error(prefix + "dims must be > 0");
  if (points.size() % dims != 0) {
    throw Error(prefix + "the number of coordinates (" + std::to_string(points.size()) +
                ") is not a multiple of dims (" + std::to_string(dims) + ")");
  }
  if (points.empty()) throw Error(prefix + "needs at least one point");
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double x = points[i];
    if (!(x >= 0.0 && x <= 1.0)) {
      throw Error(prefix + "coordinate " + std::to_string(i % dims) + " of point " + std::to_string(i / dims) + " is " +
                  std::to_string(x) + ", outside the unit interval [0, 1]");
    }
  }
  return points.size() / dims;
}

// Neumaier's compensated sum: the results are small differences of sums of n^2 terms near 1, so plain summation
// would lose ~sqrt(n^2) ulps.
class CompensatedSum {
 public:
  void Add(double x) {
    const double t = sum_ + x;
    compensation_ += std::abs(sum_) >= std::abs(x) ? (sum_ - t) + x : (x - t) + sum_;
    sum_ = t;
  }
  double Value() const { return sum_ + compensation_; }

 private:
  double sum_ = 0.0;
  double compensation_ = 0.0;
};

}  // namespace

double CenteredL2Discrepancy(std::span<const double> points, std::size_t dims) {
  const std::size_t n = CheckPoints(points, dims, "CenteredL2Discrepancy");
  // Distance of every coordinate to the centre, computed once.
  std::vector<double> centred(points.size());
  for (std::size_t i = 0; i < points.size(); ++i) centred[i] = std::abs(points[i] - 0.5);

  CompensatedSum single;
  for (std::size_t i = 0; i < n; ++i) {
    const double* zi = &centred[i * dims];
    double product = 1.0;
    for (std::size_t k = 0; k < dims; ++k) product *= 1.0 + 0.5 * zi[k] - 0.5 * zi[k] * zi[k];
    single.Add(product);
  }

  // The pair sum is symmetric: diagonal once, every unordered pair twice.
  CompensatedSum diagonal;
  CompensatedSum off_diagonal;
  for (std::size_t i = 0; i < n; ++i) {
    const double* xi = &points[i * dims];
    const double* zi = &centred[i * dims];
    double product = 1.0;
    for (std::size_t k = 0; k < dims; ++k) product *= 1.0 + zi[k];
    diagonal.Add(product);
    for (std::size_t j = i + 1; j < n; ++j) {
      const double* xj = &points[j * dims];
      const double* zj = &centred[j * dims];
      double pair = 1.0;
      for (std::size_t k = 0; k < dims; ++k) pair *= 1.0 + 0.5 * zi[k] + 0.5 * zj[k] - 0.5 * std::abs(xi[k] - xj[k]);
      off_diagonal.Add(pair);
    }
  }
  const double count = static_cast<double>(n);
  return std::pow(13.0 / 12.0, static_cast<double>(dims)) - 2.0 / count * single.Value() +
         (diagonal.Value() + 2.0 * off_diagonal.Value()) / (count * count);
}

double L2StarDiscrepancy(std::span<const double> points, std::size_t dims) {
  const std::size_t n = CheckPoints(points, dims, "L2StarDiscrepancy");
  CompensatedSum single;
  CompensatedSum diagonal;
  CompensatedSum off_diagonal;
  for (std::size_t i = 0; i < n; ++i) {
    const double* xi = &points[i * dims];
    double square_term = 1.0;
    double self_term = 1.0;
    for (std::size_t k = 0; k < dims; ++k) {
      square_term *= 1.0 - xi[k] * xi[k];
      self_term *= 1.0 - xi[k];
    }
    single.Add(square_term);
    diagonal.Add(self_term);
    for (std::size_t j = i + 1; j < n; ++j) {
      const double* xj = &points[j * dims];
      double pair = 1.0;
      for (std::size_t k = 0; k < dims; ++k) pair *= 1.0 - std::max(xi[k], xj[k]);
      off_diagonal.Add(pair);
    }
  }
  const double count = static_cast<double>(n);
  const double d = static_cast<double>(dims);
  const double squared = std::pow(3.0, -d) - std::pow(2.0, 1.0 - d) / count * single.Value() +
                         (diagonal.Value() + 2.0 * off_diagonal.Value()) / (count * count);
  // Rounding can push a near-zero value just below zero; scipy would return NaN there, we return 0.
  return std::sqrt(std::max(squared, 0.0));
}

}  // namespace dltune
