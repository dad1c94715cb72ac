#include "dltune/core/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

// The continued fraction of I_x(a, b) (modified Lentz), valid for x < (a + 1) / (a + b + 2).
double BetaContinuedFraction(double x, double a, double b) {
  constexpr double kTiny = 1e-300;
  constexpr double kEpsilon = 1e-15;
  double c = 1.0;
  double d = 1.0 - (a + b) * x / (a + 1.0);
  if (std::fabs(d) < kTiny) d = kTiny;
  d = 1.0 / d;
  double result = d;
  for (int m = 1; m <= 1000; ++m) {
    const double m2 = 2.0 * m;
    // Even step.
    double numerator = m * (b - m) * x / ((a + m2 - 1.0) * (a + m2));
    d = 1.0 + numerator * d;
    c = 1.0 + numerator / c;
    if (std::fabs(d) < kTiny) d = kTiny;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    result *= d * c;
    // Odd step.
    numerator = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1.0));
    d = 1.0 + numerator * d;
    c = 1.0 + numerator / c;
    if (std::fabs(d) < kTiny) d = kTiny;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    result *= delta;
    if (std::fabs(delta - 1.0) < kEpsilon) break;
  }
  return result;
}

// Ranks from 1, ties sharing their average rank.
std::vector<double> Ranks(std::span<const double> values) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  std::vector<double> ranks(values.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && values[order[j + 1]] == values[order[i]]) ++j;
    const double rank = (static_cast<double>(i + j) / 2.0) + 1.0;
    for (std::size_t k = i; k <= j; ++k) ranks[order[k]] = rank;
    i = j + 1;
  }
  return ranks;
}

}  // namespace

std::optional<double> MeanInterval::HalfWidth() const {
  if (!low || !high) return std::nullopt;
  return (*high - *low) / 2.0;
}

double RegularizedIncompleteBeta(double x, double a, double b) {
  if (!(a > 0 && b > 0) || !(x >= 0 && x <= 1)) {
    throw Error(fmt::format("incomplete beta: needs a, b > 0 and x in [0, 1], not a={} b={} x={}", a, b, x));
  }
  if (x == 0.0 || x == 1.0) return x;
  const double front =
      std::exp(std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x));
  if (x < (a + 1.0) / (a + b + 2.0)) return front * BetaContinuedFraction(x, a, b) / a;
  return 1.0 - front * BetaContinuedFraction(1.0 - x, b, a) / b;
}

double StudentTCdf(double t, double dof) {
  if (!(dof > 0)) throw Error(fmt::format("Student t: degrees of freedom must be > 0, not {}", dof));
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  const double tail = 0.5 * RegularizedIncompleteBeta(dof / (dof + t * t), dof / 2.0, 0.5);
  return t > 0 ? 1.0 - tail : tail;
}

double StudentTQuantile(double p, double dof) {
  if (!(p > 0 && p < 1)) throw Error(fmt::format("Student t quantile: p must be in (0, 1), not {}", p));
  if (!(dof >= 1)) throw Error(fmt::format("Student t quantile: degrees of freedom must be >= 1, not {}", dof));
  if (p == 0.5) return 0.0;
  if (p < 0.5) return -StudentTQuantile(1.0 - p, dof);
  double low = 0.0;
  double high = 1.0;
  while (StudentTCdf(high, dof) < p) high *= 2.0;
  for (int i = 0; i < 200 && high - low > 1e-13 * high; ++i) {
    const double middle = 0.5 * (low + high);
    (StudentTCdf(middle, dof) < p ? low : high) = middle;
  }
  return 0.5 * (low + high);
}

MeanInterval SummarizeMean(std::span<const double> values, double confidence) {
  if (!(confidence > 0 && confidence < 1)) {
    throw Error(fmt::format("a confidence level must be in (0, 1), not {}", confidence));
  }
  MeanInterval summary;
  summary.n = static_cast<int>(values.size());
  if (values.empty()) return summary;
  summary.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  if (values.size() < 2) return summary;
  double squares = 0;
  for (const double v : values) squares += (v - summary.mean) * (v - summary.mean);
  const double n = static_cast<double>(values.size());
  summary.sd = std::sqrt(squares / (n - 1.0));
  const double half = StudentTQuantile(1.0 - (1.0 - confidence) / 2.0, n - 1.0) * *summary.sd / std::sqrt(n);
  summary.low = summary.mean - half;
  summary.high = summary.mean + half;
  return summary;
}

std::size_t MedianIndex(std::span<const double> values, double mean) {
  std::vector<std::size_t> order(values.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return values[a] < values[b]; });
  const std::size_t n = order.size();
  if (n % 2 == 1) return order[n / 2];
  const std::size_t a = order[n / 2 - 1];
  const std::size_t b = order[n / 2];
  const double da = std::fabs(values[a] - mean);
  const double db = std::fabs(values[b] - mean);
  if (da != db) return da < db ? a : b;
  return std::min(a, b);
}

std::optional<double> SpearmanCorrelation(std::span<const double> x, std::span<const double> y) {
  if (x.size() != y.size() || x.size() < 2) return std::nullopt;
  const std::vector<double> rx = Ranks(x);
  const std::vector<double> ry = Ranks(y);
  const double mean = (static_cast<double>(x.size()) + 1.0) / 2.0;  // the mean rank, ties or not
  double sxy = 0, sxx = 0, syy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxy += (rx[i] - mean) * (ry[i] - mean);
    sxx += (rx[i] - mean) * (rx[i] - mean);
    syy += (ry[i] - mean) * (ry[i] - mean);
  }
  if (sxx == 0 || syy == 0) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

}  // namespace dltune
