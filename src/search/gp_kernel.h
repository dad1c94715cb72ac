// The Matern-5/2 kernel with automatic relevance determination (ARD) over encoded points.
//
// Points are the columns of a matrix (one feature per row). Feature columns are grouped: each group (one param of
// the search space, possibly several one-hot columns) has its own length scale.
#pragma once

#include <vector>

#include <Eigen/Core>

namespace dltune::internal {

// k(r2) = (1 + sqrt(5 r2) + 5/3 r2) exp(-sqrt(5 r2)) of a scaled squared distance r2 >= 0.
double Matern52(double r2);
// dk/d(r2) = -5/6 (1 + sqrt(5 r2)) exp(-sqrt(5 r2)); finite at r2 = 0, so gradients need no special case there.
double Matern52Derivative(double r2);

// k(x, x') = s2 Matern52(sum_f (x_f - x'_f)^2 / l_g(f)^2): signal variance s2, length scale l_g of feature f's group.
// Immutable value type.
class ArdMatern {
 public:
  // feature_groups[f] is the group of feature f, in [0, length_scales.size()).
  ArdMatern(std::vector<int> feature_groups, double signal_variance, const Eigen::VectorXd& length_scales);

  double signal_variance() const { return signal_variance_; }
  const Eigen::VectorXd& length_scales() const { return length_scales_; }
  const std::vector<int>& feature_groups() const { return feature_groups_; }
  // 1 / l^2 of each feature.
  const Eigen::VectorXd& inverse_squares() const { return inverse_squares_; }

  // The scaled squared distance r2 between two points.
  double ScaledDistance(const Eigen::Ref<const Eigen::VectorXd>& a, const Eigen::Ref<const Eigen::VectorXd>& b) const;
  // result(i, j) = k(a.col(i), b.col(j)).
  Eigen::MatrixXd Cross(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) const;
  // k(points.col(i), x) for every i into `values`; with `gradient`, also d k(points.col(i), x) / d x_f into
  // gradient(f, i).
  void Column(const Eigen::MatrixXd& points, const Eigen::Ref<const Eigen::VectorXd>& x, Eigen::VectorXd& values,
              Eigen::MatrixXd* gradient) const;

 private:
  std::vector<int> feature_groups_;
  double signal_variance_;
  Eigen::VectorXd length_scales_;
  Eigen::VectorXd inverse_squares_;
};

}  // namespace dltune::internal
