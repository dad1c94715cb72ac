// Gaussian-process regression: hyperparameters fitted by maximum a posteriori (log marginal likelihood plus weak
// priors, in log space, L-BFGS with analytic gradients and restarts), and the posterior with its gradients.
#pragma once

#include <cstdint>
#include <vector>

#include <Eigen/Cholesky>
#include <Eigen/Core>

#include "gp_kernel.h"

namespace dltune::internal {

struct GpHyperparameters {
  double signal_variance = 1;
  Eigen::VectorXd length_scales;  // one per feature group
  double noise_variance = 1e-3;
};

// The fitting objective over theta = (log s2, log l_1, ..., log l_G, log noise) for points (features x n) with
// targets y (standardized by the caller). Immutable; precomputes the per-group squared distances.
class GpFitObjective {
 public:
  GpFitObjective(const Eigen::MatrixXd& points, const Eigen::VectorXd& y, std::vector<int> feature_groups, int groups);

  int size() const { return groups_ + 2; }
  // log p(y | theta), with d/dtheta into `gradient` when given.
  double LogMarginalLikelihood(const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) const;
  // log p(y | theta) + log p(theta), the maximized objective.
  double LogPosterior(const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) const;
  Eigen::VectorXd LowerBounds() const;
  Eigen::VectorXd UpperBounds() const;
  // The prior's mode, and a start read from the data (length scales from the median distance per group).
  Eigen::VectorXd PriorMode() const;
  Eigen::VectorXd DataDrivenStart() const;
  // A draw from the prior, clamped to the bounds.
  Eigen::VectorXd PriorDraw(std::uint64_t seed) const;
  GpHyperparameters Hyperparameters(const Eigen::VectorXd& theta) const;

 private:
  Eigen::VectorXd y_;
  std::vector<int> feature_groups_;
  int groups_;
  std::vector<Eigen::MatrixXd> distances_;  // per group: sum over its features of (x_f - x'_f)^2
};

struct GpFitOptions {
  int restarts = 3;              // L-BFGS runs: the data-driven start, the prior's mode, then draws from the prior
  int max_evaluations = 60;      // of the first run (from the data-driven start, usually the best)
  int restart_evaluations = 40;  // of each later run
  std::uint64_t seed = 0;        // of the prior draws
};

// The MAP hyperparameters of a GP on (points, y).
GpHyperparameters FitGpHyperparameters(const Eigen::MatrixXd& points, const Eigen::VectorXd& y,
                                       const std::vector<int>& feature_groups, int groups, const GpFitOptions& options);

// The posterior of a GP with zero prior mean given noisy observations y at points (features x n). Immutable.
class GpRegression {
 public:
  GpRegression(Eigen::MatrixXd points, const Eigen::VectorXd& y, ArdMatern kernel, double noise_variance);

  const ArdMatern& kernel() const { return kernel_; }
  double noise_variance() const { return noise_variance_; }
  // Posterior mean and variance of the latent function (noise excluded) at x; with the gradient pointers, also
  // their gradients with respect to x.
  void Predict(const Eigen::Ref<const Eigen::VectorXd>& x, double& mean, double& variance,
               Eigen::VectorXd* mean_gradient, Eigen::VectorXd* variance_gradient) const;
  // The same at every column of xs, without gradients.
  void PredictMany(const Eigen::MatrixXd& xs, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const;

 private:
  Eigen::MatrixXd points_;
  ArdMatern kernel_;
  double noise_variance_;
  Eigen::LLT<Eigen::MatrixXd> cholesky_;
  Eigen::VectorXd alpha_;  // (K + noise I)^-1 y
};

// Cholesky of a symmetric positive semi-definite matrix, adding jitter to the diagonal (relative to its mean,
// growing tenfold) until it succeeds. Used for every kernel matrix.
Eigen::LLT<Eigen::MatrixXd> RobustCholesky(Eigen::MatrixXd matrix);

}  // namespace dltune::internal
