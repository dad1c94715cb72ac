// Small-sample statistics for comparing trials: means over replicas with Student-t intervals, and rank
// correlation. Pure functions; tools/trial_variance_reference.py computes the same with numpy and scipy.
#pragma once

#include <optional>
#include <span>

namespace dltune {

// The mean of values trained from different seeds, and how far it can be trusted.
struct MeanInterval {
  int n = 0;  // how many values
  double mean = 0;
  std::optional<double> sd;  // sample standard deviation (divisor n - 1); n >= 2
  // The mean's two-sided confidence interval, mean ± t(1 - (1 - confidence) / 2, n - 1) · sd / √n; n >= 2.
  std::optional<double> low, high;

  // Half the interval's width; nullopt with fewer than 2 values.
  std::optional<double> HalfWidth() const;
};

// Mean, standard deviation and `confidence` interval (in (0, 1)) of `values` (non-finite ones are not expected).
// An empty input gives n = 0 and a mean of 0.
MeanInterval SummarizeMean(std::span<const double> values, double confidence = 0.95);

// The index of the median of `values` (non-empty): the middle one of an odd count; of an even count, the one of the
// two middle values nearer `mean` (the lower index on a tie). What a launch takes of replicas: a typical run.
std::size_t MedianIndex(std::span<const double> values, double mean);

// The quantile function of Student's t distribution with `dof` (>= 1) degrees of freedom at probability p in (0, 1),
// to about 1e-12 relative (bisection on the CDF written with the regularized incomplete beta function).
double StudentTQuantile(double p, double dof);
// Its distribution function.
double StudentTCdf(double t, double dof);
// The regularized incomplete beta function I_x(a, b), a, b > 0, x in [0, 1].
double RegularizedIncompleteBeta(double x, double a, double b);

// Spearman's rank correlation of paired values (ties get their average rank, as scipy.stats.spearmanr); nullopt
// with fewer than 2 pairs or when either side is constant.
std::optional<double> SpearmanCorrelation(std::span<const double> x, std::span<const double> y);

}  // namespace dltune
