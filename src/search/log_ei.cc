// Below z = -3 both log(z Phi(z) + phi(z)) and log Phi(z) are computed from the continued fraction of Mills' ratio
// R(t) = Phi(-t) / phi(t) = 1 / (t + 1 / (t + 2 / (t + 3 / (t + ...)))), t = -z: with F_k = t + k / F_(k+1),
// R = 1 / F_1 and z Phi(z) + phi(z) = phi(t) (1 - t R) = phi(t) / (F_1 F_2), so nothing cancels. 64 levels give
// full double precision for t >= 3 (checked against mpmath at 50 digits).
#include "log_ei.h"

#include <cassert>
#include <cmath>
#include <numbers>

namespace dltune::internal {
namespace {

constexpr double kContinuedFractionFrom = -3.0;
constexpr int kContinuedFractionDepth = 64;
// log(sqrt(2 pi)).
const double kLogSqrt2Pi = 0.5 * std::log(2.0 * std::numbers::pi);

// F_1 and F_2 of the continued fraction at t >= 3.
void MillsFractions(double t, double& f1, double& f2) {
  double f = t;
  for (int k = kContinuedFractionDepth; k >= 2; --k) f = t + k / f;
  f2 = f;
  f1 = t + 1.0 / f2;
}

double NormalPdf(double z) { return std::exp(-0.5 * z * z - kLogSqrt2Pi); }
double NormalCdf(double z) { return 0.5 * std::erfc(-z * std::numbers::sqrt2 / 2.0); }

}  // namespace

double LogEi(double z) {
  if (z >= kContinuedFractionFrom) return std::log(z * NormalCdf(z) + NormalPdf(z));
  double f1 = 0;
  double f2 = 0;
  MillsFractions(-z, f1, f2);
  return -0.5 * z * z - kLogSqrt2Pi - std::log(f1) - std::log(f2);
}

double LogEiDerivative(double z) {
  if (z >= kContinuedFractionFrom) {
    const double cdf = NormalCdf(z);
    return cdf / (z * cdf + NormalPdf(z));
  }
  // Phi(z) / (phi(t) / (F_1 F_2)) = R F_1 F_2 = F_2.
  double f1 = 0;
  double f2 = 0;
  MillsFractions(-z, f1, f2);
  return f2;
}

double LogNormalCdf(double z) {
  if (z >= kContinuedFractionFrom) {
    // log1p keeps the digits of Phi(z) close to 1.
    return z > 0 ? std::log1p(-0.5 * std::erfc(z * std::numbers::sqrt2 / 2.0)) : std::log(NormalCdf(z));
  }
  double f1 = 0;
  double f2 = 0;
  MillsFractions(-z, f1, f2);
  return -0.5 * z * z - kLogSqrt2Pi - std::log(f1);
}

double LogNormalCdfDerivative(double z) {
  if (z >= kContinuedFractionFrom) return NormalPdf(z) / NormalCdf(z);
  double f1 = 0;
  double f2 = 0;
  MillsFractions(-z, f1, f2);
  return f1;
}

double NormalQuantile(double p) {
  assert(p > 0 && p < 1);
  // Bisection on the CDF: 200 halvings of [-40, 40] reach the double next to the root; only used once per fit.
  double low = -40;
  double high = 40;
  for (int i = 0; i < 200 && high - low > 1e-15 * (1 + std::abs(low)); ++i) {
    const double mid = 0.5 * (low + high);
    (NormalCdf(mid) < p ? low : high) = mid;
  }
  return 0.5 * (low + high);
}

}  // namespace dltune::internal
