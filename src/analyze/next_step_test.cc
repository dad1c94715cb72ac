#include "dltune/analyze/next_step.h"

#include <functional>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyze_test_util.h"

namespace dltune {
namespace {

using testing::AddTrial;
using ::testing::HasSubstr;
using testing::MakeData;
using ::testing::Not;

StudyData TwoOptimizers() {
  StudyData data = MakeData(R"(name: s
workload: synthetic
max_train_steps: 100
trials: 2
space:
  optimizer: {values: [sgd, adam], role: scientific}
  learning_rate: {min: 0.001, max: 0.1, scale: log}
)");
  data.study.spec_path = "s.yaml";
  return data;
}

// A finished study named `name`, planned by procedure `kind` from `parent` (none when empty), with `trials` completed
// single trials, created at `created_at`.
StudyData Finished(const std::string& name, const std::string& kind = "", const std::string& parent = "",
                   int trials = 3, double created_at = 0) {
  std::string yaml = "name: " + name +
                     "\nworkload: synthetic\nmax_train_steps: 100\ntrials: " + std::to_string(trials) +
                     "\nspace:\n  learning_rate: {min: 0.001, max: 0.1, scale: log}\n";
  if (!kind.empty()) yaml += "procedure: {kind: " + kind + ", parent: " + parent + "}\n";
  StudyData data = MakeData(yaml);
  data.study.spec_path = name + ".yaml";
  data.study.created_at = created_at;
  for (int i = 0; i < trials; ++i) {
    AddTrial(data, i, TrialState::kCompleted, {{"learning_rate", Value(0.01 * (i + 1))}}, 0.5 - 0.1 * i, 100);
  }
  if (kind == "fit-steps") {  // trial i fits the training set at step 40 - 10 i
    data.spec.procedure.options["fit"] = "train/error_rate<=0.01";
    for (int i = 0; i < trials; ++i) {
      testing::AddEvals(data, i, "train", "error_rate", {{10, 0.3}, {40 - 10 * i, 0.0}, {100, 0.0}});
    }
  }
  return data;
}

Diagnostic Finding(const std::string& id, Severity severity = Severity::kWarning) {
  return {.id = id, .severity = severity, .title = id + " found"};
}

LineageNode Node(StudyData data, std::vector<Diagnostic> diagnostics = {}, std::vector<LineageNode> children = {}) {
  return {.data = std::move(data), .diagnostics = std::move(diagnostics), .children = std::move(children)};
}

TEST(NextStep, FromTheStudysStateAndFindings) {
  StudyData data = TwoOptimizers();
  EXPECT_EQ(RecommendNextStep(data, {}).command, "dltune run s.yaml");  // nothing ran yet
  AddTrial(data, 0, TrialState::kCompleted, {{"optimizer", Value(std::string("sgd"))}}, 0.3, 10, 0, "optimizer=sgd");
  AddTrial(data, 1, TrialState::kPending, {{"optimizer", Value(std::string("adam"))}}, {}, {}, 1, "optimizer=adam");
  EXPECT_EQ(RecommendNextStep(data, {}).id, "finish");
  data.trials[1].state = TrialState::kFailed;
  EXPECT_EQ(RecommendNextStep(data, {}).command, "dltune run s.yaml --retry-failed");
  data.trials[1].state = TrialState::kCompleted;
  data.trials[1].best_value = 0.25;

  const Diagnostic single = Finding("single_runs", Severity::kInfo);
  EXPECT_EQ(RecommendNextStep(data, {single}).command,
            "dltune plan retrain --from s --replicas 5 -o s-retrain.yaml && dltune run s-retrain.yaml");
  Diagnostic boundary = Finding("boundary");
  boundary.expand_to = 1.0;
  const NextStep expand = RecommendNextStep(data, {boundary, single});  // the space first
  EXPECT_EQ(expand.id, "expand_space");
  EXPECT_EQ(expand.command, "dltune plan expand --from s -o s-expanded.yaml && dltune run s-expanded.yaml");
  boundary.expand_to.reset();  // at a natural limit: nothing to expand, the author decides
  EXPECT_THAT(RecommendNextStep(data, {boundary}).command, HasSubstr("dltune note s --resolves boundary"));
  EXPECT_EQ(RecommendNextStep(data, {Finding("compute_bound", Severity::kInfo)}).command,
            "dltune plan round2 --from s --top 3 --steps 2x -o s-round2.yaml && dltune run s-round2.yaml");
  // No finding: decide on the best trial, named (trial 1's 0.25 beats trial 0's 0.3).
  EXPECT_THAT(RecommendNextStep(data, {}).command, HasSubstr("dltune decide s --adopt trial:1 --because"));

  data.notes.push_back({.id = 4, .kind = NoteKind::kDecision, .adopt = "trial 1", .text = "better"});
  EXPECT_EQ(RecommendNextStep(data, {}).command, "dltune launch s --reason 'carries out decision 4'");
  // `decide` said launch: whatever the findings that led to the decision, so does next.
  EXPECT_EQ(RecommendNextStep(data, {Finding("within_noise", Severity::kInfo), single}).id, "launch");
  data.launches.push_back({.id = 1, .evaluation = {.trial = 1}, .reason = "best"});
  EXPECT_EQ(RecommendNextStep(data, {single}).id, "done");
}

// The situations in which `next` was wrong or looped, each as a constructed lineage and the step it must give.
struct Situation {
  std::string name;
  std::function<LineageNode()> lineage;
  std::string id;       // the step
  std::string study;    // the study it concerns
  std::string command;  // a part of its command
  std::string never;    // a part its command must not have ("" for none)
};

LineageNode ThroughputMeasured() {
  StudyData sweep = MakeData(
      "name: p-throughput\nworkload: synthetic\nmax_train_steps: 20\nsampler: grid\n"
      "space:\n  batch_size: {values: [32, 64, 128]}\nprocedure: {kind: throughput, parent: p.yaml}\n");
  // 10 ms per step at each size: perfect scaling, 128 recommended.
  for (std::uint64_t i = 0; i < 3; ++i) {
    AddTrial(sweep, i, TrialState::kCompleted, {{"batch_size", Value(std::int64_t{32} << i)}}, 0.5, 20);
    for (std::int64_t step = 1; step <= 20; ++step) sweep.train[i].push_back({.step = step, .step_time = 0.01});
  }
  return Node(sweep, {Finding("throughput", Severity::kInfo), Finding("compute_bound", Severity::kInfo)});
}

// A throughput sweep the machine spoiled: measured at attempt `attempt`, planned from a spec whose batch size was 64.
LineageNode ThroughputSpoiled(std::int64_t attempt, bool handled) {
  LineageNode node = ThroughputMeasured();
  node.data.study.name = attempt == 1 ? "p-throughput" : "p-throughput-" + std::to_string(attempt);
  node.data.spec.procedure.options = {
      {"batch_sizes", "32:128"}, {"steps", 20}, {"repeats", 1}, {"attempt", attempt}, {"from_batch_size", 64}};
  Diagnostic spoiled = {.id = "throughput_untrustworthy", .title = "cannot be trusted", .detail = "bimodal"};
  if (handled) spoiled.handled = "note 1: keep the spec's batch size 64";
  node.diagnostics = {spoiled};
  // Bimodal step times: every other step three times as long.
  for (auto& [trial, steps] : node.data.train) {
    for (TrainMeasurement& m : steps) m.step_time = m.step % 2 == 0 ? 0.01 : 0.03;
  }
  return node;
}

LineageNode InstabilityThatWarmupDidNotCure() {
  // A baseline with an instability finding, its probe (unstable), a warmup study, a longer one at the cap, a note.
  LineageNode longest =
      Node(Finished("b-instability-warmup-longer", "warmup", "b-instability", 3, 4), {Finding("warmup_none")});
  longest.data.spec.procedure.options["baseline"] = "b";
  LineageNode warmup = Node(Finished("b-instability-warmup", "warmup", "b-instability", 3, 3),
                            {{.id = "warmup_none",
                              .title = "no warmup",
                              .suggestion = "try longer warmups (dltune plan warmup --from b-instability "
                                            "--warmup-steps 50 --name b-instability-warmup-longer), or clipping"}});
  LineageNode probe =
      Node(Finished("b-instability", "instability", "b", 3, 2), {Finding("instability_probe")}, {warmup, longest});
  StudyData baseline = Finished("b", "", "", 3, 1);
  baseline.notes.push_back({.id = 1, .kind = NoteKind::kNote, .text = "unstable above 0.1", .created_at = 5});
  return Node(baseline, {Finding("instability", Severity::kProblem), Finding("compute_bound", Severity::kInfo)},
              {probe});
}

LineageNode DecidedRetrain() {
  StudyData retrain = Finished("b-retrain", "retrain", "b", 4, 2);
  retrain.spec.replicas = 2;
  retrain.notes.push_back(
      {.id = 3, .kind = NoteKind::kDecision, .adopt = "configuration 0", .text = "simpler", .created_at = 3});
  return Node(Finished("b", "", "", 3, 1), {Finding("single_runs", Severity::kInfo)},
              {Node(retrain, {Finding("within_noise", Severity::kInfo)})});
}

const std::vector<Situation>& Situations() {
  static const std::vector<Situation> kSituations = {
      {"after a throughput sweep: the step budget at its batch size, not round 2", ThroughputMeasured, "fit_steps",
       "p-throughput", "dltune plan fit-steps --from p-throughput -o p-fit-steps.yaml && dltune run p-fit-steps.yaml",
       "round2"},
      {"a throughput sweep a busy machine spoiled: measure again, as a new sweep beside it",
       [] { return ThroughputSpoiled(1, false); }, "measure_again", "p-throughput",
       "dltune plan throughput --from p.yaml --batch-sizes 32:128 --steps 20 --repeats 1 --name p-throughput-2 -o "
       "p-throughput-2.yaml && dltune run p-throughput-2.yaml",
       "delete"},
      {"a sweep spoiled again: no third measurement, go on at the spec's batch size",
       [] { return ThroughputSpoiled(2, false); }, "keep_batch_size", "p-throughput-2",
       "dltune plan fit-steps --from p-throughput-2 --batch-size 64 -o p-fit-steps.yaml && dltune run p-fit-steps.yaml",
       "plan throughput"},
      {"a spoiled sweep set aside by a note: the step budget at the kept batch size, never decide or launch",
       [] { return ThroughputSpoiled(1, true); }, "keep_batch_size", "p-throughput",
       "dltune plan fit-steps --from p-throughput --batch-size 64", "decide"},
      {"a spoiled sweep of a spec without a known batch size: a question, never decide or launch",
       [] {
         LineageNode node = ThroughputSpoiled(2, false);
         node.data.spec.procedure.options.erase("from_batch_size");
         return node;
       },
       "choose_batch_size", "p-throughput-2", "--batch-size SIZE", "decide"},
      {"a measurement with every finding handled is never decided on: an instability probe hands back",
       [] {
         Diagnostic handled = Finding("instability_probe");
         handled.handled = "note 3: known";
         return Node(Finished("b"), {Finding("instability", Severity::kProblem), Finding("compute_bound")},
                     {Node(Finished("b-instability", "instability", "b"), {handled})});
       },
       "round2", "b", "dltune plan round2 --from b", "decide"},
      {"a probe whose baseline is gone hands back to no study: it names none",
       [] {
         Diagnostic handled = Finding("instability_probe");
         handled.handled = "note 3: known";
         return Node(Finished("b-instability", "instability", "b"), {handled});
       },
       "back_to_parent", "b-instability", "dltune studies --tree", "dltune next"},
      {"clipping most steps after apply-clipping: lower the learning rate, not retrain",
       [] {
         return Node(Finished("b-clipped", "apply-clipping", "b-clipping"),
                     {Finding("aggressive_clipping"), Finding("single_runs", Severity::kInfo)});
       },
       "lower_learning_rate", "b-clipped",
       "dltune plan narrow-lr --from b-clipping --name b-narrow-lr -o b-narrow-lr.yaml && dltune run b-narrow-lr.yaml",
       "retrain"},
      {"after the step budget: apply it to the spec (20 steps, the fastest learning rate's)",
       [] {
         StudyData sweep = Finished("p-fit-steps", "fit-steps", "p-throughput");
         return Node(Finished("p-throughput", "throughput", "p.yaml"), {Finding("throughput", Severity::kInfo)},
                     {Node(sweep, {Finding("fit_steps", Severity::kInfo)})});
       },
       "set_steps", "p-fit-steps", "dltune plan apply-steps --from p-fit-steps -o p-tuning.yaml", ""},
      {"the first study planned from the step budget leads once it exists",
       [] {
         return Node(Finished("p-fit-steps", "fit-steps", "p.yaml"), {Finding("fit_steps", Severity::kInfo)},
                     {Node(Finished("p-tuning", "apply-steps", "p-fit-steps"), {Finding("single_runs")})});
       },
       "retrain", "p-tuning", "dltune plan retrain --from p-tuning", "apply-steps"},
      {"a probe, warmups up to the cap and a note: never the probe again", InstabilityThatWarmupDidNotCure,
       "below_instability", "b-instability-warmup-longer", "dltune plan clipping --from b", "plan instability"},
      {"a probe that found training stable sends the lineage back, past the instability",
       [] {
         return Node(Finished("b"), {Finding("instability", Severity::kProblem), Finding("compute_bound")},
                     {Node(Finished("b-instability", "instability", "b"), {Finding("instability_probe_stable")})});
       },
       "round2", "b", "dltune plan round2 --from b", "instability"},
      {"after decide: launch, not more replicas", DecidedRetrain, "launch", "b-retrain",
       "dltune launch b-retrain --reason 'carries out decision 3'", "replicas"},
      {"a periodic-validation warning is a possible bug: before round 2",
       [] {
         return Node(Finished("b"), {Finding("compute_bound", Severity::kInfo), Finding("periodic_validation")});
       },
       "check_bug", "b", "dltune note b --resolves periodic_validation", "round2"},
      {"a training loss rising in most trials is a possible bug",
       [] {
         return Node(Finished("b"),
                     {Finding("training_loss_rising", Severity::kProblem), Finding("compute_bound", Severity::kInfo)});
       },
       "check_bug", "b", "dltune note b --resolves training_loss_rising", ""},
      {"... in a few trials it is what high learning rates do",
       [] {
         return Node(Finished("b"), {Finding("training_loss_rising"), Finding("compute_bound", Severity::kInfo)});
       },
       "round2", "b", "dltune plan round2 --from b", ""},
      {"a possible bug marked handled is passed over",
       [] {
         Diagnostic handled = Finding("periodic_validation");
         handled.handled = "note 2: the validation set is fine";
         return Node(Finished("b"), {handled, Finding("compute_bound", Severity::kInfo)});
       },
       "round2", "b", "dltune plan round2 --from b", ""},
      {"replicas within the noise are doubled up to 10, then a decision",
       [] {
         StudyData retrain = Finished("b-retrain", "retrain", "b", 4);
         retrain.spec.replicas = 10;
         return Node(retrain, {Finding("within_noise", Severity::kInfo)});
       },
       "decide", "b-retrain", "dltune decide b-retrain --adopt configuration:", "--extend"},
      {"replicas within the noise: more of them, by extending the study",
       [] {
         StudyData retrain = Finished("b-retrain", "retrain", "b", 4);
         retrain.spec.replicas = 2;
         return Node(retrain, {Finding("within_noise", Severity::kInfo)});
       },
       "more_replicas", "b-retrain",
       "--replicas 4 --name b-retrain -o b-retrain.yaml --force && dltune run "
       "b-retrain.yaml --extend",
       ""},
      {"a study planned after the decision leads: the decision was a step on the way",
       [] {
         StudyData baseline = Finished("b", "", "", 3, 1);
         baseline.notes.push_back(
             {.id = 2, .kind = NoteKind::kDecision, .adopt = "trial 2", .text = "retrained next", .created_at = 2});
         return Node(baseline, {}, {Node(Finished("b-retrain", "retrain", "b", 3, 3), {Finding("beyond_noise")})});
       },
       "decide", "b-retrain", "dltune decide b-retrain --adopt configuration:", ""},
      {"a fit-steps sweep whose fastest rate is its highest: sweep further, beside it",
       [] {
         StudyData sweep = Finished("p-fit-steps", "fit-steps", "p.yaml");
         sweep.spec.procedure.options["fit"] = "train/error_rate<=0.01";
         return Node(sweep, {Finding("fit_steps_edge"), Finding("fit_steps", Severity::kInfo)});
       },
       "sweep_further", "p-fit-steps", "dltune plan fit-steps --from p.yaml --fit 'train/error_rate<=0.01'", ""},
      {"a launch ends the lineage",
       [] {
         StudyData baseline = Finished("b");
         baseline.launches.push_back({.id = 1, .evaluation = {.trial = 2}, .reason = "best"});
         return Node(baseline, {Finding("compute_bound", Severity::kInfo)});
       },
       "done", "b", "dltune launches b", ""},
  };
  return kSituations;
}

TEST(NextStep, EachSituationOfALineage) {
  for (const Situation& situation : Situations()) {
    SCOPED_TRACE(situation.name);
    const NextStep step = RecommendNextStep(situation.lineage());
    EXPECT_EQ(step.id, situation.id);
    EXPECT_EQ(step.study, situation.study);
    EXPECT_THAT(step.command, HasSubstr(situation.command));
    if (!situation.never.empty()) {
      EXPECT_THAT(step.command, Not(HasSubstr(situation.never)));
    }
    for (const char* forbidden : {"dltune decide", "dltune launch"}) {  // never for a measurement
      if (situation.lineage().data.spec.procedure.Measures()) {
        EXPECT_THAT(step.command, Not(HasSubstr(forbidden)));
      }
    }
  }
}

TEST(NextStep, StartOfAProject) {
  const StudySpec with_batch = ParseStudySpec(
      "name: p\nworkload: synthetic\nmax_train_steps: 100\nspace:\n  batch_size: 64\n"
      "  learning_rate: {min: 0.001, max: 0.1, scale: log}\n",
      "p.yaml");
  const NextStep start = StartOfProject("p.yaml", with_batch);
  EXPECT_EQ(start.command,
            "dltune plan throughput --from p.yaml --batch-sizes 16:1024 -o p-throughput.yaml && dltune run "
            "p-throughput.yaml");
  const StudySpec without_batch = ParseStudySpec(
      "name: p\nworkload: synthetic\nmax_train_steps: 100\nspace:\n  learning_rate: {min: 0.001, max: 0.1, "
      "scale: log}\n",
      "p.yaml");
  EXPECT_EQ(StartOfProject("p.yaml", without_batch).command,
            "dltune plan fit-steps --from p.yaml -o p-fit-steps.yaml && dltune run p-fit-steps.yaml");
  const StudySpec loss = ParseStudySpec(
      "name: p\nworkload: synthetic\nmax_train_steps: 100\nobjective: valid/loss\nspace:\n  learning_rate: 0.1\n",
      "p.yaml");
  EXPECT_EQ(StartOfProject("p.yaml", loss).command, "dltune run p.yaml");
}

}  // namespace
}  // namespace dltune
