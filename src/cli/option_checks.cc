// Option checks shared by the commands: whole numbers and finite numbers in a range, with readable messages.
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "commands.h"

namespace dltune::cli {

CLI::Validator WholeNumberIn(long long min, long long max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        long long value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc() || end != text.data() + text.size()) {
          return fmt::format("must be a whole number, not '{}'", text);
        }
        if (value < min || value > max) return fmt::format("must be between {} and {}, not {}", min, max, text);
        return "";
      },
      fmt::format("INT in {}..{}", min, max));
}

CLI::Validator FiniteNumberIn(double min, double max) {
  return CLI::Validator(
      [min, max](std::string& text) -> std::string {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(value)) {
          return fmt::format("must be a number, not '{}'", text);
        }
        if (value < min || value > max) return fmt::format("must be between {:g} and {:g}, not {}", min, max, text);
        return "";
      },
      fmt::format("NUMBER in {:g}..{:g}", min, max));
}

}  // namespace dltune::cli
