#include "dltune/analyze/next_step.h"

#include <algorithm>

#include <fmt/format.h>

#include "dltune/analyze/step_budget.h"
#include "dltune/analyze/trial_variance.h"
#include "dltune/core/strings.h"

namespace dltune {
namespace {

const Diagnostic* Find(const std::vector<Diagnostic>& diagnostics, const std::string& id,
                       std::optional<Severity> severity = std::nullopt) {
  const auto it = std::find_if(diagnostics.begin(), diagnostics.end(), [&](const Diagnostic& d) {
    return d.id == id && (!severity || d.severity == *severity);
  });
  return it == diagnostics.end() ? nullptr : &*it;
}

std::size_t CountIn(const StudyData& data, std::initializer_list<TrialState> states) {
  return static_cast<std::size_t>(std::count_if(data.trials.begin(), data.trials.end(), [&](const TrialRecord& t) {
    return std::find(states.begin(), states.end(), t.state) != states.end();
  }));
}

NextStep FromFinding(const Diagnostic& d, const std::string& id, const std::string& title, const std::string& command) {
  return {.id = id, .title = title, .why = d.title, .command = command, .section = d.section};
}

}  // namespace

NextStep RecommendNextStep(const StudyData& data, const std::vector<Diagnostic>& diagnostics) {
  const std::string study = ShellQuote(data.study.name);
  const std::string spec = ShellQuote(data.study.spec_path.empty() ? data.study.name + ".yaml" : data.study.spec_path);
  const std::size_t unfinished = CountIn(data, {TrialState::kPending, TrialState::kRunning, TrialState::kStopped});
  if (unfinished > 0 || data.trials.empty()) {
    return {.id = "finish",
            .title = "Finish the study: its results are not all in",
            .why = data.trials.empty()
                       ? "no trial has run yet"
                       : fmt::format("{} of its {} trials are still to run or running", unfinished, data.trials.size()),
            .command = "dltune run " + spec,
            .section = "Extracting insight from experimental results"};
  }
  if (const std::size_t failed = CountIn(data, {TrialState::kFailed}); failed > 0) {
    return {
        .id = "retry_failed",
        .title = "Fix what made trials fail, then run them again",
        .why = fmt::format("{} trial{} failed (their reasons: dltune show {})", failed, failed == 1 ? "" : "s", study),
        .command = "dltune run " + spec + " --retry-failed",
        .section = "Extracting insight from experimental results"};
  }
  if (const Diagnostic* d = Find(diagnostics, "instability")) {
    return FromFinding(*d, "fix_instability",
                       "Fix the instability before comparing anything: probe it, then warmup or gradient clipping",
                       fmt::format("dltune plan instability --from {}", study));
  }
  if (const Diagnostic* d = Find(diagnostics, "infeasible_share", Severity::kProblem)) {
    return FromFinding(*d, "fix_instability", "Most trials diverge: narrow the space or stabilize training first", "");
  }
  if (const Diagnostic* d = Find(diagnostics, "boundary")) {
    return FromFinding(*d, "expand_space", "Expand the search space where the best trials crowd its edge",
                       fmt::format("dltune show {} --spec > {}-expanded.yaml   # then edit the range and the name",
                                   study, data.study.name));
  }
  if (const Diagnostic* d = Find(diagnostics, "fit_steps_edge")) {
    return FromFinding(*d, "sweep_further", "Sweep the learning rate further before trusting the step budget",
                       d->suggestion.substr(d->suggestion.find("dltune")));
  }
  if (const Diagnostic* d = Find(diagnostics, "fit_steps")) {
    const StepBudget budget = AnalyzeStepBudget(data);
    return FromFinding(*d, "set_steps",
                       fmt::format("Set max_train_steps: {} in the study you tune next", *budget.candidate_steps), "");
  }
  const bool launched = !data.launches.empty();
  if (!launched && !data.children.empty()) {
    const std::string& child = data.children.back();
    return {.id = "follow",
            .title = fmt::format("Continue with study {}, planned from this one", child),
            .why = fmt::format("{} stud{} planned from it: {}", data.children.size(),
                               data.children.size() == 1 ? "y was" : "ies were", fmt::join(data.children, ", ")),
            .command = "dltune next " + ShellQuote(child),
            .section = ""};
  }
  if (const Diagnostic* d = Find(diagnostics, "instability_probe")) {
    return FromFinding(*d, "warmup", "Find the shortest warmup that trains stably at 10x the unstable learning rate",
                       fmt::format("dltune plan warmup --from {}", study));
  }
  if (const Diagnostic* d = Find(diagnostics, "instability_probe_stable")) {
    return FromFinding(*d, "back_to_parent", "No warmup needed: go on with the study this probe was planned from",
                       "dltune next " + ShellQuote(data.spec.procedure.parent));
  }
  if (const Diagnostic* d = Find(diagnostics, "warmup")) {
    return FromFinding(*d, "apply_warmup", "Prepend the warmup to the baseline and compare",
                       fmt::format("dltune plan apply-warmup --from {}", study));
  }
  if (const Diagnostic* d = Find(diagnostics, "warmup_none")) {
    if (const auto at = d->suggestion.find("dltune plan warmup"); at != std::string::npos) {
      return FromFinding(*d, "longer_warmup", "Try longer warmups (or gradient clipping)",
                         d->suggestion.substr(at, d->suggestion.find(')', at) - at));
    }
    // The longest warmup the playbook allows did not help: never the same step again.
    const std::string baseline = ShellQuote(data.spec.procedure.options.value("baseline", data.spec.procedure.parent));
    return FromFinding(*d, "below_instability",
                       "Warmup cannot cure this instability: tune the baseline below the unstable learning rate",
                       fmt::format("dltune show {} --spec > narrower.yaml   # then lower the learning rate's max, and "
                                   "give it a new name",
                                   baseline));
  }
  const auto decision = std::find_if(data.notes.rbegin(), data.notes.rend(),
                                     [](const StudyNote& note) { return note.kind == NoteKind::kDecision; });
  if (launched) {
    const LaunchRecord& launch = data.launches.back();
    return {.id = "done",
            .title = "Done: the study's model is launched",
            .why = fmt::format("launch {} of trial {}, {}", launch.id, launch.evaluation.trial, launch.reason),
            .command = "dltune launches " + study,
            .section = "After exploration concludes"};
  }
  // A decision taken is what the user concluded from the findings below: what is left is to carry it out, as
  // `dltune decide` itself says.
  if (decision != data.notes.rend()) {
    return {.id = "launch",
            .title = "Launch the adopted model: evaluate it on the test set once",
            .why = fmt::format("decision {} adopts {} and nothing is launched yet", decision->id, decision->adopt),
            .command = fmt::format("dltune launch {} --reason '...'", study),
            .section = "After exploration concludes"};
  }
  if (const Diagnostic* d = Find(diagnostics, "within_noise")) {
    // More replicas of the same configurations: the study's spec planned again with twice as many, and run with
    // --extend, which trains only the new ones.
    const std::string spec_file = data.study.spec_path.empty() ? data.study.name + ".yaml" : data.study.spec_path;
    const std::string command =
        data.spec.procedure.kind == "retrain"
            ? fmt::format(
                  "dltune plan retrain --from {} --top {} --replicas {} --name {} -o {} --force && dltune run {} "
                  "--extend",
                  ShellQuote(data.spec.procedure.parent), data.spec.procedure.options.value("top", 1),
                  2 * data.spec.replicas, ShellQuote(data.study.name), ShellQuote(spec_file), ShellQuote(spec_file))
            : "";
    return FromFinding(*d, "more_replicas",
                       "Run more replicas, or keep the simpler option: the difference is within the noise", command);
  }
  if (const Diagnostic* d = Find(diagnostics, "beyond_noise")) {
    return FromFinding(*d, "decide", "Record the decision: the better configuration beats the noise",
                       fmt::format("dltune decide {} --adopt configuration:{} --because '...'", study,
                                   AnalyzeTrialVariance(data).best_configuration.value_or(0)));
  }
  if (const Diagnostic* d = Find(diagnostics, "single_runs")) {
    return FromFinding(*d, "retrain", "Retrain the best of each sub-study from several seeds before adopting one",
                       fmt::format("dltune plan retrain --from {} --replicas 5", study));
  }
  if (const Diagnostic* d = Find(diagnostics, "compute_bound"); d && data.spec.procedure.kind != "round2") {
    return FromFinding(*d, "round2", "Train longer: round 2 of the best configurations",
                       fmt::format("dltune plan round2 --from {} --top 3 --steps 2x", study));
  }
  return {.id = "decide",
          .title = "Decide what to adopt from this study",
          .why = "no finding calls for another step first",
          .command = fmt::format("dltune decide {} --adopt trial:N --because '...'   # dltune show {} lists the best",
                                 study, study),
          .section = "Determining whether to adopt a training pipeline change or hyperparameter configuration"};
}

}  // namespace dltune
