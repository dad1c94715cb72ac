// Gaussian-process classification of feasible (+1) and infeasible (-1) trials: probit likelihood, Laplace
// approximation (Rasmussen & Williams, "Gaussian Processes for Machine Learning", 2006, Algorithms 3.1 and 3.2).
//
// The latent function is m + f with f ~ GP(0, s2 Matern52) and a constant m = Phi^-1((feasible + 1) / (n + 2)), so
// far from every trial the probability of feasibility falls back to the smoothed feasible fraction. The length scales
// and s2 are the pair of candidates (the caller's) with the largest Laplace approximation of the marginal likelihood
// (R&W eq. 3.32).
#pragma once

#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "gp_kernel.h"

namespace dltune::internal {

class GpClassifier {
 public:
  // points: features x n; labels: +1 or -1 each. Immutable after construction.
  GpClassifier(Eigen::MatrixXd points, const Eigen::VectorXd& labels, const std::vector<int>& feature_groups,
               const std::vector<Eigen::VectorXd>& length_scales, const std::vector<double>& signal_variances);

  double signal_variance() const { return kernel_.signal_variance(); }
  const Eigen::VectorXd& length_scales() const { return kernel_.length_scales(); }
  double prior_mean() const { return prior_mean_; }
  // The Laplace approximation of log p(labels) at the chosen signal variance.
  double log_evidence() const { return log_evidence_; }

  // log P(feasible | x) = log Phi(mean / sqrt(1 + variance)) of the latent's approximate posterior (R&W eq. 3.82);
  // with `gradient`, also its gradient with respect to x.
  double LogProbability(const Eigen::Ref<const Eigen::VectorXd>& x, Eigen::VectorXd* gradient) const;
  // The same at every column of xs.
  Eigen::VectorXd LogProbabilityMany(const Eigen::MatrixXd& xs) const;

 private:
  // Algorithm 3.1 for the kernel matrix k: sets the posterior's state and returns the approximate log marginal
  // likelihood.
  double FindMode(const Eigen::MatrixXd& k);

  Eigen::MatrixXd points_;
  Eigen::VectorXd labels_;
  ArdMatern kernel_;
  double prior_mean_ = 0;
  double log_evidence_ = 0;
  Eigen::VectorXd likelihood_gradient_;   // d log p(labels | m + f) / df at the mode
  Eigen::VectorXd sqrt_w_;                // W^(1/2), W = -d^2 log p(labels | m + f) / df^2 at the mode
  Eigen::LLT<Eigen::MatrixXd> cholesky_;  // of B = I + W^(1/2) K W^(1/2)
};

}  // namespace dltune::internal
