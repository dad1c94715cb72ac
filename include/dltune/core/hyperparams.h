// A trial's hyperparameters as the trainer and the workload read them, by name, with every read recorded so that a
// param nobody uses (a typo, a param of another workload) is reported instead of silently ignored.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/value.h"

namespace dltune {

// Values by name: a trial's params (by display name) over the workload's fixed arguments. Not thread-safe.
class HyperParams {
 public:
  HyperParams() = default;
  // `args`: the spec's workload.args (any JSON object); `params`: the trial's params by name (they win on clashes).
  HyperParams(nlohmann::json args, const std::map<std::string, Value>& params);

  bool Has(const std::string& name) const;
  // Typed reads with defaults; each throws Error naming the param when the value has the wrong type.
  double Real(const std::string& name, double fallback) const;
  std::int64_t Int(const std::string& name, std::int64_t fallback) const;
  bool Bool(const std::string& name, bool fallback) const;
  std::string Text(const std::string& name, const std::string& fallback) const;
  std::vector<std::int64_t> IntList(const std::string& name, const std::vector<std::int64_t>& fallback) const;
  // Optional reads: nullopt when absent.
  std::optional<double> MaybeReal(const std::string& name) const;

  // Names of trial params no read has asked for yet.
  std::vector<std::string> UnreadParams() const;
  // Throws Error listing UnreadParams(), if any.
  void CheckAllParamsRead(const std::string& who) const;
  // Throws Error naming each workload argument (`args`, not overridden by a param) that no read has asked for and
  // that is not in `read_elsewhere` (the arguments a workload reads itself, e.g. data_dir), with a did-you-mean.
  void CheckAllArgumentsRead(const std::string& who, const std::vector<std::string>& read_elsewhere) const;

  // The names read so far, and a value as text ("[32, 32]"; "(default)" when absent): for messages about them.
  const std::set<std::string>& read_names() const { return read_; }
  std::string ValueText(const std::string& name) const;

 private:
  const nlohmann::json* Find(const std::string& name) const;

  nlohmann::json values_ = nlohmann::json::object();
  std::set<std::string> param_names_;
  std::set<std::string> argument_names_;  // of `args`
  mutable std::set<std::string> read_;
};

}  // namespace dltune
