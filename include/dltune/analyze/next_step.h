// The playbook's next step after a study (`dltune next`): from its state, its findings (Diagnose) and its place in
// the lineage, one step and the exact command that takes it. Pure function of a study's records.
#pragma once

#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/diagnostics.h"

namespace dltune {

struct NextStep {
  std::string id;       // stable: "finish", "retry_failed", "fix_instability", "expand_space", "set_steps",
                        // "sweep_further", "follow", "more_replicas", "retrain", "decide", "launch", "round2",
                        // "done"
  std::string title;    // what to do, one line
  std::string why;      // the evidence it follows from
  std::string command;  // the exact command to run ("" when the step is an edit of the spec)
  std::string section;  // the playbook section it comes from
};

// The first that applies, in this order: trials left to run (finish the study), failed trials (fix and retry), a
// problem finding (instability, most trials infeasible: fix the setup first), a bad search-space boundary (expand
// it), a fit-steps study's candidate step budget (or its sweep's edge), a launch (done), a study planned from this
// one (continue there: `dltune next CHILD`), a retrain within the noise (more replicas),
// beyond it without a decision (decide), single runs compared across sub-studies (retrain), training that is
// compute-bound (round 2), a decision without a launch (launch); otherwise decide on the best trial.
// `diagnostics` is Diagnose(data).
NextStep RecommendNextStep(const StudyData& data, const std::vector<Diagnostic>& diagnostics);

}  // namespace dltune
