#include "dltune/core/objective.h"

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {

std::string DirectionName(Direction direction) { return direction == Direction::kMaximize ? "maximize" : "minimize"; }

bool IsBetter(double a, double b, Direction direction) { return direction == Direction::kMinimize ? a < b : a > b; }

Objective Objective::Parse(std::string_view text, Direction direction) {
  const auto slash = text.find('/');
  Objective objective;
  objective.direction = direction;
  objective.split = slash == std::string_view::npos ? "valid" : std::string(text.substr(0, slash));
  objective.metric = std::string(slash == std::string_view::npos ? text : text.substr(slash + 1));
  if (objective.split.empty() || objective.metric.empty() || objective.metric.find('/') != std::string::npos) {
    throw Error(fmt::format("must name a metric as split/metric, e.g. valid/error_rate, not '{}'", text));
  }
  return objective;
}

}  // namespace dltune
