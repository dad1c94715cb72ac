#include "gp_regression.h"

#include <cmath>

#include <gtest/gtest.h>

#include "gp_acquisition.h"
#include "gp_classifier.h"

namespace dltune::internal {
namespace {

// Three points in two features with fixed hyperparameters (s2 = 1.5, l = (0.3, 0.7), noise 0.01).
struct SmallCase {
  Eigen::MatrixXd points = (Eigen::MatrixXd(2, 3) << 0.1, 0.5, 0.8, 0.2, 0.9, 0.4).finished();
  Eigen::VectorXd y = (Eigen::VectorXd(3) << 0.3, -1.2, 0.8).finished();
  Eigen::VectorXd lengths = (Eigen::VectorXd(2) << 0.3, 0.7).finished();
  GpRegression model{points, y, ArdMatern({0, 1}, 1.5, lengths), 0.01};
};

TEST(GpRegression, PosteriorMatchesAnIndependentSolution) {
  // Expected values: numpy 1.24, K = [k(x_i, x_j)] + 0.01 I, mean = k*^T K^-1 y, variance = s2 - k*^T K^-1 k*
  // with np.linalg.solve, k(r2) = s2 (1 + sqrt(5 r2) + 5/3 r2) exp(-sqrt(5 r2)).
  const SmallCase c;
  struct Expected {
    double x0, x1, mean, variance;
  };
  for (const Expected& e : {Expected{0.4, 0.5, -0.5948842150386782, 0.5456540000008154},
                            Expected{0.1, 0.2, 0.295940265433594, 0.00993027839634375},
                            Expected{0.95, 0.05, 0.7898191663977066, 0.7363573340143533}}) {
    double mean = 0;
    double variance = 0;
    c.model.Predict(Eigen::Vector2d(e.x0, e.x1), mean, variance, nullptr, nullptr);
    EXPECT_NEAR(mean, e.mean, 1e-12) << e.x0 << "," << e.x1;
    EXPECT_NEAR(variance, e.variance, 1e-12) << e.x0 << "," << e.x1;
  }
  // The same from the batch path.
  Eigen::VectorXd means;
  Eigen::VectorXd variances;
  c.model.PredictMany((Eigen::MatrixXd(2, 1) << 0.4, 0.5).finished(), means, variances);
  EXPECT_NEAR(means(0), -0.5948842150386782, 1e-12);
  EXPECT_NEAR(variances(0), 0.5456540000008154, 1e-12);

  // The log marginal likelihood (numpy: -y^T K^-1 y / 2 - log|K| / 2 - 3/2 log(2 pi)).
  const GpFitObjective objective(c.points, c.y, {0, 1}, 2);
  const Eigen::Vector4d theta(std::log(1.5), std::log(0.3), std::log(0.7), std::log(0.01));
  EXPECT_NEAR(objective.LogMarginalLikelihood(theta, nullptr), -4.5011723446817715, 1e-12);
}

TEST(GpRegression, PosteriorGradientsMatchFiniteDifferences) {
  const SmallCase c;
  const Eigen::Vector2d x(0.37, 0.61);
  double mean = 0;
  double variance = 0;
  Eigen::VectorXd mean_gradient;
  Eigen::VectorXd variance_gradient;
  c.model.Predict(x, mean, variance, &mean_gradient, &variance_gradient);
  for (int f = 0; f < 2; ++f) {
    Eigen::Vector2d up = x;
    Eigen::Vector2d down = x;
    up(f) += 1e-6;
    down(f) -= 1e-6;
    double m_up = 0, v_up = 0, m_down = 0, v_down = 0;
    c.model.Predict(up, m_up, v_up, nullptr, nullptr);
    c.model.Predict(down, m_down, v_down, nullptr, nullptr);
    EXPECT_NEAR(mean_gradient(f), (m_up - m_down) / 2e-6, 1e-7);
    EXPECT_NEAR(variance_gradient(f), (v_up - v_down) / 2e-6, 1e-7);
  }
}

// Twelve points of a smooth function of three features, one of them a two-value one-hot group.
struct FitCase {
  Eigen::MatrixXd points{4, 12};
  Eigen::VectorXd y{12};
  std::vector<int> groups = {0, 1, 2, 2};
  FitCase() {
    for (int i = 0; i < 12; ++i) {
      const double a = std::fmod(0.37 * i + 0.1, 1.0);
      const double b = std::fmod(0.61 * i + 0.3, 1.0);
      const bool category = i % 3 == 0;
      points.col(i) << a, b, category ? M_SQRT1_2 : 0.0, category ? 0.0 : M_SQRT1_2;
      y(i) = std::sin(4 * a) + 0.3 * b + (category ? 0.5 : 0.0);
    }
    y = (y.array() - y.mean()) / std::sqrt((y.array() - y.mean()).square().mean());
  }
};

TEST(GpRegression, LogLikelihoodGradientsMatchFiniteDifferences) {
  const FitCase c;
  const GpFitObjective objective(c.points, c.y, c.groups, 3);
  for (const Eigen::VectorXd& theta : {objective.PriorMode(), objective.DataDrivenStart(), objective.PriorDraw(7)}) {
    Eigen::VectorXd gradient;
    Eigen::VectorXd posterior_gradient;
    objective.LogMarginalLikelihood(theta, &gradient);
    objective.LogPosterior(theta, &posterior_gradient);
    ASSERT_EQ(gradient.size(), 5);
    for (int j = 0; j < theta.size(); ++j) {
      Eigen::VectorXd up = theta;
      Eigen::VectorXd down = theta;
      up(j) += 1e-5;
      down(j) -= 1e-5;
      const double numeric =
          (objective.LogMarginalLikelihood(up, nullptr) - objective.LogMarginalLikelihood(down, nullptr)) / 2e-5;
      EXPECT_NEAR(gradient(j), numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << "theta " << j;
      const double posterior_numeric =
          (objective.LogPosterior(up, nullptr) - objective.LogPosterior(down, nullptr)) / 2e-5;
      EXPECT_NEAR(posterior_gradient(j), posterior_numeric, 1e-5 * std::max(1.0, std::abs(posterior_numeric)));
    }
  }
}

TEST(GpRegression, FitImprovesOnEveryStartAndPredictsHeldOutPoints) {
  const FitCase c;
  const GpFitObjective objective(c.points, c.y, c.groups, 3);
  const GpHyperparameters hyper = FitGpHyperparameters(c.points, c.y, c.groups, 3, GpFitOptions{});
  Eigen::VectorXd theta(5);
  theta << std::log(hyper.signal_variance), hyper.length_scales.array().log().matrix(), std::log(hyper.noise_variance);
  const double fitted = objective.LogPosterior(theta, nullptr);
  EXPECT_GE(fitted, objective.LogPosterior(objective.PriorMode(), nullptr));
  EXPECT_GE(fitted, objective.LogPosterior(objective.DataDrivenStart(), nullptr));
  // A smooth, noise-free function: the fitted noise is small and the model interpolates.
  EXPECT_LT(hyper.noise_variance, 0.05);
  const GpRegression model(c.points, c.y, ArdMatern(c.groups, hyper.signal_variance, hyper.length_scales),
                           hyper.noise_variance);
  double mean = 0;
  double variance = 0;
  model.Predict(c.points.col(4), mean, variance, nullptr, nullptr);
  EXPECT_NEAR(mean, c.y(4), 0.1);
}

TEST(GpAcquisition, GradientMatchesFiniteDifferences) {
  const SmallCase c;
  Eigen::MatrixXd labelled(2, 5);
  labelled << c.points, (Eigen::MatrixXd(2, 2) << 0.9, 0.95, 0.9, 0.7).finished();
  const GpClassifier feasibility(labelled, (Eigen::VectorXd(5) << 1, 1, 1, -1, -1).finished(), {0, 1}, {c.lengths},
                                 {1.0, 4.0});
  const GpRegression spread((Eigen::MatrixXd(2, 1) << 0.3, 0.3).finished(), Eigen::VectorXd::Zero(1),
                            ArdMatern({0, 1}, 1.0, c.lengths), 1e-6);
  const GpAcquisition with_objective(&c.model, -1.0, &feasibility, nullptr);
  const GpAcquisition feasibility_alone(nullptr, 0.0, &feasibility, &spread);
  for (const GpAcquisition* acquisition : {&with_objective, &feasibility_alone}) {
    for (const Eigen::Vector2d& x :
         {Eigen::Vector2d(0.37, 0.61), Eigen::Vector2d(0.05, 0.9), Eigen::Vector2d(0.7, 0.3)}) {
      Eigen::VectorXd gradient;
      const double value = acquisition->Value(x, &gradient);
      EXPECT_NEAR(value, acquisition->ValueMany(x)(0), 1e-10);
      for (int f = 0; f < 2; ++f) {
        Eigen::Vector2d up = x;
        Eigen::Vector2d down = x;
        up(f) += 1e-6;
        down(f) -= 1e-6;
        const double numeric = (acquisition->Value(up, nullptr) - acquisition->Value(down, nullptr)) / 2e-6;
        EXPECT_NEAR(gradient(f), numeric, 1e-5 * std::max(1.0, std::abs(numeric))) << x.transpose() << " f" << f;
      }
    }
  }
}

}  // namespace
}  // namespace dltune::internal
