#include "dltune/analyze/next_step.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "core/strings.h"
#include "dltune/analyze/step_budget.h"
#include "dltune/analyze/throughput.h"
#include "dltune/analyze/trial_variance.h"
#include "store/recorded_spec.h"

namespace dltune {
namespace {

constexpr const char* kInsight = "Extracting insight from experimental results";
constexpr const char* kAfterExploration = "After exploration concludes";
constexpr const char* kAdopt =
    "Determining whether to adopt a training pipeline change or hyperparameter configuration";
constexpr const char* kBatchSize = "Determining the feasible batch sizes and estimating training throughput";
constexpr const char* kStepBudget =
    "Algorithm for picking an initial candidate for max_train_steps using a learning rate sweep";
// Retrain studies are extended (twice the replicas each time) until this many replicas leave the difference within
// the noise: then the difference is too small to matter.
constexpr std::uint64_t kMostReplicas = 10;
// A throughput sweep is measured at most this many times: after that, a busy machine is no reason to wait.
constexpr std::int64_t kMostThroughputAttempts = 2;
constexpr int kDeepestLineage = 64;

std::size_t CountIn(const StudyData& data, std::initializer_list<TrialState> states) {
  return static_cast<std::size_t>(std::count_if(data.trials.begin(), data.trials.end(), [&](const TrialRecord& t) {
    return std::find(states.begin(), states.end(), t.state) != states.end();
  }));
}

bool IsStability(const std::string& kind) { return kind == "instability" || kind == "warmup" || kind == "clipping"; }

std::string SpecFileOf(const StudyData& data) { return SpecFileOf(data.study); }

// A plan written to `file` and the run that carries it out: one command, so that the step it takes is whole.
std::string PlanAndRun(const std::string& plan, const std::string& file) {
  return fmt::format("dltune plan {} -o {} && dltune run {}", plan, ShellQuote(file), ShellQuote(file));
}

// The best completed trial over all sub-studies (nullopt when none has an objective).
std::optional<std::uint64_t> BestTrialOf(const StudyData& data) {
  std::optional<std::uint64_t> best;
  std::optional<double> best_value;
  for (const TrialRecord& trial : data.trials) {
    if (trial.state != TrialState::kCompleted) continue;
    const auto value = BestObjectiveOf(data, trial);
    if (!value) continue;
    if (!best_value || IsBetter(*value, *best_value, data.spec.objective.direction)) {
      best = trial.number;
      best_value = value;
    }
  }
  return best;
}

// One study's step, its children's steps already known (`child_steps`, parallel to node.children).
class StudyStep {
 public:
  explicit StudyStep(const LineageNode& node) : node_(node), data_(node.data) {
    for (const Diagnostic& d : node.diagnostics) {
      if (d.handled.empty()) open_.push_back(&d);
    }
  }

  NextStep Recommend(int depth) {
    if (auto step = StateOfTrials()) return *step;
    if (auto step = PossibleBug()) return *step;
    if (!data_.launches.empty()) return Done();
    if (auto step = FollowChildren(depth)) return *step;
    if (auto step = CarryOutDecision()) return *step;
    if (auto step = FromFindings()) return *step;
    // A measurement's trials are probes: nothing of it is ever decided on or launched.
    return data_.spec.procedure.Measures() ? AfterMeasurement() : DecideOnBest();
  }

 private:
  NextStep Make(std::string id, std::string title, std::string why, std::string command, std::string section) const {
    return {.id = std::move(id),
            .study = data_.study.name,
            .title = std::move(title),
            .why = std::move(why),
            .command = std::move(command),
            .section = std::move(section)};
  }
  NextStep FromFinding(const Diagnostic& d, std::string id, std::string title, std::string command) const {
    return Make(std::move(id), std::move(title), d.title, std::move(command), d.section);
  }
  const Diagnostic* Open(const std::string& id) const {
    const auto it = std::find_if(open_.begin(), open_.end(), [&](const Diagnostic* d) { return d->id == id; });
    return it == open_.end() ? nullptr : *it;
  }
  std::string Study() const { return ShellQuote(data_.study.name); }
  const std::string& Kind() const { return data_.spec.procedure.kind; }

  std::optional<NextStep> StateOfTrials() const {
    const std::size_t unfinished = CountIn(data_, {TrialState::kPending, TrialState::kRunning, TrialState::kStopped});
    if (unfinished > 0 || data_.trials.empty()) {
      return Make("finish", "Finish the study: its results are not all in",
                  data_.trials.empty()
                      ? "no trial has run yet"
                      : fmt::format("{} of its {} trials are still to run or running", unfinished, data_.trials.size()),
                  "dltune run " + ShellQuote(SpecFileOf(data_)), kInsight);
    }
    if (const std::size_t failed = CountIn(data_, {TrialState::kFailed}); failed > 0) {
      return Make(
          "retry_failed", "Fix what made trials fail, then run them again",
          fmt::format("{} trial{} failed (their reasons: dltune show {})", failed, failed == 1 ? "" : "s", Study()),
          "dltune run " + ShellQuote(SpecFileOf(data_)) + " --retry-failed", kInsight);
    }
    return std::nullopt;
  }

  // The playbook treats these as likely bugs: nothing built on the study is trusted until they are explained. A
  // training loss that rises in a few trials is what high learning rates do; in most of them, a bug.
  std::optional<NextStep> PossibleBug() const {
    for (const char* id : {"periodic_validation", "training_loss_rising"}) {
      if (const Diagnostic* d = Open(id); d && (d->id != "training_loss_rising" || d->severity == Severity::kProblem)) {
        return FromFinding(*d, "check_bug",
                           "Check the pipeline for a bug before building on this study, then mark the finding handled",
                           fmt::format("dltune note {} --resolves {} 'checked: ...'", Study(), id));
      }
    }
    return std::nullopt;
  }

  NextStep Done() const {
    const LaunchRecord& launch = data_.launches.back();
    return Make("done", "Done: the study's model is launched",
                fmt::format("launch {} of trial {}, {}", launch.id, launch.evaluation.trial, launch.reason),
                "dltune launches " + Study(), kAfterExploration);
  }

  const StudyNote* LatestDecision() const {
    const auto it = std::find_if(data_.notes.rbegin(), data_.notes.rend(),
                                 [](const StudyNote& note) { return note.kind == NoteKind::kDecision; });
    return it == data_.notes.rend() ? nullptr : &*it;
  }

  // The newest child planned after the latest decision leads, unless its outcome sends the lineage back here.
  std::optional<NextStep> FollowChildren(int depth) {
    const StudyNote* decision = LatestDecision();
    for (auto child = node_.children.rbegin(); child != node_.children.rend(); ++child) {
      if (decision != nullptr && child->data.study.created_at < decision->created_at) break;
      const std::string& kind = child->data.spec.procedure.kind;
      // Once a stability study handed the lineage back, the instability it chased is settled: none of the older
      // stability studies leads again.
      if (IsStability(kind) && handled_kinds_.count("instability") != 0) continue;
      NextStep step = depth >= kDeepestLineage ? Make("follow", "Continue with study " + child->data.study.name,
                                                      "the lineage is deeper than dltune next reads",
                                                      "dltune next " + ShellQuote(child->data.study.name), "")
                                               : StudyStep(*child).Recommend(depth + 1);
      if (step.id == "back_to_parent") {
        handled_kinds_.insert(kind);
        if (IsStability(kind)) handled_kinds_.insert("instability");
        continue;
      }
      return step;
    }
    return std::nullopt;
  }

  std::optional<NextStep> CarryOutDecision() const {
    // A decision taken is what the user concluded from the findings: what is left is to carry it out, as `dltune
    // decide` itself says. A measurement's trials are never launched, whatever was recorded on it.
    const StudyNote* decision = LatestDecision();
    if (decision == nullptr || data_.spec.procedure.Measures()) return std::nullopt;
    return Make("launch", "Launch the adopted model: evaluate it on the test set once",
                fmt::format("decision {} adopts {} and nothing is launched yet", decision->id, decision->adopt),
                fmt::format("dltune launch {} --reason {}", Study(),
                            ShellQuote(fmt::format("carries out decision {}", decision->id))),
                kAfterExploration);
  }

  std::optional<NextStep> FromFindings() const {
    using Check = std::optional<NextStep> (StudyStep::*)() const;
    for (const Check check :
         {&StudyStep::Instability, &StudyStep::AggressiveClipping, &StudyStep::SearchSpace, &StudyStep::ThroughputStep,
          &StudyStep::StepBudgetStep, &StudyStep::StabilityStep, &StudyStep::VarianceStep, &StudyStep::LongerStep}) {
      if (auto step = (this->*check)()) return step;
    }
    return std::nullopt;
  }

  std::optional<NextStep> Instability() const {
    if (handled_kinds_.count("instability") != 0) return std::nullopt;  // probed: training was stable
    if (const Diagnostic* d = Open("instability")) {
      return FromFinding(
          *d, "fix_instability",
          "Fix the instability before comparing anything: probe it, then warmup or gradient clipping",
          PlanAndRun(fmt::format("instability --from {}", Study()), data_.study.name + "-instability.yaml"));
    }
    if (const Diagnostic* d = Open("infeasible_share"); d && d->severity == Severity::kProblem) {
      return FromFinding(
          *d, "fix_instability", "Most trials diverge: narrow the space or stabilize training first",
          PlanAndRun(fmt::format("instability --from {}", Study()), data_.study.name + "-instability.yaml"));
    }
    return std::nullopt;
  }

  // Clipping most updates is "in essence a strange way of reducing the learning rate": reduce it instead. A clipping
  // study clips on purpose, so only a study that tunes with clipping is told so.
  std::optional<NextStep> AggressiveClipping() const {
    const Diagnostic* d = Open("aggressive_clipping");
    if (d == nullptr || data_.spec.procedure.Measures()) return std::nullopt;
    if (Kind() == "apply-clipping" && handled_kinds_.count("narrow-lr") == 0) {
      const std::string name = NameBefore(data_.study.name, "-clipped") + "-narrow-lr";
      return FromFinding(*d, "lower_learning_rate",
                         "Clipping most updates is a lower learning rate in disguise: tune below the unstable "
                         "learning rate instead",
                         PlanAndRun(fmt::format("narrow-lr --from {} --name {}",
                                                ShellQuote(data_.spec.procedure.parent), ShellQuote(name)),
                                    name + ".yaml"));
    }
    return FromFinding(*d, "lower_learning_rate",
                       "Clipping most updates is a lower learning rate in disguise: lower the learning rate (or raise "
                       "the threshold) in the spec's next study, and mark the finding handled",
                       fmt::format("dltune note {} --resolves aggressive_clipping {}", Study(),
                                   ShellQuote("the next study lowers the learning rate")));
  }

  std::optional<NextStep> SearchSpace() const {
    for (const Diagnostic* d : open_) {
      if (d->id == "boundary" && d->expand_to) {
        return FromFinding(*d, "expand_space", "Expand the search space where the best trials crowd its edge",
                           PlanAndRun(fmt::format("expand --from {}", Study()), data_.study.name + "-expanded.yaml"));
      }
    }
    if (const Diagnostic* d = Open("boundary")) {  // at a natural limit: a decision only its author can take
      return FromFinding(*d, "expand_space",
                         "The best trials sit at a natural limit of a range: fix the param there in the next study, "
                         "and mark the finding handled",
                         fmt::format("dltune note {} --resolves boundary {}", Study(),
                                     ShellQuote("at its natural limit: fixed there from now on")));
    }
    return std::nullopt;
  }

  // The name of the throughput sweep's project: its name before "-throughput".
  std::string ThroughputRoot() const { return NameBefore(data_.study.name, "-throughput"); }

  std::optional<NextStep> ThroughputStep() const {
    if (Kind() != "throughput") return std::nullopt;
    const Throughput throughput = AnalyzeThroughput(data_);
    if (!throughput.untrustworthy.empty()) {
      const Diagnostic* d = Open("throughput_untrustworthy");
      // Measured again once at most: a machine that stays busy is no reason to stop the project.
      if (d != nullptr && ThroughputAttempt(data_) < kMostThroughputAttempts) {
        NextStep step = FromFinding(*d, "measure_again", "Measure the throughput again, on a quieter machine",
                                    MeasureThroughputAgainCommand(data_));
        step.why = d->detail;
        return step;
      }
      return KeepBatchSize(throughput, d);
    }
    if (!throughput.worth_using) return std::nullopt;
    const std::string root = NameBefore(data_.study.name, "-throughput");
    return Make(
        "fit_steps",
        fmt::format("Batch size {}: find the step budget at it with a learning-rate sweep", *throughput.worth_using),
        fmt::format("study {} recommends batch size {}, the largest whose doubling still paid", data_.study.name,
                    *throughput.worth_using),
        PlanAndRun(fmt::format("fit-steps --from {}", Study()), root + "-fit-steps.yaml"), kStepBudget);
  }

  // A sweep that cannot say which batch size pays, measured as often as it is worth, or set aside by a note: go on
  // at the batch size the project had (the spec's), or ask for one.
  NextStep KeepBatchSize(const Throughput& throughput, const Diagnostic* open) const {
    std::string measured;
    for (const ThroughputRow& row : throughput.rows) {
      if (row.step_time) measured += (measured.empty() ? "" : ", ") + std::to_string(row.batch_size);
    }
    const std::int64_t attempt = ThroughputAttempt(data_);
    std::string why;
    if (open == nullptr && !throughput.untrustworthy.empty()) {
      why = "the sweep's verdict was set aside (" + HandledBy("throughput_untrustworthy") + ")";
    } else if (!throughput.untrustworthy.empty()) {
      why = fmt::format("measured {} time{} and never trusted: {}", attempt, attempt == 1 ? "" : "s",
                        throughput.untrustworthy);
    } else {
      why = "the sweep recommends no batch size";
    }
    const std::vector<std::string> alternatives = {
        "measure longer, where a busy machine's pauses average out: " +
            MeasureThroughputAgainCommand(data_, 4 * data_.spec.max_train_steps),
        "measure with fewer threads (training.threads: 1 in " + ShellQuote(data_.spec.procedure.parent) +
            ", then dltune plan throughput again): a trial then competes less with the machine's other work"};
    const std::string fit_file = ThroughputRoot() + "-fit-steps.yaml";
    if (const auto kept = KeptBatchSize()) {
      NextStep step =
          Make("keep_batch_size", fmt::format("Keep batch size {}: find the step budget at it", *kept),
               fmt::format("{}; batch size {} is the one the project started with", why, *kept),
               PlanAndRun(fmt::format("fit-steps --from {} --batch-size {}", Study(), *kept), fit_file), kStepBudget);
      step.alternatives = alternatives;
      return step;
    }
    NextStep step =
        Make("choose_batch_size", "Choose the batch size to keep (SIZE below), then find the step budget at it",
             fmt::format("{}; the sweep measured batch sizes {}", why, measured),
             PlanAndRun(fmt::format("fit-steps --from {} --batch-size SIZE", Study()), fit_file), kBatchSize);
    step.alternatives = alternatives;
    return step;
  }

  // The batch size of the configuration a throughput sweep was planned from, when it had one.
  std::optional<std::int64_t> KeptBatchSize() const {
    const auto& options = data_.spec.procedure.options;
    const auto it = options.find("from_batch_size");
    if (it == options.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1) return std::nullopt;
    return it->get<std::int64_t>();
  }

  // The note that marked finding `id` handled.
  std::string HandledBy(const std::string& id) const {
    for (const Diagnostic& d : node_.diagnostics) {
      if (d.id == id && !d.handled.empty()) return d.handled;
    }
    return "a note";
  }

  std::optional<NextStep> StepBudgetStep() const {
    if (Kind() != "fit-steps") return std::nullopt;
    const std::string& from = data_.spec.procedure.parent;
    const std::string fit = data_.spec.procedure.options.value("fit", std::string());
    const std::int64_t steps = data_.spec.max_train_steps;
    if (const Diagnostic* d = Open("fit_steps_edge")) {
      // Planned again beside this sweep (same parent), one decade beyond its edge.
      const StepBudget budget = AnalyzeStepBudget(data_);
      double low = 0, high = 0;
      for (const FitRow& row : budget.rows) {
        if (low == 0 || row.learning_rate < low) low = row.learning_rate;
        high = std::max(high, row.learning_rate);
      }
      const bool at_low = budget.fastest_trial && !budget.rows.empty() &&
                          std::any_of(budget.rows.begin(), budget.rows.end(), [&](const FitRow& row) {
                            return row.trial == *budget.fastest_trial && row.learning_rate == low;
                          });
      const double edge = at_low ? low : high;
      const std::string name = data_.study.name + (at_low ? "-lower" : "-higher");
      return FromFinding(
          *d, "sweep_further", "Sweep the learning rate further before trusting the step budget",
          PlanAndRun(fmt::format("fit-steps --from {} --fit {} --steps {} --learning-rates {:.3g}:{:.3g}:7 --name {}",
                                 ShellQuote(from), ShellQuote(fit), steps, at_low ? edge / 30 : edge,
                                 at_low ? edge : edge * 30, name),
                     name + ".yaml"));
    }
    if (const Diagnostic* d = Open("fit_steps")) {
      const StepBudget budget = AnalyzeStepBudget(data_);
      const std::string root = NameBefore(data_.study.name, "-fit-steps");
      return FromFinding(
          *d, "set_steps",
          budget.candidate_steps
              ? fmt::format("Tune with max_train_steps {}: the project's first study", *budget.candidate_steps)
              : std::string("Tune with the step budget it found: the project's first study"),
          PlanAndRun(fmt::format("apply-steps --from {}", Study()), root + "-tuning.yaml"));
    }
    if (const Diagnostic* d = Open("fit_steps_none")) {
      const std::string name = data_.study.name + "-longer";
      return FromFinding(*d, "sweep_longer", "No learning rate fit the training set: sweep again, twice as long",
                         PlanAndRun(fmt::format("fit-steps --from {} --fit {} --steps {} --name {}", ShellQuote(from),
                                                ShellQuote(fit), 2 * steps, name),
                                    name + ".yaml"));
    }
    return std::nullopt;
  }

  std::optional<NextStep> StabilityStep() const {
    if (const Diagnostic* d = Open("instability_probe"); d && handled_kinds_.count("warmup") == 0) {
      return FromFinding(*d, "warmup", "Find the shortest warmup that trains stably at 10x the unstable learning rate",
                         PlanAndRun(fmt::format("warmup --from {}", Study()), data_.study.name + "-warmup.yaml"));
    }
    if (const Diagnostic* d = Open("instability_probe_stable")) {
      return FromFinding(*d, "back_to_parent", "No warmup needed: go on with the study this probe was planned from",
                         "dltune next " + ShellQuote(data_.spec.procedure.parent));
    }
    if (const Diagnostic* d = Open("warmup")) {
      return FromFinding(
          *d, "apply_warmup", "Prepend the warmup to the baseline and compare",
          PlanAndRun(fmt::format("apply-warmup --from {}", Study()), data_.study.name + "-applied.yaml"));
    }
    if (const Diagnostic* d = Open("warmup_none")) {
      if (const auto at = d->suggestion.find("dltune plan warmup"); at != std::string::npos) {
        const std::string plan = d->suggestion.substr(at, d->suggestion.find(')', at) - at);
        const std::string name = data_.study.name + "-longer";
        return FromFinding(
            *d, "longer_warmup", "Try longer warmups (or gradient clipping)",
            plan + fmt::format(" -o {} && dltune run {}", ShellQuote(name + ".yaml"), ShellQuote(name + ".yaml")));
      }
      // The longest warmup the playbook allows did not help: never the same step again, but what is left.
      const std::string baseline = data_.spec.procedure.options.value("baseline", data_.spec.procedure.parent);
      return FromFinding(
          *d, "below_instability",
          fmt::format("Warmup cannot cure this instability: try clipping the gradients (or tune below "
                      "the unstable learning rate: dltune plan narrow-lr --from {})",
                      Study()),
          PlanAndRun(fmt::format("clipping --from {}", ShellQuote(baseline)), baseline + "-clipping.yaml"));
    }
    if (const Diagnostic* d = Open("clipping")) {
      const std::string baseline = data_.spec.procedure.options.value("baseline", data_.spec.procedure.parent);
      return FromFinding(*d, "apply_clipping", "Tune the baseline with its gradients clipped at that threshold",
                         PlanAndRun(fmt::format("apply-clipping --from {}", Study()), baseline + "-clipped.yaml"));
    }
    if (const Diagnostic* d = Open("clipping_none")) {
      const std::string baseline = data_.spec.procedure.options.value("baseline", data_.spec.procedure.parent);
      return FromFinding(*d, "narrow_lr", "Neither warmup nor clipping cures it: tune below the unstable learning rate",
                         PlanAndRun(fmt::format("narrow-lr --from {}", Study()), baseline + "-narrow-lr.yaml"));
    }
    return std::nullopt;
  }

  std::optional<NextStep> VarianceStep() const {
    if (const Diagnostic* d = Open("within_noise")) {
      if (Kind() == "retrain" && data_.spec.replicas < kMostReplicas) {
        return FromFinding(*d, "more_replicas", "Run more replicas: the difference is within the noise of this many",
                           MoreReplicasCommand(data_));
      }
      const std::uint64_t best = AnalyzeTrialVariance(data_).best_configuration.value_or(0);
      return FromFinding(*d, "decide",
                         "Decide: the difference stays within the noise, so either is as good (keep the simpler one)",
                         fmt::format("dltune decide {} --adopt configuration:{} --because {}", Study(), best,
                                     ShellQuote(fmt::format("the best mean; the others are within the noise of {} "
                                                            "replicas",
                                                            data_.spec.replicas))));
    }
    if (const Diagnostic* d = Open("beyond_noise")) {
      const std::uint64_t best = AnalyzeTrialVariance(data_).best_configuration.value_or(0);
      return FromFinding(*d, "decide", "Record the decision: the better configuration beats the noise",
                         fmt::format("dltune decide {} --adopt configuration:{} --because {}", Study(), best,
                                     ShellQuote("the best mean, beyond the run-to-run noise")));
    }
    if (const Diagnostic* d = Open("single_runs")) {
      return FromFinding(
          *d, "retrain", "Retrain the best of each sub-study from several seeds before adopting one",
          PlanAndRun(fmt::format("retrain --from {} --replicas 5", Study()), data_.study.name + "-retrain.yaml"));
    }
    return std::nullopt;
  }

  std::optional<NextStep> LongerStep() const {
    if (const Diagnostic* d = Open("compute_bound"); d && Kind() != "round2") {
      return FromFinding(
          *d, "round2", "Train longer: round 2 of the best configurations",
          PlanAndRun(fmt::format("round2 --from {} --top 3 --steps 2x", Study()), data_.study.name + "-round2.yaml"));
    }
    return std::nullopt;
  }

  // A measurement with nothing left to act on. A stability study hands the lineage back to the study it was planned
  // from; a sweep planned from a spec file has no study to go back to, so it says what its result allows.
  NextStep AfterMeasurement() const {
    if (Kind() == "throughput") return KeepBatchSize(AnalyzeThroughput(data_), nullptr);
    if (Kind() == "fit-steps") {
      const std::string root = NameBefore(data_.study.name, "-fit-steps");
      if (const auto candidate = AnalyzeStepBudget(data_).candidate_steps) {
        return Make("set_steps", fmt::format("Tune with max_train_steps {}: the project's first study", *candidate),
                    "the sweep's findings are handled, and its fastest learning rate gives the budget",
                    PlanAndRun(fmt::format("apply-steps --from {}", Study()), root + "-tuning.yaml"), kStepBudget);
      }
      return Make(
          "set_steps", "Choose max_train_steps (STEPS below): no learning rate of the sweep fit the training set",
          "the sweep's findings are handled, and it gives no budget of its own",
          PlanAndRun(fmt::format("apply-steps --from {} --steps STEPS", Study()), root + "-tuning.yaml"), kStepBudget);
    }
    return Make("back_to_parent",
                "Nothing more to learn from this measurement: go on with the study it was planned from",
                "its findings are handled; a measurement's trials are never adopted or launched",
                "dltune next " + ShellQuote(data_.spec.procedure.parent), kInsight);
  }

  NextStep DecideOnBest() const {
    const auto best = BestTrialOf(data_);
    if (!best) {
      return Make("retry_failed", "No trial completed with an objective: fix the setup and run again",
                  fmt::format("every trial ended infeasible (their reasons: dltune show {})", Study()),
                  fmt::format("dltune show {}", Study()), kInsight);
    }
    return Make("decide", "Decide what to adopt from this study: its best trial",
                "no finding calls for another step first",
                fmt::format("dltune decide {} --adopt trial:{} --because {}", Study(), *best,
                            ShellQuote("the best trial; no finding calls for another study")),
                kAdopt);
  }

  const LineageNode& node_;
  const StudyData& data_;
  std::vector<const Diagnostic*> open_;
  std::set<std::string> handled_kinds_;
};

}  // namespace

NextStep RecommendNextStep(const LineageNode& root) {
  NextStep step = StudyStep(root).Recommend(0);
  // Handed back at the root: the study it was planned from is not in this lineage (deleted, its name perhaps taken
  // by a later study that is not its parent), so no command can name it.
  if (step.id == "back_to_parent") {
    step.why += fmt::format("; the study it was planned from ({}) is no longer in this store's lineage",
                            root.data.spec.procedure.parent);
    step.command = "dltune studies --tree";
  }
  return step;
}

NextStep RecommendNextStep(const StudyData& data, const std::vector<Diagnostic>& diagnostics) {
  return RecommendNextStep(LineageNode{.data = data, .diagnostics = diagnostics, .children = {}});
}

NextStep StartOfProject(const std::string& spec_path, const StudySpec& spec) {
  const std::string file = ShellQuote(spec_path);
  const Param* batch = nullptr;
  for (const Param& param : spec.space->params()) {
    if (param.name == "batch_size") batch = &param;
  }
  if (batch != nullptr) {
    // Powers of two around the spec's batch size (its first value when it searches several), 16 to 1024 without one.
    std::int64_t low = 16, high = 1024;
    const Value value = batch->values.empty() ? Value(batch->min) : batch->values.front();
    if (const auto size = NumericValue(value); size && *size >= 1) {
      low = std::max<std::int64_t>(1, static_cast<std::int64_t>(*size) / 4);
      high = static_cast<std::int64_t>(*size) * 16;
    }
    return {.id = "start",
            .study = "",
            .title = "Start the project: measure the training throughput at each batch size",
            .why = fmt::format("nothing of {} is in the store yet; the playbook picks the batch size first, for "
                               "training speed alone",
                               spec_path),
            .command = PlanAndRun(fmt::format("throughput --from {} --batch-sizes {}:{}", file, low, high),
                                  spec.name + "-throughput.yaml"),
            .section = kBatchSize};
  }
  if (!DefaultFitCondition(spec.objective).empty()) {
    return {
        .id = "start",
        .study = "",
        .title = "Start the project: find the step budget with a learning-rate sweep",
        .why = fmt::format("nothing of {} is in the store yet, and its space has no batch_size to measure", spec_path),
        .command = PlanAndRun(fmt::format("fit-steps --from {}", file), spec.name + "-fit-steps.yaml"),
        .section = kStepBudget};
  }
  return {.id = "start",
          .study = "",
          .title = "Start the project: run the spec's study",
          .why = fmt::format("nothing of {} is in the store yet; its space has no batch_size and its objective {} no "
                             "default fit for a step-budget sweep",
                             spec_path, spec.objective.Name()),
          .command = "dltune run " + file,
          .section = "Choosing the initial configuration"};
}

}  // namespace dltune
