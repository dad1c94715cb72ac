#include "dltune/core/hyperparams.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/strings.h"
#include "dltune/core/error.h"

namespace dltune {

HyperParams::HyperParams(nlohmann::json args, const std::map<std::string, Value>& params) {
  if (args.is_object()) values_ = std::move(args);
  for (const auto& [name, value] : values_.items()) argument_names_.insert(name);
  for (const auto& [name, value] : params) {
    values_[name] = ValueToJson(value);
    param_names_.insert(name);
  }
}

const nlohmann::json* HyperParams::Find(const std::string& name) const {
  read_.insert(name);
  const auto it = values_.find(name);
  return it == values_.end() ? nullptr : &*it;
}

bool HyperParams::Has(const std::string& name) const { return values_.contains(name); }

double HyperParams::Real(const std::string& name, double fallback) const { return MaybeReal(name).value_or(fallback); }

std::optional<double> HyperParams::MaybeReal(const std::string& name) const {
  const auto* value = Find(name);
  if (value == nullptr) return std::nullopt;
  if (!value->is_number()) throw Error(fmt::format("hyperparameter {} must be a number, not {}", name, value->dump()));
  return value->get<double>();
}

std::int64_t HyperParams::Int(const std::string& name, std::int64_t fallback) const {
  const auto* value = Find(name);
  if (value == nullptr) return fallback;
  if (value->is_number_integer()) return value->get<std::int64_t>();
  if (value->is_number_float() &&
      value->get<double>() == static_cast<double>(static_cast<std::int64_t>(value->get<double>()))) {
    return static_cast<std::int64_t>(value->get<double>());
  }
  throw Error(fmt::format("hyperparameter {} must be a whole number, not {}", name, value->dump()));
}

bool HyperParams::Bool(const std::string& name, bool fallback) const {
  const auto* value = Find(name);
  if (value == nullptr) return fallback;
  if (!value->is_boolean())
    throw Error(fmt::format("hyperparameter {} must be true or false, not {}", name, value->dump()));
  return value->get<bool>();
}

std::string HyperParams::Text(const std::string& name, const std::string& fallback) const {
  const auto* value = Find(name);
  if (value == nullptr) return fallback;
  if (!value->is_string()) throw Error(fmt::format("hyperparameter {} must be text, not {}", name, value->dump()));
  return value->get<std::string>();
}

std::vector<std::int64_t> HyperParams::IntList(const std::string& name,
                                               const std::vector<std::int64_t>& fallback) const {
  const auto* value = Find(name);
  if (value == nullptr) return fallback;
  if (value->is_number_integer()) return {value->get<std::int64_t>()};
  std::vector<std::int64_t> list;
  if (value->is_array()) {
    for (const auto& element : *value) {
      if (!element.is_number_integer()) {
        throw Error(fmt::format("hyperparameter {} must be a list of whole numbers, not {}", name, value->dump()));
      }
      list.push_back(element.get<std::int64_t>());
    }
    return list;
  }
  throw Error(fmt::format("hyperparameter {} must be a list of whole numbers, not {}", name, value->dump()));
}

std::vector<std::string> HyperParams::UnreadParams() const {
  std::vector<std::string> unread;
  for (const auto& name : param_names_) {
    if (read_.count(name) == 0) unread.push_back(name);
  }
  return unread;
}

void HyperParams::CheckAllParamsRead(const std::string& who) const {
  const auto unread = UnreadParams();
  if (unread.empty()) return;
  std::vector<std::string> known(read_.begin(), read_.end());
  std::string hints;
  for (const auto& name : unread) hints += DidYouMean(name, known);
  throw Error(fmt::format("{} uses no hyperparameter named {}{}", who, JoinAlternatives(unread), hints));
}

void HyperParams::CheckAllArgumentsRead(const std::string& who, const std::vector<std::string>& read_elsewhere) const {
  std::vector<std::string> known(read_.begin(), read_.end());
  known.insert(known.end(), read_elsewhere.begin(), read_elsewhere.end());
  std::vector<std::string> unread;
  for (const auto& name : argument_names_) {
    if (read_.count(name) == 0 && param_names_.count(name) == 0 &&
        std::find(read_elsewhere.begin(), read_elsewhere.end(), name) == read_elsewhere.end()) {
      unread.push_back(name);
    }
  }
  if (unread.empty()) return;
  std::string hints;
  for (const auto& name : unread) hints += DidYouMean(name, known);
  throw Error(fmt::format("{} reads no argument named {}{}", who, JoinAlternatives(unread), hints));
}

std::string HyperParams::ValueText(const std::string& name) const {
  const auto it = values_.find(name);
  return it == values_.end() ? "(default)" : it->dump();
}

}  // namespace dltune
