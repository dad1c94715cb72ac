#include "gp_classifier.h"

#include <cassert>
#include <cmath>
#include <limits>
#include <utility>

#include "gp_regression.h"
#include "log_ei.h"

namespace dltune::internal {
namespace {

constexpr int kMaxNewtonSteps = 50;
constexpr double kTolerance = 1e-9;

// log p(labels | g), its gradient and W = its negated (diagonal) Hessian for the probit likelihood Phi(y g).
double ProbitLikelihood(const Eigen::VectorXd& labels, const Eigen::VectorXd& g, Eigen::VectorXd& gradient,
                        Eigen::VectorXd& w) {
  double value = 0;
  gradient.resize(g.size());
  w.resize(g.size());
  for (Eigen::Index i = 0; i < g.size(); ++i) {
    const double z = labels(i) * g(i);
    const double ratio = LogNormalCdfDerivative(z);  // phi(z) / Phi(z)
    value += LogNormalCdf(z);
    gradient(i) = labels(i) * ratio;
    w(i) = ratio * ratio + z * ratio;  // R&W eq. 3.16
  }
  return value;
}

}  // namespace

GpClassifier::GpClassifier(Eigen::MatrixXd points, const Eigen::VectorXd& labels,
                           const std::vector<int>& feature_groups, const std::vector<Eigen::VectorXd>& length_scales,
                           const std::vector<double>& signal_variances)
    : points_(std::move(points)), labels_(labels), kernel_(feature_groups, 1.0, length_scales.front()) {
  assert(points_.cols() == labels.size() && labels.size() > 0 && !length_scales.empty() && !signal_variances.empty());
  const double n = static_cast<double>(labels.size());
  const double feasible = static_cast<double>((labels.array() > 0).count());
  prior_mean_ = NormalQuantile((feasible + 1.0) / (n + 2.0));

  double best = -std::numeric_limits<double>::infinity();
  Eigen::VectorXd best_lengths = length_scales.front();
  double best_signal = signal_variances.front();
  for (const Eigen::VectorXd& lengths : length_scales) {
    const Eigen::MatrixXd unit = ArdMatern(feature_groups, 1.0, lengths).Cross(points_, points_);
    for (const double signal : signal_variances) {
      const double evidence = FindMode(signal * unit);
      if (evidence > best) {
        best = evidence;
        best_lengths = lengths;
        best_signal = signal;
      }
    }
  }
  kernel_ = ArdMatern(feature_groups, best_signal, best_lengths);
  log_evidence_ = FindMode(kernel_.Cross(points_, points_));
}

double GpClassifier::FindMode(const Eigen::MatrixXd& k) {
  const Eigen::Index n = labels_.size();
  Eigen::VectorXd f = Eigen::VectorXd::Zero(n);
  Eigen::VectorXd a = Eigen::VectorXd::Zero(n);
  Eigen::VectorXd gradient;
  Eigen::VectorXd w;
  // The objective -a^T f / 2 + log p(labels | m + f), with f = K a.
  double objective = ProbitLikelihood(labels_, f.array() + prior_mean_, gradient, w);
  for (int step = 0; step < kMaxNewtonSteps; ++step) {
    sqrt_w_ = w.cwiseSqrt();
    Eigen::MatrixXd b = sqrt_w_.asDiagonal() * k * sqrt_w_.asDiagonal();
    b.diagonal().array() += 1.0;
    cholesky_ = RobustCholesky(std::move(b));
    const Eigen::VectorXd rhs = w.cwiseProduct(f) + gradient;
    const Eigen::VectorXd newton = rhs - sqrt_w_.cwiseProduct(cholesky_.solve(sqrt_w_.cwiseProduct(k * rhs)));
    // The Newton step, halved while it does not improve the objective.
    const Eigen::VectorXd direction = newton - a;
    double step_size = 1.0;
    bool improved = false;
    for (int halving = 0; halving < 30 && !improved; ++halving, step_size *= 0.5) {
      const Eigen::VectorXd a_try = a + step_size * direction;
      const Eigen::VectorXd f_try = k * a_try;
      Eigen::VectorXd gradient_try;
      Eigen::VectorXd w_try;
      const double value =
          -0.5 * a_try.dot(f_try) + ProbitLikelihood(labels_, f_try.array() + prior_mean_, gradient_try, w_try);
      if (value < objective) continue;
      improved = true;
      const bool converged = value - objective <= kTolerance * (1.0 + std::abs(objective));
      a = a_try;
      f = f_try;
      gradient = std::move(gradient_try);
      w = std::move(w_try);
      objective = value;
      if (converged) step = kMaxNewtonSteps;
    }
    if (!improved) break;
  }
  // B at the mode, for the predictions (R&W Algorithm 3.2) and the evidence (eq. 3.32).
  sqrt_w_ = w.cwiseSqrt();
  Eigen::MatrixXd b = sqrt_w_.asDiagonal() * k * sqrt_w_.asDiagonal();
  b.diagonal().array() += 1.0;
  cholesky_ = RobustCholesky(std::move(b));
  likelihood_gradient_ = gradient;
  return objective - cholesky_.matrixLLT().diagonal().array().log().sum();
}

double GpClassifier::LogProbability(const Eigen::Ref<const Eigen::VectorXd>& x, Eigen::VectorXd* gradient) const {
  Eigen::VectorXd k;
  Eigen::MatrixXd k_gradient;
  kernel_.Column(points_, x, k, gradient != nullptr ? &k_gradient : nullptr);
  const double mean = prior_mean_ + k.dot(likelihood_gradient_);
  const Eigen::VectorXd v = cholesky_.matrixL().solve(sqrt_w_.cwiseProduct(k));
  const double variance = std::max(kernel_.signal_variance() - v.squaredNorm(), 0.0);
  const double scale = 1.0 / std::sqrt(1.0 + variance);
  const double t = mean * scale;
  if (gradient != nullptr) {
    const Eigen::VectorXd mean_gradient = k_gradient * likelihood_gradient_;
    const Eigen::VectorXd variance_gradient = -2.0 * (k_gradient * sqrt_w_.cwiseProduct(cholesky_.matrixU().solve(v)));
    // t = mean (1 + variance)^(-1/2).
    *gradient = LogNormalCdfDerivative(t) * (scale * mean_gradient - 0.5 * t * scale * scale * variance_gradient);
  }
  return LogNormalCdf(t);
}

Eigen::VectorXd GpClassifier::LogProbabilityMany(const Eigen::MatrixXd& xs) const {
  Eigen::MatrixXd k = kernel_.Cross(points_, xs);
  const Eigen::VectorXd mean = (k.transpose() * likelihood_gradient_).array() + prior_mean_;
  k = sqrt_w_.asDiagonal() * k;
  cholesky_.matrixL().solveInPlace(k);
  const Eigen::ArrayXd variance = (kernel_.signal_variance() - k.colwise().squaredNorm().array()).max(0.0);
  Eigen::VectorXd result(xs.cols());
  for (Eigen::Index j = 0; j < xs.cols(); ++j) result(j) = LogNormalCdf(mean(j) / std::sqrt(1.0 + variance(j)));
  return result;
}

}  // namespace dltune::internal
