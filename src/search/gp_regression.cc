#include "gp_regression.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <numbers>
#include <utility>

#include <nlopt.hpp>

#include "core/rng.h"

namespace dltune::internal {
namespace {

// Weak priors in log space, for inputs in the unit cube and standardized targets. Length scales: log-normal with
// median 0.5 sqrt(G) for G groups, scaled with the dimension as in Hvarfner, Hellsten, Nardi, "Vanilla Bayesian
// optimization performs great in high dimensions" (ICML 2024), so that two random points of the cube keep a
// correlation of about 0.6 whatever G; their median, e^sqrt(2) sqrt(G), makes nearly linear models from the few
// distinct values of small studies, which then sample one point over and over.
constexpr double kLogSignalMean = 0.0;
constexpr double kLogSignalSd = 1.5;
constexpr double kLogLengthSd = 1.7320508075688772;  // sqrt(3)
const double kLogNoiseMean = std::log(1e-3);
constexpr double kLogNoiseSd = 3.0;
// Bounds keep the kernel matrix well conditioned and the optimizer away from degenerate fits.
const double kLogSignalMin = std::log(1e-2);
const double kLogSignalMax = std::log(1e2);
const double kLogLengthMin = std::log(1e-2);
const double kLogLengthMax = std::log(1e3);
const double kLogNoiseMin = std::log(1e-6);
const double kLogNoiseMax = std::log(1.0);

double LogLengthMean(int groups) { return std::log(0.5) + 0.5 * std::log(static_cast<double>(groups)); }

double LogNormalDensity(double x, double mean, double sd, double* derivative) {
  const double u = (x - mean) / sd;
  if (derivative != nullptr) *derivative = -u / sd;
  return -0.5 * u * u;
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  const auto middle = values.begin() + static_cast<std::ptrdiff_t>(values.size() / 2);
  std::nth_element(values.begin(), middle, values.end());
  return *middle;
}

}  // namespace

Eigen::LLT<Eigen::MatrixXd> RobustCholesky(Eigen::MatrixXd matrix) {
  Eigen::LLT<Eigen::MatrixXd> cholesky(matrix);
  const double scale = std::max(matrix.diagonal().mean(), 1e-300);
  for (double jitter = 1e-10 * scale; cholesky.info() != Eigen::Success && jitter < 1e3 * scale; jitter *= 10) {
    matrix.diagonal().array() += jitter;
    cholesky.compute(matrix);
  }
  return cholesky;
}

GpFitObjective::GpFitObjective(const Eigen::MatrixXd& points, const Eigen::VectorXd& y, std::vector<int> feature_groups,
                               int groups)
    : y_(y), feature_groups_(std::move(feature_groups)), groups_(groups) {
  const Eigen::Index n = points.cols();
  distances_.assign(static_cast<std::size_t>(groups), Eigen::MatrixXd::Zero(n, n));
  for (std::size_t f = 0; f < feature_groups_.size(); ++f) {
    Eigen::MatrixXd& d = distances_[static_cast<std::size_t>(feature_groups_[f])];
    const auto row = points.row(static_cast<Eigen::Index>(f));
    for (Eigen::Index j = 0; j < n; ++j) {
      for (Eigen::Index i = 0; i < j; ++i) {
        const double delta = row(i) - row(j);
        d(i, j) += delta * delta;
      }
    }
  }
  for (auto& d : distances_) d.triangularView<Eigen::StrictlyLower>() = d.transpose();
}

double GpFitObjective::LogMarginalLikelihood(const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) const {
  const Eigen::Index n = y_.size();
  const double signal = std::exp(theta(0));
  const double noise = std::exp(theta(groups_ + 1));
  Eigen::VectorXd inverse_squares(groups_);
  for (int g = 0; g < groups_; ++g) inverse_squares(g) = std::exp(-2.0 * theta(1 + g));

  Eigen::MatrixXd r2 = Eigen::MatrixXd::Zero(n, n);
  for (int g = 0; g < groups_; ++g) r2 += inverse_squares(g) * distances_[static_cast<std::size_t>(g)];
  // The kernel and its slope in one pass over the lower triangle: they share the square root and the exponential.
  Eigen::MatrixXd base(n, n);
  Eigen::MatrixXd slope(gradient != nullptr ? n : 0, gradient != nullptr ? n : 0);
  for (Eigen::Index j = 0; j < n; ++j) {
    for (Eigen::Index i = j; i < n; ++i) {
      const double r = std::sqrt(5.0 * r2(i, j));
      const double e = std::exp(-r);
      base(i, j) = base(j, i) = (1.0 + r + r * r / 3.0) * e;
      if (gradient != nullptr) slope(i, j) = slope(j, i) = -5.0 / 6.0 * (1.0 + r) * e;
    }
  }
  Eigen::MatrixXd k = signal * base;
  k.diagonal().array() += noise;
  const Eigen::LLT<Eigen::MatrixXd> cholesky = RobustCholesky(std::move(k));
  const Eigen::VectorXd alpha = cholesky.solve(y_);
  const double log_det = 2.0 * cholesky.matrixLLT().diagonal().array().log().sum();
  const double value =
      -0.5 * y_.dot(alpha) - 0.5 * log_det - 0.5 * static_cast<double>(n) * std::log(2.0 * std::numbers::pi);
  if (gradient == nullptr) return value;

  // d/dtheta_j = 1/2 tr((alpha alpha^T - K^-1) dK/dtheta_j).
  Eigen::MatrixXd w = -cholesky.solve(Eigen::MatrixXd::Identity(n, n));
  w.noalias() += alpha * alpha.transpose();
  gradient->resize(size());
  (*gradient)(0) = 0.5 * signal * w.cwiseProduct(base).sum();
  const Eigen::MatrixXd w_slope = w.cwiseProduct(slope);
  for (int g = 0; g < groups_; ++g) {
    // dK/dlog l_g = s2 k'(r2) (-2 D_g / l_g^2).
    (*gradient)(1 + g) =
        -signal * inverse_squares(g) * w_slope.cwiseProduct(distances_[static_cast<std::size_t>(g)]).sum();
  }
  (*gradient)(groups_ + 1) = 0.5 * noise * w.trace();
  return value;
}

double GpFitObjective::LogPosterior(const Eigen::VectorXd& theta, Eigen::VectorXd* gradient) const {
  double value = LogMarginalLikelihood(theta, gradient);
  double derivative = 0;
  const auto add = [&](int i, double mean, double sd) {
    value += LogNormalDensity(theta(i), mean, sd, &derivative);
    if (gradient != nullptr) (*gradient)(i) += derivative;
  };
  add(0, kLogSignalMean, kLogSignalSd);
  for (int g = 0; g < groups_; ++g) add(1 + g, LogLengthMean(groups_), kLogLengthSd);
  add(groups_ + 1, kLogNoiseMean, kLogNoiseSd);
  return value;
}

Eigen::VectorXd GpFitObjective::LowerBounds() const {
  Eigen::VectorXd bounds = Eigen::VectorXd::Constant(size(), kLogLengthMin);
  bounds(0) = kLogSignalMin;
  bounds(groups_ + 1) = kLogNoiseMin;
  return bounds;
}

Eigen::VectorXd GpFitObjective::UpperBounds() const {
  Eigen::VectorXd bounds = Eigen::VectorXd::Constant(size(), kLogLengthMax);
  bounds(0) = kLogSignalMax;
  bounds(groups_ + 1) = kLogNoiseMax;
  return bounds;
}

Eigen::VectorXd GpFitObjective::PriorMode() const {
  Eigen::VectorXd theta = Eigen::VectorXd::Constant(size(), LogLengthMean(groups_));
  theta(0) = kLogSignalMean;
  theta(groups_ + 1) = kLogNoiseMean;
  return theta.cwiseMax(LowerBounds()).cwiseMin(UpperBounds());
}

Eigen::VectorXd GpFitObjective::DataDrivenStart() const {
  // Length scales that put the median pair of points at r2 = 1, each group contributing equally.
  constexpr Eigen::Index kMaxPoints = 100;
  const Eigen::Index n = std::min<Eigen::Index>(y_.size(), kMaxPoints);
  Eigen::VectorXd theta(size());
  theta(0) = 0;
  theta(groups_ + 1) = std::log(1e-2);
  for (int g = 0; g < groups_; ++g) {
    const Eigen::MatrixXd& d = distances_[static_cast<std::size_t>(g)];
    std::vector<double> values;
    double sum = 0;
    for (Eigen::Index j = 0; j < n; ++j) {
      for (Eigen::Index i = 0; i < j; ++i) {
        values.push_back(d(i, j));
        sum += d(i, j);
      }
    }
    double typical = Median(values);
    if (typical <= 0 && !values.empty()) typical = sum / static_cast<double>(values.size());
    if (typical <= 0) typical = 1;
    theta(1 + g) = 0.5 * std::log(static_cast<double>(groups_) * typical);
  }
  return theta.cwiseMax(LowerBounds()).cwiseMin(UpperBounds());
}

Eigen::VectorXd GpFitObjective::PriorDraw(std::uint64_t seed) const {
  Rng rng(seed);
  const auto normal = [&rng] {
    // Box-Muller from the platform-independent uniform stream.
    const double u = 1.0 - rng.Uniform();
    return std::sqrt(-2.0 * std::log(u)) * std::cos(2.0 * std::numbers::pi * rng.Uniform());
  };
  Eigen::VectorXd theta(size());
  theta(0) = kLogSignalMean + kLogSignalSd * normal();
  for (int g = 0; g < groups_; ++g) theta(1 + g) = LogLengthMean(groups_) + kLogLengthSd * normal();
  theta(groups_ + 1) = kLogNoiseMean + kLogNoiseSd * normal();
  return theta.cwiseMax(LowerBounds()).cwiseMin(UpperBounds());
}

GpHyperparameters GpFitObjective::Hyperparameters(const Eigen::VectorXd& theta) const {
  GpHyperparameters hyper;
  hyper.signal_variance = std::exp(theta(0));
  hyper.length_scales = theta.segment(1, groups_).array().exp();
  hyper.noise_variance = std::exp(theta(groups_ + 1));
  return hyper;
}

GpHyperparameters FitGpHyperparameters(const Eigen::MatrixXd& points, const Eigen::VectorXd& y,
                                       const std::vector<int>& feature_groups, int groups,
                                       const GpFitOptions& options) {
  const GpFitObjective objective(points, y, feature_groups, groups);
  const Eigen::VectorXd lower = objective.LowerBounds();
  const Eigen::VectorXd upper = objective.UpperBounds();
  const auto size = static_cast<unsigned>(objective.size());

  struct Run {
    const GpFitObjective* objective;
    Eigen::VectorXd best;
    double best_value = -std::numeric_limits<double>::infinity();
  } run{&objective, objective.PriorMode()};
  // NLopt minimizes; the callback keeps the best point seen, so a run that stops on a roundoff error loses nothing.
  const auto callback = [](unsigned n, const double* x, double* grad, void* data) -> double {
    auto* state = static_cast<Run*>(data);
    const Eigen::Map<const Eigen::VectorXd> theta(x, n);
    Eigen::VectorXd gradient;
    const double value = state->objective->LogPosterior(theta, grad != nullptr ? &gradient : nullptr);
    if (!std::isfinite(value)) {
      if (grad != nullptr) std::fill(grad, grad + n, 0.0);
      return std::numeric_limits<double>::max();
    }
    if (grad != nullptr) Eigen::Map<Eigen::VectorXd>(grad, n) = -gradient;
    if (value > state->best_value) {
      state->best_value = value;
      state->best = theta;
    }
    return -value;
  };

  for (int restart = 0; restart < std::max(options.restarts, 1); ++restart) {
    const int evaluations = restart == 0 ? options.max_evaluations : options.restart_evaluations;
    Eigen::VectorXd start = restart == 0   ? objective.DataDrivenStart()
                            : restart == 1 ? objective.PriorMode()
                                           : objective.PriorDraw(MixSeed(options.seed, restart));
    nlopt::opt optimizer(nlopt::LD_LBFGS, size);
    optimizer.set_lower_bounds(std::vector<double>(lower.begin(), lower.end()));
    optimizer.set_upper_bounds(std::vector<double>(upper.begin(), upper.end()));
    optimizer.set_min_objective(callback, &run);
    optimizer.set_maxeval(evaluations);
    optimizer.set_ftol_rel(1e-7);
    optimizer.set_xtol_rel(1e-5);
    std::vector<double> x(start.begin(), start.end());
    double minimum = 0;
    try {
      optimizer.optimize(x, minimum);
    } catch (const std::exception&) {
      // Roundoff or a failed line search: the best point seen so far stands.
    }
  }
  return objective.Hyperparameters(run.best);
}

GpRegression::GpRegression(Eigen::MatrixXd points, const Eigen::VectorXd& y, ArdMatern kernel, double noise_variance)
    : points_(std::move(points)), kernel_(std::move(kernel)), noise_variance_(noise_variance) {
  assert(points_.cols() == y.size());
  Eigen::MatrixXd k = kernel_.Cross(points_, points_);
  k.diagonal().array() += noise_variance_;
  cholesky_ = RobustCholesky(std::move(k));
  alpha_ = cholesky_.solve(y);
}

void GpRegression::Predict(const Eigen::Ref<const Eigen::VectorXd>& x, double& mean, double& variance,
                           Eigen::VectorXd* mean_gradient, Eigen::VectorXd* variance_gradient) const {
  Eigen::VectorXd k;
  Eigen::MatrixXd k_gradient;
  const bool gradients = mean_gradient != nullptr || variance_gradient != nullptr;
  kernel_.Column(points_, x, k, gradients ? &k_gradient : nullptr);
  mean = k.dot(alpha_);
  const Eigen::VectorXd v = cholesky_.matrixL().solve(k);
  variance = std::max(kernel_.signal_variance() - v.squaredNorm(), 0.0);
  if (mean_gradient != nullptr) *mean_gradient = k_gradient * alpha_;
  if (variance_gradient != nullptr) {
    // d(-k^T K^-1 k)/dx = -2 (dk/dx) K^-1 k.
    *variance_gradient = -2.0 * (k_gradient * cholesky_.matrixU().solve(v));
  }
}

void GpRegression::PredictMany(const Eigen::MatrixXd& xs, Eigen::VectorXd& mean, Eigen::VectorXd& variance) const {
  Eigen::MatrixXd k = kernel_.Cross(points_, xs);
  mean.noalias() = k.transpose() * alpha_;
  cholesky_.matrixL().solveInPlace(k);
  variance = (kernel_.signal_variance() - k.colwise().squaredNorm().array()).max(0.0).matrix().transpose();
}

}  // namespace dltune::internal
