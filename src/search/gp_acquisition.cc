#include "gp_acquisition.h"

#include <cmath>

#include "log_ei.h"

namespace dltune::internal {
namespace {

// Keeps log(sd) finite at observed points.
constexpr double kVarianceFloor = 1e-20;

}  // namespace

GpAcquisition::GpAcquisition(const GpRegression* objective, double incumbent, const GpClassifier* feasibility,
                             const GpRegression* spread)
    : objective_(objective), incumbent_(incumbent), feasibility_(feasibility), spread_(spread) {}

double GpAcquisition::Value(const Eigen::Ref<const Eigen::VectorXd>& x, Eigen::VectorXd* gradient) const {
  double value = 0;
  if (gradient != nullptr) *gradient = Eigen::VectorXd::Zero(x.size());
  Eigen::VectorXd mean_gradient;
  Eigen::VectorXd variance_gradient;
  Eigen::VectorXd* mean_out = gradient != nullptr ? &mean_gradient : nullptr;
  Eigen::VectorXd* variance_out = gradient != nullptr ? &variance_gradient : nullptr;
  if (objective_ != nullptr) {
    double mean = 0;
    double variance = 0;
    objective_->Predict(x, mean, variance, mean_out, variance_out);
    variance += kVarianceFloor;
    const double sd = std::sqrt(variance);
    const double z = (incumbent_ - mean) / sd;
    value += std::log(sd) + LogEi(z);
    if (gradient != nullptr) {
      // log EI = log sd + h(z), z = (incumbent - mean) / sd.
      const Eigen::VectorXd sd_gradient = variance_gradient / (2.0 * sd);
      const Eigen::VectorXd z_gradient = (-mean_gradient - z * sd_gradient) / sd;
      *gradient += sd_gradient / sd + LogEiDerivative(z) * z_gradient;
    }
  } else if (spread_ != nullptr) {
    double mean = 0;
    double variance = 0;
    spread_->Predict(x, mean, variance, nullptr, variance_out);
    value += 0.5 * std::log(variance + kVarianceFloor);
    if (gradient != nullptr) *gradient += 0.5 * variance_gradient / (variance + kVarianceFloor);
  }
  if (feasibility_ != nullptr) {
    Eigen::VectorXd feasibility_gradient;
    value += feasibility_->LogProbability(x, gradient != nullptr ? &feasibility_gradient : nullptr);
    if (gradient != nullptr) *gradient += feasibility_gradient;
  }
  return value;
}

Eigen::VectorXd GpAcquisition::ValueMany(const Eigen::MatrixXd& xs) const {
  Eigen::VectorXd values = Eigen::VectorXd::Zero(xs.cols());
  Eigen::VectorXd mean;
  Eigen::VectorXd variance;
  if (objective_ != nullptr) {
    objective_->PredictMany(xs, mean, variance);
    for (Eigen::Index j = 0; j < xs.cols(); ++j) {
      const double sd = std::sqrt(variance(j) + kVarianceFloor);
      values(j) = std::log(sd) + LogEi((incumbent_ - mean(j)) / sd);
    }
  } else if (spread_ != nullptr) {
    spread_->PredictMany(xs, mean, variance);
    values += 0.5 * (variance.array() + kVarianceFloor).log().matrix();
  }
  if (feasibility_ != nullptr) values += feasibility_->LogProbabilityMany(xs);
  return values;
}

}  // namespace dltune::internal
