#include "core/eval_schedule.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

constexpr std::string_view kForms = "every, dense:N (every step up to N) or log:K (K log-spaced points, K >= 2)";

// The step of log-spaced point i of k over [1, max_train_steps].
std::int64_t LogPoint(std::int64_t i, std::int64_t k, std::int64_t max_train_steps) {
  const double fraction = static_cast<double>(i) / static_cast<double>(k - 1);
  return std::llround(std::exp(fraction * std::log(static_cast<double>(max_train_steps))));
}

}  // namespace

EvalSchedule EvalSchedule::Parse(std::string_view text) {
  if (text.empty() || text == "every") return {};
  const auto colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  EvalSchedule schedule;
  if (name == "dense") {
    schedule.kind = Kind::kDenseStart;
  } else if (name == "log") {
    schedule.kind = Kind::kLogSpaced;
  } else {
    throw Error(fmt::format("must be {}, not '{}'", kForms, text));
  }
  const std::string_view number = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  const auto [end, error] = std::from_chars(number.data(), number.data() + number.size(), schedule.count);
  const std::int64_t least = schedule.kind == Kind::kLogSpaced ? 2 : 1;
  if (number.empty() || error != std::errc() || end != number.data() + number.size() || schedule.count < least) {
    throw Error(fmt::format("must be {}, not '{}'", kForms, text));
  }
  return schedule;
}

std::string EvalSchedule::Text() const {
  switch (kind) {
    case Kind::kEvery: return "every";
    case Kind::kDenseStart: return fmt::format("dense:{}", count);
    case Kind::kLogSpaced: return fmt::format("log:{}", count);
  }
  return "every";
}

bool EvalSchedule::Evaluates(std::int64_t step, std::int64_t every, std::int64_t max_train_steps) const {
  if (step == max_train_steps) return true;
  switch (kind) {
    case Kind::kEvery: return every > 0 && step % every == 0;
    case Kind::kDenseStart: return step <= count || (every > 0 && step % every == 0);
    case Kind::kLogSpaced: {
      if (step < 1 || max_train_steps <= 1) return step == 1;
      // The point nearest `step`, and its neighbours for rounding: the same formula decides, never a second one.
      const double position = std::log(static_cast<double>(step)) / std::log(static_cast<double>(max_train_steps)) *
                              static_cast<double>(count - 1);
      const auto nearest = static_cast<std::int64_t>(std::floor(position));
      for (std::int64_t i = std::max<std::int64_t>(0, nearest - 1); i <= std::min(count - 1, nearest + 2); ++i) {
        if (LogPoint(i, count, max_train_steps) == step) return true;
      }
      return false;
    }
  }
  return false;
}

}  // namespace dltune
