// Fused groups in the worker (training.fuse; docs/training.md, "Fused trials"): which trials may train together,
// and the group process's one report channel split into its members' reports (docs/trial-protocol.md, "Fused
// trials").
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "dltune/core/value.h"
#include "dltune/store/store.h"
#include "dltune/study/study_spec.h"

namespace dltune {

// The most trials a group of `spec`'s takes: training.fuse's number, or with fuse auto or chosen (its default)
// `auto_limit` (what the probe chose: ChooseFusion in parallel_layout.h; 0 where none ran); 0 when its trials train
// apart (fuse off, a workload without an array model, data-parallel ranks).
std::size_t FuseLimit(const StudySpec& spec, std::size_t auto_limit = 0);

// What trials must share to train in one group: every param but the fusible ones (FusibleHyperparameters), as text.
// Trials of different sub-studies share it where their scientific hyperparameters are fusible (the optimizer of the
// quickstart's Nesterov-or-Adam question).
std::string FusionKey(const std::map<std::string, Value>& params_by_name);

// The sub-studies but `except` with a pending trial (of `pending`, by number) whose key is `key`, in the order of
// their first such trial: where a group looks for more members once its own sub-study has none.
std::vector<std::size_t> SubstudiesToFuse(const StudySpec& spec, const std::vector<TrialRecord>& pending,
                                          const std::string& key, std::size_t except);

// The optimizer kind a trial trains with (training hyperparameter `optimizer`), which orders a group's members: an
// array optimizer updates a run of members of one kind together (array_optimizer.h).
std::string OptimizerKindOf(const std::map<std::string, Value>& params_by_name);

// Splits a group's report channel, lines "<member>\t<report line>", into each member's report bytes.
class GroupReportSplitter {
 public:
  explicit GroupReportSplitter(std::size_t members) : members_(members) {}
  // Adds `bytes` read from the channel; returns, by member, the complete lines it completed, without their prefix.
  // A line without a valid member index goes to member 0 as it is, which breaks its protocol (the group is ended).
  std::vector<std::string> Split(std::string_view bytes);

 private:
  std::size_t members_;
  std::string partial_;
};

}  // namespace dltune
