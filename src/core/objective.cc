#include "dltune/core/objective.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "dltune/core/error.h"

namespace dltune {

namespace {

constexpr std::string_view kMinimizeName = "minimize";
constexpr std::string_view kMaximizeName = "maximize";

}  // namespace

std::string DirectionName(Direction direction) {
  return std::string(direction == Direction::kMaximize ? kMaximizeName : kMinimizeName);
}

// The only place a direction is read from text: specs, trial.json and every other reader come here.
Direction ParseDirection(std::string_view text) {
  if (text == kMinimizeName) return Direction::kMinimize;
  if (text == kMaximizeName) return Direction::kMaximize;
  const std::vector<std::string> names = {std::string(kMinimizeName), std::string(kMaximizeName)};
  throw Error(fmt::format("must be {} or {}, not '{}'{}", kMinimizeName, kMaximizeName, text, DidYouMean(text, names)));
}

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

std::string Objective::Describe() const { return DirectionName(direction) + " " + Name(); }

nlohmann::json ObjectiveToJson(const Objective& objective) {
  return {{"metric", objective.Name()}, {"direction", DirectionName(objective.direction)}};
}

Objective ObjectiveFromJson(const nlohmann::json& json) {
  std::string metric;
  std::string direction;
  try {
    metric = json.at("metric").get<std::string>();
    direction = json.at("direction").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("objective: missing or mistyped field: {}", e.what()));
  }
  try {
    return Objective::Parse(metric, ParseDirection(direction));
  } catch (const Error& e) {
    throw Error(fmt::format("objective: {}", e.what()));
  }
}

}  // namespace dltune
