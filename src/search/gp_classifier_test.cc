#include "gp_classifier.h"

#include <cmath>

#include <gtest/gtest.h>

namespace dltune::internal {
namespace {

// A separable toy set: an 8 x 8 grid of the unit square, feasible where x0 < 0.4, infeasible where x0 > 0.6.
struct ToySet {
  Eigen::MatrixXd points{2, 48};
  Eigen::VectorXd labels{48};
  ToySet() {
    int n = 0;
    for (int i = 0; i < 8; ++i) {
      for (int j = 0; j < 8; ++j) {
        const double x0 = (i + 0.5) / 8;
        if (std::abs(x0 - 0.5) < 0.1) continue;
        points.col(n) << x0, (j + 0.5) / 8;
        labels(n++) = x0 < 0.5 ? 1.0 : -1.0;
      }
    }
  }
};

TEST(GpClassifier, SeparatesASeparableToySet) {
  const ToySet toy;
  const GpClassifier classifier(toy.points, toy.labels, {0, 1}, {Eigen::Vector2d(0.5, 1.0), Eigen::Vector2d(0.2, 0.4)},
                                {0.25, 1.0, 4.0, 16.0});
  EXPECT_GT(std::exp(classifier.LogProbability(Eigen::Vector2d(0.1, 0.5), nullptr)), 0.9);
  EXPECT_GT(std::exp(classifier.LogProbability(Eigen::Vector2d(0.2, 0.3), nullptr)), 0.9);
  EXPECT_LT(std::exp(classifier.LogProbability(Eigen::Vector2d(0.9, 0.5), nullptr)), 0.1);
  EXPECT_LT(std::exp(classifier.LogProbability(Eigen::Vector2d(0.8, 0.7), nullptr)), 0.1);
  // Half feasible: the prior mean is Phi^-1(25 / 50) = 0.
  EXPECT_NEAR(classifier.prior_mean(), 0.0, 1e-12);
  // The chosen hyperparameters have the largest evidence.
  for (const double signal : {0.25, 1.0, 4.0, 16.0}) {
    for (const Eigen::Vector2d& lengths : {Eigen::Vector2d(0.5, 1.0), Eigen::Vector2d(0.2, 0.4)}) {
      const GpClassifier alone(toy.points, toy.labels, {0, 1}, {lengths}, {signal});
      EXPECT_LE(alone.log_evidence(), classifier.log_evidence() + 1e-9) << signal;
    }
  }
}

TEST(GpClassifier, MatchesAnIndependentSolution) {
  // Twenty points, feasible where x0 < 0.5; l = (0.2, 1), s2 = 4. Expected values: numpy 1.24 / scipy 1.10, the
  // mode by scipy.optimize.minimize (BFGS, gtol 1e-10) of log p(y | m + K a) - a^T K a / 2 over a, then R&W eq. 3.82
  // and 3.32 with np.linalg.cholesky of B = I + W^(1/2) K W^(1/2).
  Eigen::MatrixXd points(2, 20);
  Eigen::VectorXd labels(20);
  for (int i = 0; i < 20; ++i) {
    points.col(i) << (i < 10 ? 0.05 * i : 0.6 + 0.04 * (i - 10)), std::fmod(0.37 * i, 1.0);
    labels(i) = i < 10 ? 1.0 : -1.0;
  }
  const GpClassifier classifier(points, labels, {0, 1}, {Eigen::Vector2d(0.2, 1.0)}, {4.0});
  EXPECT_NEAR(std::exp(classifier.LogProbability(Eigen::Vector2d(0.15, 0.5), nullptr)), 0.9124857531534089, 1e-6);
  EXPECT_NEAR(std::exp(classifier.LogProbability(Eigen::Vector2d(0.85, 0.5), nullptr)), 0.07757516625108625, 1e-6);
  EXPECT_NEAR(classifier.log_evidence(), -6.004035651759976, 1e-6);
}

TEST(GpClassifier, LaplaceModeSatisfiesItsFixedPointEquation) {
  // At the mode f = K grad log p(y | m + f) (R&W eq. 3.17), so the latent mean at a training point is m + f_i;
  // on a separable set it lies on the side of the point's label.
  const ToySet toy;
  const GpClassifier classifier(toy.points, toy.labels, {0, 1}, {Eigen::Vector2d(0.5, 1.0)}, {4.0});
  for (int i = 0; i < 48; ++i) {
    const double p = std::exp(classifier.LogProbability(toy.points.col(i), nullptr));
    if (toy.labels(i) > 0) {
      EXPECT_GT(p, 0.5) << i;
    } else {
      EXPECT_LT(p, 0.5) << i;
    }
  }
}

TEST(GpClassifier, GradientAndBatchMatchThePointwiseValue) {
  const ToySet toy;
  const GpClassifier classifier(toy.points, toy.labels, {0, 1}, {Eigen::Vector2d(0.5, 1.0)}, {1.0, 4.0});
  Eigen::MatrixXd xs(2, 3);
  xs << 0.55, 0.1, 0.9, 0.4, 0.8, 0.05;
  const Eigen::VectorXd many = classifier.LogProbabilityMany(xs);
  for (int j = 0; j < 3; ++j) {
    const Eigen::Vector2d x = xs.col(j);
    Eigen::VectorXd gradient;
    EXPECT_NEAR(classifier.LogProbability(x, &gradient), many(j), 1e-12);
    for (int f = 0; f < 2; ++f) {
      Eigen::Vector2d up = x;
      Eigen::Vector2d down = x;
      up(f) += 1e-6;
      down(f) -= 1e-6;
      const double numeric = (classifier.LogProbability(up, nullptr) - classifier.LogProbability(down, nullptr)) / 2e-6;
      EXPECT_NEAR(gradient(f), numeric, 1e-6 * std::max(1.0, std::abs(numeric))) << j << " " << f;
    }
  }
}

TEST(GpClassifier, OnlyInfeasibleTrialsPointAwayFromThem) {
  Eigen::MatrixXd points(2, 3);
  points << 0.9, 0.8, 0.95, 0.9, 0.95, 0.7;
  const GpClassifier classifier(points, -Eigen::VectorXd::Ones(3), {0, 1}, {Eigen::Vector2d(0.3, 0.3)}, {1.0});
  EXPECT_GT(classifier.LogProbability(Eigen::Vector2d(0.1, 0.1), nullptr),
            classifier.LogProbability(Eigen::Vector2d(0.85, 0.85), nullptr));
}

}  // namespace
}  // namespace dltune::internal
