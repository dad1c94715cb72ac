// Option checks shared by the commands: whole numbers and finite numbers in a range, with readable messages; the
// training settings as options.
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "commands.h"
#include "dltune/core/error.h"
#include "space/yaml_node.h"

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

namespace {

// An option's text as a value, read as a spec reads a scalar (numbers, booleans, text).
Value ScalarValue(const std::string& text) { return YamlNode::Parse(text, "option").AsValue(); }

}  // namespace

void AddTrainingSettingOptions(CLI::App* command, TrainingSettingOptions& options) {
  for (const TrainingSettingField& field : TrainingSettingFields()) {
    if (field.flag.empty()) continue;
    const std::string key(field.key);
    std::string help(field.help);
    if (!help.empty()) help[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(help[0])));
    help += " (a spec's training." + key + ")";
    CLI::Option* option = nullptr;
    if (field.kind == TrainingSettingField::Kind::kSwitch) {
      option = command->add_flag(std::string(field.flag), options.switches_[key], help);
    } else {
      option = command->add_option(std::string(field.flag), options.values_[key], help)
                   ->check(CLI::Validator(
                       [&field](std::string& text) -> std::string {
                         try {
                           TrainingSettings scratch;
                           field.Set(scratch, ScalarValue(text));
                           return "";
                         } catch (const Error& e) {
                           return fmt::format("{}, not '{}'", e.what(), text);
                         }
                       },
                       ""));
    }
    options.given_.emplace_back(&field, option);
  }
}

TrainingSettings TrainingSettingOptions::Settings() const {
  TrainingSettings settings;
  for (const auto& [field, option] : given_) {
    if (option->count() == 0) continue;
    const std::string key(field->key);
    if (field->kind == TrainingSettingField::Kind::kSwitch) {
      field->Set(settings, switches_.at(key));
    } else {
      field->Set(settings, ScalarValue(values_.at(key)));
    }
  }
  return settings;
}

}  // namespace dltune::cli
