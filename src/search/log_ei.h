// Logs of the normal CDF and of the expected improvement, accurate where the plain formulas underflow or cancel.
#pragma once

namespace dltune::internal {

// h(z) = log(z Phi(z) + phi(z)): the log of the expected improvement of a unit normal over an incumbent z
// standard deviations above its mean. Accurate to a few ulps for every finite z (no underflow for z = -1e6).
double LogEi(double z);
// h'(z) = Phi(z) / (z Phi(z) + phi(z)), as accurate as LogEi.
double LogEiDerivative(double z);
// log Phi(z), the log of the standard normal CDF, accurate for very negative z.
double LogNormalCdf(double z);
// d/dz log Phi(z) = phi(z) / Phi(z).
double LogNormalCdfDerivative(double z);
// The standard normal quantile Phi^-1(p) for p in (0, 1).
double NormalQuantile(double p);

}  // namespace dltune::internal
