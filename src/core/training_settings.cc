#include "dltune/core/training_settings.h"

#include <charconv>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "core/eval_schedule.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

using Field = TrainingSettingField;
using Kind = TrainingSettingField::Kind;

constexpr double kMaxSteps = 1e12;

void CheckDevice(const std::string& text, std::int64_t /*max_train_steps*/) {
  if (text != "auto" && text != "cpu" && text != "cuda") throw Error("must be auto, cpu or cuda");
}

void CheckCudaGraph(const std::string& text, std::int64_t /*max_train_steps*/) {
  if (text != "auto" && text != "true" && text != "false") throw Error("must be auto, true or false");
}

void CheckFuse(const std::string& text, std::int64_t /*max_train_steps*/) {
  if (text == "off" || text == "auto" || text == "chosen") return;
  std::size_t end = 0;
  long long members = 0;
  try {
    members = std::stoll(text, &end);
  } catch (const std::exception&) {
    end = 0;
  }
  if (end == 0 || end != text.size() || members < 2 || members > 1024) {
    throw Error("must be off, auto, chosen (the default) or the most trials a fused group takes, from 2 to 1024");
  }
}

}  // namespace

const std::vector<TrainingSettingField>& TrainingSettingFields() {
  static const std::vector<Field> kFields = {
      {"eval_every_steps", "--eval-every",
       "evaluate every this many steps, and always at the last step (default: "
       "max_train_steps / 10, at least 1)",
       Kind::kCount, 1, kMaxSteps, false, true, &TrainingSettings::eval_every_steps},
      {"log_every_steps", "--log-every",
       "pull the training metrics from the device every this many steps (default: at "
       "every evaluation)",
       Kind::kCount, 1, kMaxSteps, false, true, &TrainingSettings::log_every_steps},
      {"eval_schedule", "--eval-schedule",
       "when to evaluate: every (every eval_every_steps), dense:N (also every step up to N) or log:K (K "
       "log-spaced steps); always at the last step (default: every)",
       Kind::kText, 0, 0, false, false, &TrainingSettings::eval_schedule,
       [](const std::string& text, std::int64_t) { EvalSchedule::Parse(text); }},
      {"eval_batch_size", "--eval-batch-size",
       "examples per evaluation batch (default: twice the training batch size; on a GPU 16 times)", Kind::kCount, 1,
       1e9, false, false, &TrainingSettings::eval_batch_size},
      {"train_eval_examples", "--train-eval-examples",
       "training examples evaluated for the training error, a fixed "
       "subset (default 10000)",
       Kind::kCount, 0, 1e12, false, false, &TrainingSettings::train_eval_examples},
      {"valid_sample_examples", "--valid-sample",
       "when > 0, periodic evaluations use a fixed sample of this many "
       "validation examples and the full split is evaluated at the end (default 0)",
       Kind::kCount, 0, 1e12, false, false, &TrainingSettings::valid_sample_examples},
      {"prediction_examples", "--prediction-examples",
       "validation examples whose predictions are reported at every "
       "evaluation (default 32)",
       Kind::kCount, 0, 1e6, false, false, &TrainingSettings::prediction_examples},
      {"test_at_end", "--test", "also evaluate the test split after the last step", Kind::kSwitch, 0, 0, false, false,
       &TrainingSettings::test_at_end},
      {"divergence_factor", "--divergence-factor",
       "a training loss above this multiple of the first one is divergence: "
       "the trial ends as infeasible (default 100)",
       Kind::kNumber, 1, 1e300, true, false, &TrainingSettings::divergence_factor},
      {"keep_best_checkpoints", "--keep-best", "checkpoints kept for their objective (default 1)", Kind::kCount, 0,
       1000, false, false, &TrainingSettings::keep_best_checkpoints},
      {"keep_latest_checkpoints", "--keep-latest", "newest checkpoints kept for resuming (default 2)", Kind::kCount, 1,
       1000, false, false, &TrainingSettings::keep_latest_checkpoints},
      {"threads", "--threads",
       "threads each trial uses, or auto (default): in a study, the layout of trials and threads that finishes "
       "soonest on this machine, measured once (docs/parallel-layout.md); in dltune train, every core available",
       Kind::kCount, 1, 1024, false, false, &TrainingSettings::threads, nullptr, true},
      {"profile_steps", "--profile-steps",
       "write a trace for ui.perfetto.dev of steps A:B, from step A to step B (LibTorch's operators and the "
       "trainer's spans), to profile.trace.json beside the checkpoint directory (default: none)",
       Kind::kText, 0, 0, false, false, &TrainingSettings::profile_steps,
       [](const std::string& text, std::int64_t max_train_steps) { ProfileWindow::Parse(text, max_train_steps); }},
      {"timeout", "", "a trial process running longer than this is stopped and failed (default: none)", Kind::kDuration,
       0, 365.0 * 86400, true, false, &TrainingSettings::timeout_seconds},
      {"processes", "--processes",
       "processes (ranks) that train each trial together, data-parallel: each computes its share of every batch and "
       "they average their gradients; batch_size stays the global batch (default 1; docs/data-parallel.md)",
       Kind::kCount, 1, 4096, false, false, &TrainingSettings::processes},
      {"collective_timeout", "--collective-timeout",
       "how long a data-parallel rank waits for the others before the trial fails: a rank that died or hangs "
       "(default 300s)",
       Kind::kDuration, 0, 365.0 * 86400, true, false, &TrainingSettings::collective_timeout_seconds},
      {"device", "--device",
       "where the built-in trainer trains: auto (default; a CUDA device when the process sees one, else the CPU; "
       "data-parallel ranks on the CPU), cpu or cuda (data-parallel ranks each on a GPU of their own, over NCCL)",
       Kind::kText, 0, 0, false, false, &TrainingSettings::device, CheckDevice},
      {"fuse", "",
       "built-in MLP or CNN trials of one sub-study that differ only in fusible hyperparameters train together as one "
       "array model, at most this many in a group: chosen (default: auto where the trials train on CUDA and the probe "
       "costs at most 5% of the study's steps, else off), off, auto (as many as a probe finds fastest, or none) or a "
       "number (docs/training.md, \"Fused trials\")",
       Kind::kText, 0, 0, false, false, &TrainingSettings::fuse, CheckFuse},
      {"cuda_graph", "--cuda-graph",
       "a trial or fused group training on CUDA captures its step once as a CUDA graph and replays it at every step: "
       "auto (default: where a replay is faster than the step launched eagerly, timed at the start), true or false "
       "(docs/training.md, \"CUDA graphs\")",
       Kind::kText, 0, 0, false, false, &TrainingSettings::cuda_graph, CheckCudaGraph},
  };
  return kFields;
}

Value TrainingSettingField::Get(const TrainingSettings& settings) const {
  return std::visit(
      [&](auto pointer) -> Value {
        const auto& value = settings.*pointer;
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
          return static_cast<std::int64_t>(value);  // every whole-number setting is an int64 Value
        } else {
          return value;
        }
      },
      member);
}

void TrainingSettingField::Set(TrainingSettings& settings, const Value& value, std::int64_t max_train_steps) const {
  const double upper = at_most_steps && max_train_steps > 0 ? static_cast<double>(max_train_steps) : max;
  double number = 0;
  switch (kind) {
    case Kind::kSwitch: {
      const auto* on = std::get_if<bool>(&value);
      if (!on) throw Error("must be true or false");
      settings.*std::get<bool TrainingSettings::*>(member) = *on;
      return;
    }
    case Kind::kText: {
      const auto* text = std::get_if<std::string>(&value);
      // A number or a boolean is checked as its text, so that the message says what the setting's grammar is.
      if (check_text != nullptr) check_text(text != nullptr ? *text : FormatValue(value), max_train_steps);
      if (!text && check_text == nullptr) throw Error("must be text");
      // A number its check accepted (fuse: 8) is kept as its text.
      const std::string given = text != nullptr ? *text : FormatValue(value);
      settings.*std::get<std::string TrainingSettings::*>(member) = given == "every" ? std::string() : given;
      return;
    }
    case Kind::kDuration:
      if (const auto* text = std::get_if<std::string>(&value)) {
        number = ParseDurationText(*text);
      } else if (const auto seconds = NumericValue(value); seconds && !std::holds_alternative<bool>(value)) {
        number = *seconds;
      } else {
        throw Error("must be seconds, or a number with a unit (90s, 45m, 2h, 1d)");
      }
      if (!std::isfinite(number) || number <= min || number > upper) {
        throw Error("must be a positive duration of at most a year");
      }
      break;
    case Kind::kCount: {
      if (const auto* word = std::get_if<std::string>(&value); auto_word && word != nullptr && *word == "auto") {
        number = 0;
        break;
      }
      const auto real = NumericValue(value);
      if (!real || std::holds_alternative<bool>(value) || std::floor(*real) != *real) {
        throw Error(auto_word ? "must be a whole number or auto" : "must be a whole number");
      }
      number = *real;
      if (number < min || number > upper) {
        throw Error(fmt::format("must be between {:.0f} and {:.0f}{}", min, upper, auto_word ? ", or auto" : ""));
      }
      break;
    }
    case Kind::kNumber: {
      const auto real = NumericValue(value);
      if (!real || std::holds_alternative<bool>(value) || !std::isfinite(*real)) throw Error("must be a number");
      number = *real;
      if ((min_exclusive ? number <= min : number < min) || number > upper) {
        throw Error(min_exclusive ? fmt::format("must be a number above {:g}", min)
                                  : fmt::format("must be a number between {:g} and {:g}", min, upper));
      }
      break;
    }
  }
  std::visit(
      [&](auto pointer) {
        using T = std::decay_t<decltype(settings.*pointer)>;
        if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, std::string>) {
          settings.*pointer = static_cast<T>(number);
        }
      },
      member);
}

void TrainingSettings::Validate(std::int64_t max_train_steps) const {
  TrainingSettings checked;
  for (const Field& field : TrainingSettingFields()) {
    const Value value = field.Get(*this);
    // Zero is the "derived" default of the step intervals and of the evaluation batch size, no timeout, and auto.
    const bool derived = (field.key == "eval_every_steps" || field.key == "log_every_steps" ||
                          field.key == "eval_batch_size" || field.key == "timeout" || field.auto_word) &&
                         NumericValue(value) == 0.0;
    if (derived) continue;
    try {
      field.Set(checked, value, max_train_steps);
    } catch (const Error& e) {
      throw Error(fmt::format("training.{} {}, not {}", field.key, e.what(), FormatValue(value)));
    }
  }
}

TrainingSettings TrainingSettings::Resolved(std::int64_t max_train_steps) const {
  TrainingSettings resolved = *this;
  if (resolved.eval_every_steps <= 0) resolved.eval_every_steps = std::max<std::int64_t>(1, max_train_steps / 10);
  if (resolved.log_every_steps <= 0) resolved.log_every_steps = resolved.eval_every_steps;
  return resolved;
}

nlohmann::json TrainingSettingsToJson(const TrainingSettings& settings) {
  nlohmann::json json = nlohmann::json::object();
  for (const Field& field : TrainingSettingFields()) json[std::string(field.key)] = ValueToJson(field.Get(settings));
  return json;
}

TrainingSettings TrainingSettingsFromJson(const nlohmann::json& json) {
  TrainingSettings settings;
  if (!json.is_object()) throw Error("\"training\" must be an object of settings");
  for (const Field& field : TrainingSettingFields()) {
    const auto it = json.find(std::string(field.key));
    if (it == json.end() || it->is_null()) continue;
    const auto value = ValueFromJson(*it);
    // The derived defaults (0) are written as they are.
    if (value && NumericValue(*value) == 0.0 && SameValue(field.Get(TrainingSettings{}), *value)) continue;
    try {
      if (!value) throw Error("must be a number, true or false");
      field.Set(settings, *value);
    } catch (const Error& e) {
      throw Error(fmt::format("training.{} {}, not {}", field.key, e.what(), it->dump()));
    }
  }
  return settings;
}

std::string TrainingSettingFlags(const TrainingSettings& settings) {
  static const TrainingSettings kDefaults;
  std::string flags;
  for (const Field& field : TrainingSettingFields()) {
    if (field.flag.empty() || field.Get(settings) == field.Get(kDefaults)) continue;
    if (!flags.empty()) flags += ' ';
    flags += field.flag;
    if (field.kind != Kind::kSwitch) flags += " " + FormatValue(field.Get(settings));
  }
  return flags;
}

std::optional<ProfileWindow> ProfileWindow::Parse(const std::string& text, std::int64_t max_train_steps) {
  if (text.empty()) return std::nullopt;
  const auto number = [](std::string_view digits, std::int64_t& value) {
    const auto [stop, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return !digits.empty() && error == std::errc() && stop == digits.data() + digits.size() && digits[0] != '-' &&
           digits[0] != '+';
  };
  const auto colon = text.find(':');
  ProfileWindow window;
  if (colon == std::string::npos || !number(std::string_view(text).substr(0, colon), window.begin) ||
      !number(std::string_view(text).substr(colon + 1), window.end)) {
    throw Error("must be A:B, from step A to step B (whole numbers, 0 <= A < B), e.g. 100:110");
  }
  if (window.begin >= window.end) {
    throw Error("must be A:B with A < B (from step A to step B: the steps A+1 to B)");
  }
  if (max_train_steps > 0 && window.end > max_train_steps) {
    throw Error(fmt::format("must end at step {} (max_train_steps) or before", max_train_steps));
  }
  return window;
}

std::filesystem::path ProfileTracePath(const std::filesystem::path& checkpoint_dir) {
  std::filesystem::path dir = checkpoint_dir.lexically_normal();
  if (!dir.has_filename()) dir = dir.parent_path();  // "runs/a/checkpoints/"
  return dir.parent_path() / "profile.trace.json";
}

double ParseDurationText(const std::string& text) {
  static const std::map<char, double> kUnits = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
  const auto unit = text.empty() ? kUnits.end() : kUnits.find(text.back());
  const std::size_t digits = text.size() - (unit == kUnits.end() ? 0 : 1);
  double amount = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + digits, amount);
  if (digits == 0 || error != std::errc() || end != text.data() + digits) {
    throw Error(fmt::format("must be seconds, or a number with a unit (90s, 45m, 2h, 1d), not '{}'", text));
  }
  return amount * (unit == kUnits.end() ? 1 : unit->second);
}

const std::set<std::string>& FusibleHyperparameters() {
  static const std::set<std::string> kFusible = {
      "optimizer",   "learning_rate",     "schedule",     "warmup_steps",
      "decay_steps", "final_lr_fraction", "momentum",     "one_minus_momentum",
      "beta1",       "one_minus_beta1",   "beta2",        "one_minus_beta2",
      "rho",         "epsilon",           "weight_decay",
  };
  return kFusible;
}

}  // namespace dltune
