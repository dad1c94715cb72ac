#include "trial/trial_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/reproduction.h"
#include "core/sha256.h"
#include "core/strings.h"

namespace dltune {
namespace {

constexpr std::array<std::pair<EndState, const char*>, 3> kEndStates = {
    {{EndState::kCompleted, "completed"}, {EndState::kInfeasible, "infeasible"}, {EndState::kStopped, "stopped"}}};

const char* EndStateName(EndState state) {
  return std::find_if(kEndStates.begin(), kEndStates.end(), [&](const auto& entry) { return entry.first == state; })
      ->second;
}

using nlohmann::json;

// Python writes NaN, Infinity and -Infinity, which are not JSON; turn them (outside strings) into strings that
// ReadLoss understands.
std::string QuoteNonFiniteTokens(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  bool in_string = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < line.size()) {
        out += line[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (std::string_view token : {"-Infinity", "Infinity", "NaN"}) {
      if (line.substr(i, token.size()) == token) {
        out += '"';
        out.append(token);
        out += '"';
        i += token.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

class LineParser {
 public:
  LineParser(const json& object, std::size_t line_number) : object_(object), line_number_(line_number) {}

  [[noreturn]] void Fail(const std::string& message) const {
    throw ProtocolError(fmt::format("report line {}: {}", line_number_, message));
  }

  const json* Find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

  std::int64_t Step() const {
    const json* step = Find("step");
    if (!step) Fail("needs \"step\"");
    if (!step->is_number_integer() || step->get<std::int64_t>() < 0) {
      Fail(fmt::format("\"step\" must be a whole number >= 0, not {}", step->dump()));
    }
    return step->get<std::int64_t>();
  }

  std::optional<double> Number(const char* key, bool allow_non_finite = false) const {
    const json* value = Find(key);
    if (!value) return std::nullopt;
    if (value->is_string() && allow_non_finite) {
      const std::string text = value->get<std::string>();
      if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
      if (text == "Infinity") return std::numeric_limits<double>::infinity();
      if (text == "-Infinity") return -std::numeric_limits<double>::infinity();
    }
    if (!value->is_number()) Fail(fmt::format("\"{}\" must be a number, not {}", key, value->dump()));
    const double number = value->get<double>();
    if (!std::isfinite(number)) Fail(fmt::format("\"{}\" must be finite", key));
    return number;
  }

  std::optional<bool> Bool(const char* key) const {
    const json* value = Find(key);
    if (!value) return std::nullopt;
    if (!value->is_boolean()) Fail(fmt::format("\"{}\" must be true or false, not {}", key, value->dump()));
    return value->get<bool>();
  }

  std::string Text(const char* key, bool required) const {
    const json* value = Find(key);
    if (!value) {
      if (required) Fail(fmt::format("needs \"{}\"", key));
      return "";
    }
    if (!value->is_string()) Fail(fmt::format("\"{}\" must be text, not {}", key, value->dump()));
    return value->get<std::string>();
  }

 private:
  const json& object_;
  std::size_t line_number_;
};

// A runtime line's versions: an object of at most 64 names, each a text (a number or true/false is kept as its JSON
// text), at most 256 bytes long.
std::map<std::string, std::string> RuntimeOf(const json& object, std::size_t line_number) {
  const auto it = object.find("runtime");
  if (it == object.end() || !it->is_object() || it->size() > 64) {
    throw ProtocolError(
        fmt::format("report line {}: \"runtime\" must be an object of at most 64 versions by name", line_number));
  }
  std::map<std::string, std::string> runtime;
  for (const auto& [name, value] : it->items()) {
    if (!value.is_string() && !value.is_number() && !value.is_boolean()) {
      throw ProtocolError(fmt::format("report line {}: runtime \"{}\" must be text, not {}", line_number,
                                      SanitizeUtf8(name), value.dump()));
    }
    std::string text = value.is_string() ? value.get<std::string>() : value.dump();
    if (text.size() > 256 || name.size() > 64) {
      throw ProtocolError(fmt::format("report line {}: runtime \"{}\" is longer than a version", line_number,
                                      SanitizeUtf8(name.substr(0, 64))));
    }
    runtime[SanitizeUtf8(name)] = SanitizeUtf8(text);
  }
  return runtime;
}

// The report line's fields, checked; `object` is what the line parsed to.
ReportLine ParseReportObject(const json& object, std::size_t line_number) {
  if (!object.is_object()) {
    throw ProtocolError(fmt::format("report line {} must be a JSON object, not {}", line_number, object.dump()));
  }
  const LineParser p(object, line_number);
  const std::string type = p.Text("type", true);
  ReportLine result;
  if (type == "start") {
    result.start = ReportStart{.step = p.Step(), .manages_checkpoints = p.Bool("manages_checkpoints").value_or(false)};
  } else if (type == "runtime") {
    result.runtime = RuntimeOf(object, line_number);
  } else if (type == "train") {
    result.train = TrainMeasurement{.step = p.Step(),
                                    .loss = p.Number("loss", true),
                                    .learning_rate = p.Number("learning_rate"),
                                    .grad_norm = p.Number("grad_norm"),
                                    .clipped = p.Bool("clipped"),
                                    .step_time = p.Number("step_time"),
                                    .data_wait = p.Number("data_wait"),
                                    .examples_per_second = p.Number("examples_per_second")};
  } else if (type == "eval") {
    ReportEval eval{.step = p.Step(), .split = p.Text("split", true)};
    if (eval.split.empty()) p.Fail("\"split\" must not be empty");
    const json* metrics = p.Find("metrics");
    if (!metrics || !metrics->is_object() || metrics->empty()) {
      p.Fail("needs \"metrics\": an object of metric names and numbers, e.g. {\"error_rate\": 0.12}");
    }
    for (const auto& [name, value] : metrics->items()) {
      if (!value.is_number() || !std::isfinite(value.get<double>())) {
        p.Fail(fmt::format("metric \"{}\" must be a finite number, not {}", name, value.dump()));
      }
      eval.metrics[name] = value.get<double>();
    }
    if (const json* examples = p.Find("examples")) {
      if (!examples->is_number_integer() || examples->get<std::int64_t>() < 0) {
        p.Fail("\"examples\" must be a whole number >= 0");
      }
      eval.examples = examples->get<std::int64_t>();
    }
    result.eval = std::move(eval);
  } else if (type == "checkpoint") {
    ReportCheckpoint checkpoint{.step = p.Step(),
                                .path = p.Text("path", true),
                                .objective = p.Number("objective"),
                                .checksum = p.Text("checksum", false),
                                .best = p.Bool("best").value_or(false),
                                .deleted = p.Bool("deleted").value_or(false)};
    if (checkpoint.path.empty()) p.Fail("\"path\" must not be empty");
    if (!checkpoint.checksum.empty()) {
      const auto canonical = CanonicalChecksum(checkpoint.checksum);
      if (!canonical) {
        p.Fail(
            fmt::format("\"checksum\" must be \"sha256:\" and the 64 hex digits of the checkpoint's SHA-256, not '{}'",
                        checkpoint.checksum.substr(0, 100)));
      }
      checkpoint.checksum = *canonical;
    }
    result.checkpoint = std::move(checkpoint);
  } else if (type == "timing") {
    const json* seconds = p.Find("seconds");
    if (!seconds || !seconds->is_object()) {
      p.Fail("needs \"seconds\": an object of phases and seconds, e.g. {\"train\": 4.5, \"evaluation\": 0.6}");
    }
    ReportTiming timing;
    for (const auto& [phase, value] : seconds->items()) {
      if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() < 0) {
        p.Fail(fmt::format("\"seconds\" of \"{}\" must be a finite number >= 0, not {}", phase, value.dump()));
      }
      timing.seconds[phase] = value.get<double>();
    }
    result.timing = std::move(timing);
  } else if (type == "warm") {
    result.warm = true;
    result.warm_program = p.Text("program", false);
    result.warm_reuse = p.Bool("reuse").value_or(false);
  } else if (type == "end") {
    const std::string state = p.Text("state", true);
    const auto known =
        std::find_if(kEndStates.begin(), kEndStates.end(), [&](const auto& entry) { return entry.second == state; });
    if (known == kEndStates.end()) {
      p.Fail(fmt::format("\"state\" must be completed, infeasible or stopped, not '{}'", state));
    }
    result.end = ReportEnd{.state = known->first, .reason = p.Text("reason", false)};
    if (known->first == EndState::kStopped && object.contains("step")) result.end->step = p.Step();
    if (known->first == EndState::kInfeasible && result.end->reason.empty()) result.end->reason = "reported infeasible";
  }
  return result;
}

}  // namespace

ReportLine ParseReportLine(std::string_view line, std::size_t line_number) {
  json object;
  try {
    object = json::parse(QuoteNonFiniteTokens(line));
  } catch (const json::exception& e) {  // not JSON, or a number past double's range (1e999): the line's fault
    throw ProtocolError(fmt::format("report line {} is not JSON this protocol reads ({}): {}", line_number, e.what(),
                                    line.substr(0, std::min<std::size_t>(line.size(), 200))));
  }
  try {
    return ParseReportObject(object, line_number);
  } catch (const json::exception& e) {  // whatever else the JSON library refuses is the line's fault too
    throw ProtocolError(fmt::format("report line {}: {}", line_number, e.what()));
  }
}

std::filesystem::path CheckpointPathOf(const std::filesystem::path& trial_dir, const std::string& path) {
  const std::filesystem::path dir = trial_dir.lexically_normal();
  const std::filesystem::path reported(path);
  std::filesystem::path resolved = (reported.is_relative() ? dir / reported : reported).lexically_normal();
  if (!resolved.has_filename()) resolved = resolved.parent_path();  // "checkpoints/" names checkpoints
  const auto fail = [&](const std::string& why) {
    throw ProtocolError(
        fmt::format("checkpoint path '{}' {}: a checkpoint is a file or directory of its own in the "
                    "trial directory (e.g. checkpoints/step_500) or outside it",
                    path, why));
  };
  const std::filesystem::path inside = resolved.lexically_relative(dir);
  const bool leaves = inside.empty() || *inside.begin() == "..";
  if (!leaves) {
    if (inside == ".") fail("is the trial directory itself");
    const std::string first = inside.begin()->string();
    static const std::set<std::string> kOwnFiles = {"params.json", "trial.json", "stdout.log", "stderr.log",
                                                    "evaluate.log"};
    if (std::distance(inside.begin(), inside.end()) == 1 &&
        (kOwnFiles.count(first) || first.rfind("events.out.tfevents.", 0) == 0 ||
         (first.rfind("rank_", 0) == 0 && first.size() > 4 && first.substr(first.size() - 4) == ".log"))) {
      fail("is a file dltune keeps for the trial");
    }
    return resolved;
  }
  if (reported.is_relative()) fail("leaves the trial directory by '..'");
  if (const std::filesystem::path up = dir.lexically_relative(resolved); !up.empty() && *up.begin() != "..") {
    fail("holds the trial directory");
  }
  return resolved;
}

void ReportReader::Feed(std::string_view bytes) {
  if (start_ > 0 && start_ >= buffer_.size() / 2) {  // drop what was read, now and then, not line by line
    buffer_.erase(0, start_);
    start_ = 0;
  }
  buffer_.append(bytes);
}

std::optional<ReportLine> ReportReader::Next(bool at_eof) {
  while (true) {
    auto newline = buffer_.find('\n', start_);
    if (newline == std::string::npos) {
      if (buffer_.size() - start_ > kMaxLineBytes) {
        throw ProtocolError(fmt::format("report line {} is longer than {} bytes (a report line ends with a newline)",
                                        line_number_ + 1, kMaxLineBytes));
      }
      if (!at_eof || buffer_.size() == start_) return std::nullopt;
      newline = buffer_.size();
    }
    if (newline - start_ > kMaxLineBytes) {
      throw ProtocolError(fmt::format("report line {} is longer than {} bytes", line_number_ + 1, kMaxLineBytes));
    }
    std::string line = buffer_.substr(start_, newline - start_);
    start_ = std::min(newline + 1, buffer_.size());
    ++line_number_;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;  // blank lines are harmless
    if (ended_) throw ProtocolError(fmt::format("report line {}: nothing may follow the end line", line_number_));
    ReportLine parsed = ParseReportLine(line, line_number_);
    if (parsed.start && measured_) {
      throw ProtocolError(fmt::format("report line {}: start must come before any measurement, once", line_number_));
    }
    if (!parsed.warm && !parsed.runtime) measured_ = true;  // a start line counts too: a second one is refused
    if (parsed.end) ended_ = true;
    return parsed;
  }
}

namespace {

// A loss as the protocol writes it: JSON numbers, or Python's NaN / Infinity tokens.
std::string LossText(double loss) {
  if (std::isnan(loss)) return "NaN";
  if (std::isinf(loss)) return loss > 0 ? "Infinity" : "-Infinity";
  return json(loss).dump();
}

}  // namespace

std::string TimingLine(const TimeSplit& seconds) {
  json object = json::object();
  for (const auto& [phase, value] : seconds) object[phase] = value;
  return json{{"type", "timing"}, {"seconds", object}}.dump();
}

std::string RuntimeLine() { return json{{"type", "runtime"}, {"runtime", ProcessRuntime()}}.dump(); }

std::string StartLine(std::int64_t step, bool manages_checkpoints) {
  return json{{"type", "start"}, {"step", step}, {"manages_checkpoints", manages_checkpoints}}.dump();
}

std::string TrainLine(const TrainMeasurement& m) {
  json line = {{"type", "train"}, {"step", m.step}};
  if (m.learning_rate) line["learning_rate"] = *m.learning_rate;
  if (m.grad_norm && std::isfinite(*m.grad_norm)) line["grad_norm"] = *m.grad_norm;
  if (m.clipped) line["clipped"] = *m.clipped;
  if (m.step_time) line["step_time"] = *m.step_time;
  if (m.data_wait) line["data_wait"] = *m.data_wait;
  if (m.examples_per_second) line["examples_per_second"] = *m.examples_per_second;
  std::string text = line.dump();
  if (m.loss) text.insert(text.size() - 1, ",\"loss\":" + LossText(*m.loss));
  return text;
}

std::string EvalLine(const ReportEval& eval) {
  json metrics = json::object();
  for (const auto& [name, value] : eval.metrics) metrics[name] = value;
  return json{
      {"type", "eval"}, {"step", eval.step}, {"split", eval.split}, {"metrics", metrics}, {"examples", eval.examples}}
      .dump();
}

std::string CheckpointLine(const ReportCheckpoint& checkpoint) {
  json line = {{"type", "checkpoint"},
               {"step", checkpoint.step},
               {"path", checkpoint.path},
               {"best", checkpoint.best},
               {"deleted", checkpoint.deleted}};
  if (checkpoint.objective) line["objective"] = *checkpoint.objective;
  if (!checkpoint.checksum.empty()) line["checksum"] = checkpoint.checksum;
  return line.dump();
}

std::string EndLine(const ReportEnd& end) {
  json line = {{"type", "end"}, {"state", EndStateName(end.state)}};
  if (!end.reason.empty()) line["reason"] = end.reason;
  if (end.step) line["step"] = *end.step;
  return line.dump();
}

}  // namespace dltune
