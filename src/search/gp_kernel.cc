#include "gp_kernel.h"

#include <cassert>
#include <cmath>
#include <utility>

namespace dltune::internal {

double Matern52(double r2) {
  const double r = std::sqrt(5.0 * r2);
  return (1.0 + r + 5.0 / 3.0 * r2) * std::exp(-r);
}

double Matern52Derivative(double r2) {
  const double r = std::sqrt(5.0 * r2);
  return -5.0 / 6.0 * (1.0 + r) * std::exp(-r);
}

ArdMatern::ArdMatern(std::vector<int> feature_groups, double signal_variance, const Eigen::VectorXd& length_scales)
    : feature_groups_(std::move(feature_groups)),
      signal_variance_(signal_variance),
      length_scales_(length_scales),
      inverse_squares_(static_cast<Eigen::Index>(feature_groups_.size())) {
  for (std::size_t f = 0; f < feature_groups_.size(); ++f) {
    assert(feature_groups_[f] >= 0 && feature_groups_[f] < length_scales.size());
    const double l = length_scales(feature_groups_[f]);
    inverse_squares_(static_cast<Eigen::Index>(f)) = 1.0 / (l * l);
  }
}

double ArdMatern::ScaledDistance(const Eigen::Ref<const Eigen::VectorXd>& a,
                                 const Eigen::Ref<const Eigen::VectorXd>& b) const {
  return (a - b).cwiseAbs2().dot(inverse_squares_);
}

Eigen::MatrixXd ArdMatern::Cross(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const {
  // Scale once so each entry is a plain squared distance.
  const Eigen::VectorXd scale = inverse_squares_.cwiseSqrt();
  const Eigen::MatrixXd sa = scale.asDiagonal() * a;
  const Eigen::MatrixXd sb = scale.asDiagonal() * b;
  Eigen::MatrixXd result(a.cols(), b.cols());
  for (Eigen::Index j = 0; j < sb.cols(); ++j) {
    for (Eigen::Index i = 0; i < sa.cols(); ++i) {
      result(i, j) = signal_variance_ * Matern52((sa.col(i) - sb.col(j)).squaredNorm());
    }
  }
  return result;
}

void ArdMatern::Column(const Eigen::MatrixXd& points, const Eigen::Ref<const Eigen::VectorXd>& x,
                       Eigen::VectorXd& values, Eigen::MatrixXd* gradient) const {
  const Eigen::Index n = points.cols();
  values.resize(n);
  if (gradient != nullptr) gradient->resize(points.rows(), n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const double r2 = ScaledDistance(points.col(i), x);
    values(i) = signal_variance_ * Matern52(r2);
    if (gradient != nullptr) {
      // d r2 / d x_f = 2 (x_f - p_f) / l_f^2.
      gradient->col(i) =
          (2.0 * signal_variance_ * Matern52Derivative(r2)) * (x - points.col(i)).cwiseProduct(inverse_squares_);
    }
  }
}

}  // namespace dltune::internal
