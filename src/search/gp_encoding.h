// How the gp sampler turns a trial's params into the features its models see.
//
// Each param is one feature group with its own length scale. Ranges become their unit-interval position (log
// ranges in log space, integers at the middle of their share, as Param::ToUnit places them), discrete lists their
// position in the list, categorical lists one-hot features scaled by 1/sqrt(2) so that two different values are at
// squared distance 1, like the two ends of a range. A conditional param that does not exist in a trial is encoded
// at a fixed place: the middle (0.5) for numbers, all zeros for one-hot features.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include <Eigen/Core>

#include "dltune/space/search_space.h"

namespace dltune::internal {

class GpEncoding {
 public:
  // `params`: indices into space.params() of the params that become feature groups, in this order. The space must
  // outlive the encoding.
  GpEncoding(const SearchSpace& space, std::vector<std::size_t> params);

  int features() const { return static_cast<int>(feature_groups_.size()); }
  int groups() const { return static_cast<int>(params_.size()); }
  const std::vector<int>& feature_groups() const { return feature_groups_; }
  const std::vector<std::size_t>& params() const { return params_; }
  // The first feature of group g (its only one unless it is categorical).
  int FirstFeature(int group) const { return first_feature_[static_cast<std::size_t>(group)]; }

  // The features of a trial's params (other params are ignored). nullopt when the trial cannot be placed: a param
  // that exists in it (its conditions hold) is missing, a list param's value is not one of the list's, or a range
  // param's value is not a number, is not positive on a log scale, or lies more than one range width outside the
  // range. Values outside a range but within that margin keep their position outside [0, 1].
  std::optional<Eigen::VectorXd> Encode(const Assignment& values) const;

 private:
  const SearchSpace* space_;
  std::vector<std::size_t> params_;
  std::vector<int> first_feature_;
  std::vector<int> feature_groups_;
};

}  // namespace dltune::internal
