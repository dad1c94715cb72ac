// The gp sampler's acquisition function over encoded points.
#pragma once

#include <Eigen/Core>

#include "gp_classifier.h"
#include "gp_regression.h"

namespace dltune::internal {

// With an objective model: log EI(x) + log PoF(x), EI of the objective's posterior below `incumbent` (lower is
// better) and PoF from the feasibility classifier (0 when there is none). Without one (no feasible trial yet):
// log PoF(x) + log sd(x), sd from `spread`, a model conditioned on the pending points only, so that concurrent
// suggestions spread out (0 when there is none). The models must outlive this object. Immutable.
class GpAcquisition {
 public:
  GpAcquisition(const GpRegression* objective, double incumbent, const GpClassifier* feasibility,
                const GpRegression* spread);

  // The value at x, with its gradient with respect to x when `gradient` is given.
  double Value(const Eigen::Ref<const Eigen::VectorXd>& x, Eigen::VectorXd* gradient) const;
  // The values at every column of xs.
  Eigen::VectorXd ValueMany(const Eigen::MatrixXd& xs) const;

 private:
  const GpRegression* objective_;
  double incumbent_;
  const GpClassifier* feasibility_;
  const GpRegression* spread_;
};

}  // namespace dltune::internal
