// The playbook's next step (`dltune next`): from a lineage's records — each study's state, its findings (Diagnose),
// its notes, decisions and launches, and the studies planned from it — one step and the exact command that takes it.
// Pure functions of those records; docs/analyses.md ("The next step") gives the procedure in prose.
#pragma once

#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/diagnostics.h"

namespace dltune {

struct NextStep {
  std::string id;       // stable: "start", "finish", "retry_failed", "check_bug", "fix_instability", "expand_space",
                        // "measure_again", "fit_steps", "set_steps", "sweep_further", "sweep_longer", "warmup",
                        // "apply_warmup", "longer_warmup", "below_instability", "apply_clipping", "narrow_lr",
                        // "more_replicas", "retrain", "round2", "decide", "launch", "done", "keep_batch_size",
                        // "choose_batch_size", "lower_learning_rate", "back_to_parent", "measured"
  std::string study;    // the study it concerns ("" before the first)
  std::string title;    // what to do, one line
  std::string why;      // the evidence it follows from
  std::string command;  // the exact command to run ("" when the step is an edit of the spec; a word in capitals,
                        // such as SIZE, in a step that asks a choice of the user: "choose_batch_size")
  std::string section;  // the playbook section it comes from
  // Other ways to take the step, each "what it does: command" (printed after the command as "or:").
  std::vector<std::string> alternatives;
};

// A study with its findings and the studies planned from it (their procedure's parent is this study), oldest first.
struct LineageNode {
  StudyData data;
  std::vector<Diagnostic> diagnostics;  // Diagnose(data)
  std::vector<LineageNode> children;
};

// The step for a lineage, from its root: the first that applies, in this order, for the study at hand:
//  1. trials left to run (finish it), failed trials (fix and retry);
//  2. a finding that may be a bug in the pipeline (periodic validation; a training loss rising in most trials): check
//     it first, and mark it handled (dltune note --resolves);
//  3. a launch: done;
//  4. the newest study planned from it after its latest decision: that study's step, unless that study's outcome
//     sends the lineage back here (an instability probe that found training stable), which then counts as handled;
//  5. a decision: launch what it adopted;
//  6. its findings, as the playbook orders them: instability (probe it), most trials infeasible, a search-space
//     boundary (expand it), a throughput sweep's batch size (then the step budget) or its untrustworthy measurements,
//     a fit-steps sweep's budget (apply it) or its edge, a probe's unstable rate (warmup), a warmup study's warmup
//     (apply it) or none within the playbook's cap (a clipping study), a clipping study's threshold (apply it) or none
//     (tune below the unstable learning rate), replicas within the noise (more, up to 10) or
//     beyond it (decide), single runs across sub-studies (retrain), compute-bound (round 2);
//  7. otherwise decide on its best trial.
// Findings marked handled (Diagnostic::handled) are passed over. Every command printed runs as it stands; a plan is
// printed with the run that carries it out ("dltune plan ... -o F && dltune run F").
NextStep RecommendNextStep(const LineageNode& root);
// The same for one study alone (its children not read): the tests' and dltune doctor's use.
NextStep RecommendNextStep(const StudyData& data, const std::vector<Diagnostic>& diagnostics);

// The start of a project from spec `spec_path` (nothing of it in the store yet): a throughput sweep when the spec has a
// batch_size, else the step budget when its objective has a default fit condition, else the study itself.
NextStep StartOfProject(const std::string& spec_path, const StudySpec& spec);

}  // namespace dltune
