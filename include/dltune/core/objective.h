// What a trial is judged by: one metric of one split, and whether lower or higher is better. Parsed once, from a
// spec, `dltune train --objective` or trial.json, and used as it is by the trainer, the store's summaries, the
// study session and the analyses.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

namespace dltune {

enum class Direction { kMinimize, kMaximize };

// "minimize" or "maximize".
std::string DirectionName(Direction direction);
// The direction DirectionName names; throws Error for any other text ("must be minimize or maximize, not 'x'").
Direction ParseDirection(std::string_view text);

// Whether `a` is a better objective value than `b` in `direction`.
bool IsBetter(double a, double b, Direction direction);

struct Objective {
  std::string split = "valid";
  std::string metric = "error_rate";
  Direction direction = Direction::kMinimize;

  // "valid/error_rate": how specs, trial.json and people name it.
  std::string Name() const { return split + "/" + metric; }
  // "minimize valid/error_rate": the direction and the name, as summaries print them.
  std::string Describe() const;

  // "split/metric"; a metric without a split ("loss") is the validation split's. Throws Error for an empty split
  // or metric.
  static Objective Parse(std::string_view text, Direction direction = Direction::kMinimize);

  bool operator==(const Objective&) const = default;
};

// The objective's JSON form, as trial.json holds it: {"metric": "valid/error_rate", "direction": "minimize"}.
nlohmann::json ObjectiveToJson(const Objective& objective);
// Reads ObjectiveToJson's form back; throws Error for a missing or mistyped field or a bad metric or direction.
Objective ObjectiveFromJson(const nlohmann::json& json);

}  // namespace dltune
