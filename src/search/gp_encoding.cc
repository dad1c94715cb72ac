#include "gp_encoding.h"

#include <cmath>
#include <numbers>
#include <utility>

namespace dltune::internal {
namespace {

constexpr double kInactive = 0.5;
// How far outside [0, 1] a range value may lie and still be used.
constexpr double kOutsideMargin = 1.0;

int Width(const Param& param) {
  return param.kind == ParamKind::kCategorical ? static_cast<int>(param.values.size()) : 1;
}

}  // namespace

GpEncoding::GpEncoding(const SearchSpace& space, std::vector<std::size_t> params)
    : space_(&space), params_(std::move(params)) {
  for (std::size_t g = 0; g < params_.size(); ++g) {
    first_feature_.push_back(static_cast<int>(feature_groups_.size()));
    const int width = Width(space.params()[params_[g]]);
    for (int k = 0; k < width; ++k) feature_groups_.push_back(static_cast<int>(g));
  }
}

std::optional<Eigen::VectorXd> GpEncoding::Encode(const Assignment& values) const {
  Eigen::VectorXd x = Eigen::VectorXd::Zero(features());
  for (std::size_t g = 0; g < params_.size(); ++g) {
    const Param& param = space_->params()[params_[g]];
    const int first = first_feature_[g];
    const bool exists = SearchSpace::ConditionsHold(param, values);
    const auto it = values.find(param.id);
    if (!exists) {
      if (param.kind != ParamKind::kCategorical) x(first) = kInactive;
      continue;
    }
    if (it == values.end()) return std::nullopt;
    switch (param.kind) {
      case ParamKind::kFloat:
      case ParamKind::kInt: {
        auto number = NumericValue(it->second);
        if (!number || !std::isfinite(*number)) return std::nullopt;
        if (param.kind == ParamKind::kInt) number = std::round(*number);
        if (param.scale == Scale::kLog && *number <= (param.kind == ParamKind::kInt ? -0.5 : 0.0)) {
          return std::nullopt;
        }
        const double u = param.ToUnit(*number);
        if (!std::isfinite(u) || u < -kOutsideMargin || u > 1.0 + kOutsideMargin) return std::nullopt;
        x(first) = u;
        break;
      }
      case ParamKind::kDiscrete:
      case ParamKind::kCategorical:
      case ParamKind::kFixed: {
        std::size_t index = param.values.size();
        for (std::size_t i = 0; i < param.values.size(); ++i) {
          if (SameValue(param.values[i], it->second)) index = i;
        }
        if (index == param.values.size()) return std::nullopt;
        if (param.kind == ParamKind::kCategorical) {
          x(first + static_cast<int>(index)) = std::numbers::sqrt2 / 2.0;
        } else {
          x(first) = param.ToUnit(param.values[index]);
        }
        break;
      }
    }
  }
  return x;
}

}  // namespace dltune::internal
