#include "study/command_template.h"

#include <fmt/format.h>

#include "dltune/core/error.h"

namespace dltune {
namespace {

bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// Calls on_text for literal text and on_name for each placeholder, in order.
template <typename OnText, typename OnName>
void Scan(const std::string& command, OnText on_text, OnName on_name) {
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (c == '}') {
      if (i + 1 < command.size() && command[i + 1] == '}') {
        on_text('}');
        ++i;
        continue;
      }
      throw Error(fmt::format("command: unmatched '}}' at character {}; write }}}} for a literal brace", i + 1));
    }
    if (c != '{') {
      on_text(c);
      continue;
    }
    if (i + 1 < command.size() && command[i + 1] == '{') {
      on_text('{');
      ++i;
      continue;
    }
    const auto close = command.find('}', i);
    if (close == std::string::npos) {
      throw Error(fmt::format("command: unmatched '{{' at character {}; write {{{{ for a literal brace", i + 1));
    }
    const std::string name = command.substr(i + 1, close - i - 1);
    if (name.empty()) throw Error(fmt::format("command: empty placeholder {{}} at character {}", i + 1));
    for (char n : name) {
      if (!IsNameChar(n)) {
        throw Error(
            fmt::format("command: '{{{}}}' at character {} is not a placeholder; names are letters, digits, "
                        "'_' and '-' (write {{{{ for a literal brace)",
                        name, i + 1));
      }
    }
    on_name(name);
    i = close;
  }
}

}  // namespace

const std::vector<std::string>& BuiltinPlaceholders() {
  static const std::vector<std::string> kNames = {"trial_dir", "trial_number", "seed", "max_train_steps",
                                                  "params_file"};
  return kNames;
}

std::vector<std::string> CommandPlaceholders(const std::string& command) {
  std::vector<std::string> names;
  Scan(
      command, [](char) {}, [&](const std::string& name) { names.push_back(name); });
  return names;
}

std::string RenderCommand(const std::string& command, const std::map<std::string, std::string>& values) {
  std::string out;
  Scan(
      command, [&](char c) { out += c; },
      [&](const std::string& name) {
        const auto it = values.find(name);
        if (it == values.end()) {
          throw Error(
              fmt::format("command: this trial has no param '{}' for the placeholder {{{}}} (a conditional "
                          "param absent from the trial?)",
                          name, name));
        }
        out += ShellQuote(it->second);
      });
  return out;
}

}  // namespace dltune
