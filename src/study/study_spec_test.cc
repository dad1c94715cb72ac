#include "dltune/study/study_spec.h"

#include <chrono>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace dltune {
namespace {

using ::testing::HasSubstr;

std::string SpecError(const std::string& text) {
  try {
    ParseStudySpec(text, "study.yaml");
  } catch (const dltune::SpecError& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kHeader = "name: s\nworkload: {name: synthetic}\nmax_train_steps: 100\n";

TEST(StudySpec, QuickstartHasOneSubStudyPerOptimizer) {
  const StudySpec spec = LoadStudySpec(DLTUNE_SOURCE_DIR "/examples/quickstart.yaml");
  EXPECT_EQ(spec.name, "quickstart");
  EXPECT_EQ(spec.workload.name, "fashion_mnist_mlp");
  EXPECT_EQ(spec.scientific_mode, ScientificMode::kSeparate);
  EXPECT_EQ(spec.space->Find("optimizer")->role, Role::kScientific);
  EXPECT_EQ(spec.space->Find("nesterov_learning_rate")->name, "learning_rate");
  EXPECT_EQ(spec.space->Find("adam_learning_rate")->name, "learning_rate");
  const StudyPlan plan(spec);
  ASSERT_EQ(plan.SubStudyCount(), 2u);
  EXPECT_EQ(plan.SubStudyAt(0).label, "optimizer=nesterov");
  EXPECT_EQ(plan.SubStudyAt(1).label, "optimizer=adam");
  EXPECT_EQ(plan.TrialCount(), 2 * spec.trials);
  for (std::uint64_t n = 0; n < plan.TrialCount(); ++n) {
    const PlannedTrial trial = plan.Trial(n);
    const bool adam = trial.params.at("optimizer") == Value("adam");
    EXPECT_EQ(trial.params.count("one_minus_beta1"), adam ? 1u : 0u);
    EXPECT_EQ(trial.params.count("one_minus_momentum"), adam ? 0u : 1u);
    EXPECT_EQ(trial.substudy, adam ? 1u : 0u);
    EXPECT_EQ(trial.index, n / 2);  // interleaved
  }
}

TEST(StudySpec, DefaultsAndTopLevelKeys) {
  const StudySpec spec = ParseStudySpec(std::string(kHeader) + "space:\n  lr: {min: 0.1, max: 1}\n", "s.yaml");
  EXPECT_EQ(spec.trials, 20u);
  EXPECT_FALSE(spec.trials_given);
  EXPECT_EQ(spec.seed, 0u);
  EXPECT_EQ(spec.sampler.name, "halton");
  EXPECT_EQ(spec.objective.Name(), "valid/error_rate");
  EXPECT_EQ(spec.objective.direction, Direction::kMinimize);
  EXPECT_EQ(spec.scientific_mode, ScientificMode::kSeparate);
  const StudyPlan plan(spec);
  EXPECT_EQ(plan.SubStudyCount(), 1u);
  EXPECT_EQ(plan.SubStudyAt(0).label, "all");
}

TEST(StudySpec, RefusesToSearchTheStepBudget) {
  const std::string message = SpecError(std::string(kHeader) + "space:\n  max_train_steps: {values: [1000, 2000]}\n");
  EXPECT_THAT(message, HasSubstr("study.yaml:5:3: space.max_train_steps cannot be a param of the space"));
  EXPECT_THAT(message, HasSubstr("Determining the number of steps for each training run"));
  EXPECT_THAT(SpecError("name: s\nworkload: w\nspace: {a: {min: 0, max: 1}}\n"),
              HasSubstr("max_train_steps is missing"));
}

TEST(StudySpec, TopLevelMistakes) {
  EXPECT_THAT(SpecError(std::string(kHeader) + "trails: 5\nspace: {a: [1, 2]}\n"),
              HasSubstr("study.yaml:4:1: trails is not a known key of top level (did you mean 'trials'?)"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "scientific_mode: seperate\nspace: {a: [1, 2]}\n"),
              HasSubstr("did you mean 'separate'?"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "trials: 0\nspace: {a: [1, 2]}\n"),
              HasSubstr("trials must be between 1"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "objective: {direction: minimise}\nspace: {a: [1, 2]}\n"),
              HasSubstr("did you mean 'minimize'?"));
  EXPECT_THAT(SpecError("name: 'bad name'\nworkload: w\nmax_train_steps: 5\nspace: {a: [1, 2]}\n"),
              HasSubstr("study.yaml:1:7: name must be"));
  EXPECT_THAT(SpecError(""), HasSubstr("is empty"));
  EXPECT_THAT(SpecError("- a\n- b\n"), HasSubstr("must be a mapping"));
}

TEST(StudySpec, ResourcesSayGpusPerTrialAndTrialsPerGpu) {
  const std::string space = "space: {learning_rate: 0.1}\n";
  const StudySpec defaults = ParseStudySpec(std::string(kHeader) + space, "study.yaml");
  EXPECT_FALSE(defaults.resources.gpus_per_trial);
  EXPECT_EQ(defaults.resources.trials_per_gpu, 0);
  const StudySpec packed = ParseStudySpec(
      std::string(kHeader) + "resources: {gpus_per_trial: 1, trials_per_gpu: 4}\n" + space, "study.yaml");
  EXPECT_EQ(packed.resources.gpus_per_trial, 1);
  EXPECT_EQ(packed.resources.trials_per_gpu, 4);
  const StudySpec automatic = ParseStudySpec(
      std::string(kHeader) + "resources: {gpus_per_trial: auto, trials_per_gpu: auto}\n" + space, "study.yaml");
  EXPECT_FALSE(automatic.resources.gpus_per_trial);
  EXPECT_EQ(automatic.resources.trials_per_gpu, 0);
  EXPECT_EQ(ParseStudySpec(std::string(kHeader) + "resources: {gpus_per_trial: 0}\n" + space, "study.yaml")
                .resources.gpus_per_trial,
            0);

  EXPECT_THAT(SpecError(std::string(kHeader) + "resources: {gpus_per_trial: -1}\n" + space),
              HasSubstr("study.yaml:4:29: resources.gpus_per_trial must be auto or a whole number from 0 to 64"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "resources: {trials_per_gpu: 0}\n" + space),
              HasSubstr("resources.trials_per_gpu must be auto or a whole number from 1 to 64"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "resources: {gpus_per_trial: 2, trials_per_gpu: 3}\n" + space),
              HasSubstr("set gpus_per_trial: 1"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "resources: {gpus: 1}\n" + space),
              HasSubstr("gpus is not a known key of resources"));
}

TEST(StudySpec, AlgoperfSeedsFitNumpy) {
  EXPECT_THAT(SpecError(std::string(kHeader) + "sampler: halton_algoperf\nseed: 4294967296\nspace: {a: [1, 2]}\n"),
              HasSubstr("study.yaml:5:7: seed must be below 2^32"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "objective: ''\nspace: {a: [1, 2]}\n"), HasSubstr("must name a metric"));
}

TEST(StudySpec, SeparateModeNeedsListedScientificValues) {
  EXPECT_THAT(SpecError(std::string(kHeader) + "space:\n  width: {min: 1, max: 8, type: int, role: scientific}\n"),
              HasSubstr("use scientific_mode: joint"));
  const StudySpec joint = ParseStudySpec(
      std::string(kHeader) +
          "scientific_mode: joint\ntrials: 9\nspace:\n  width: {min: 1, max: 8, type: int, role: scientific}\n",
      "s.yaml");
  EXPECT_EQ(StudyPlan(joint).TrialCount(), 9u);
}

TEST(StudySpec, JointModeSpreadsScientificValuesEvenly) {
  const StudySpec spec = ParseStudySpec(std::string(kHeader) + R"(
scientific_mode: joint
trials: 30
space:
  activation: {values: [relu, tanh, gelu], role: scientific}
  lr: {min: 1.0e-4, max: 1, scale: log}
)",
                                        "s.yaml");
  const StudyPlan plan(spec);
  ASSERT_EQ(plan.SubStudyCount(), 1u);
  std::map<std::string, int> counts;
  for (std::uint64_t n = 0; n < plan.TrialCount(); ++n)
    ++counts[std::get<std::string>(plan.Trial(n).params.at("activation"))];
  EXPECT_EQ(counts, (std::map<std::string, int>{{"gelu", 10}, {"relu", 10}, {"tanh", 10}}));
}

TEST(StudySpec, GridAndListCountsMustMatchAnExplicitTrialCount) {
  EXPECT_EQ(SpecError(std::string(kHeader) + "trials: 5\nsampler: grid\nspace:\n  a: {min: 0, max: 1}\n"),
            "(no error)");
  EXPECT_THAT(SpecError(std::string(kHeader) + "trials: 4\nsampler: grid\nspace:\n  a: {min: 0, max: 1}\n"),
              HasSubstr("the grid sampler makes 5 trials"));
  const StudySpec spec = ParseStudySpec(
      std::string(kHeader) + "sampler: {name: grid, points: 4}\nspace:\n  a: {min: 0, max: 1}\n", "s.yaml");
  EXPECT_EQ(StudyPlan(spec).TrialCount(), 4u);
  EXPECT_THAT(SpecError(std::string(kHeader) + R"(
sampler: {name: list, configs: [{o: x}]}
space:
  o: {values: [x, y], role: scientific}
)"),
              HasSubstr("makes no trial for sub-study o=y"));
}

TEST(StudySpec, UnevenSubStudiesInterleaveUntilEachRunsOut) {
  const StudySpec spec = ParseStudySpec(std::string(kHeader) + R"(
sampler: {name: list, configs: [{o: x, a: 1}, {o: y, a: 1}, {o: x, a: 2}, {o: x, a: 3}]}
space:
  o: {values: [x, y], role: scientific}
  a: [1, 2, 3]
)",
                                        "s.yaml");
  const StudyPlan plan(spec);
  ASSERT_EQ(plan.TrialCount(), 4u);
  std::vector<std::pair<std::size_t, std::uint64_t>> order;
  for (std::uint64_t n = 0; n < 4; ++n) order.emplace_back(plan.Trial(n).substudy, plan.Trial(n).index);
  EXPECT_EQ(order, (std::vector<std::pair<std::size_t, std::uint64_t>>{{0, 0}, {1, 0}, {0, 1}, {0, 2}}));
  EXPECT_THROW(plan.Trial(4), Error);
}

// The spec's sampler halton_algoperf reproduces algoperf's generate_search bit for bit
// (a reference file of test vectors (halton_algoperf.txt, not part of this repository): np.random.seed(0);
// generate_search(search_space, 8)).
TEST(StudySpec, AlgoperfSamplerReproducesGenerateSearch) {
  const StudySpec spec = ParseStudySpec(std::string(kHeader) + R"(
trials: 8
seed: 0
sampler: halton_algoperf
space:
  learning_rate: {min: 0.0001, max: 0.1, scale: log}
  dropout: {min: 0.0, max: 0.5}
  optimizer: [adam, sgd, nadamw]
)",
                                        "s.yaml");
  const StudyPlan plan(spec);
  struct Expected {
    double learning_rate;
    double dropout;
    const char* optimizer;
  };
  const Expected expected[] = {
      {0.0072061331528528172, 0.060181521786279557, "nadamw"}, {0.00058979523439616518, 0.11511539767641177, "sgd"},
      {0.026280071384439094, 0.49558335291547584, "nadamw"},   {0.0013112388607671496, 0.24888955840886345, "adam"},
      {0.00033500501640642226, 0.18785191853093874, "sgd"},    {0.00025789220113952454, 0.13698721863266816, "adam"},
      {0.030058576069768379, 0.15173798160316654, "nadamw"},   {0.00032336885469272722, 0.23769932443124397, "nadamw"},
  };
  ASSERT_EQ(plan.TrialCount(), 8u);
  for (std::uint64_t n = 0; n < 8; ++n) {
    const Assignment params = plan.Trial(n).params;
    EXPECT_EQ(std::get<double>(params.at("learning_rate")), expected[n].learning_rate) << n;
    EXPECT_EQ(std::get<double>(params.at("dropout")), expected[n].dropout) << n;
    EXPECT_EQ(params.at("optimizer"), Value(std::string(expected[n].optimizer))) << n;
  }
}

// A study's size is bounded, and its plan does not grow with it: a million sub-studies of one trial each are planned
// without making them, and any one is made on demand.
TEST(StudyPlan, IsLazyAndBounded) {
  std::string values;
  for (int v = 0; v < 1000; ++v) values += (v ? ", " : "") + std::to_string(v);
  const std::string space = "space:\n  a: {role: scientific, values: [" + values +
                            "]}\n  b: {role: scientific, values: [" + values +
                            "]}\n  lr: {min: 0.01, max: 1, scale: log}\n";
  const auto start = std::chrono::steady_clock::now();
  const StudySpec spec = ParseStudySpec(std::string(kHeader) + "trials: 1\n" + space, "study.yaml");
  const StudyPlan plan(spec);
  EXPECT_EQ(plan.SubStudyCount(), 1000000u);
  EXPECT_EQ(plan.TrialCount(), 1000000u);
  EXPECT_EQ(plan.SubStudyAt(999999).label, "a=999,b=999");
  EXPECT_EQ(plan.Trial(1001).params.at("a"), Value(std::int64_t{1}));
  EXPECT_EQ(plan.Trial(1001).params.at("b"), Value(std::int64_t{1}));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  // One more trial per sub-study is too many.
  EXPECT_THAT(SpecError(std::string(kHeader) + "trials: 2\n" + space),
              HasSubstr("space makes 1,000,000 sub-studies of 2 trials each: 2,000,000 trials, and a study runs at "
                        "most 1,000,000"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "trials: 1\nscientific_mode: joint\n" + space),
              HasSubstr("can deal at most 100,000"));
}

// Replicas: replica r of every configuration before any replica r + 1, the same seed for replica r of every
// configuration, and replica 0 of a parent trial's config with that trial's seed.
TEST(StudyPlan, ReplicasInterleaveAndShareSeeds) {
  const StudySpec spec = ParseStudySpec(std::string(kHeader) + R"(replicas: 3
trials: 2
space:
  optimizer: {values: [sgd, adam], role: scientific}
  learning_rate: {min: 0.001, max: 0.1, scale: log}
)",
                                        "study.yaml");
  const StudyPlan plan(spec);
  EXPECT_EQ(plan.ConfigurationCount(), 4u);
  EXPECT_EQ(plan.TrialCount(), 12u);
  for (std::uint64_t n = 0; n < plan.TrialCount(); ++n) {
    const PlannedTrial trial = plan.Trial(n);
    EXPECT_EQ(trial.configuration, n % 4);
    EXPECT_EQ(trial.replica, n / 4);
    EXPECT_EQ(trial.params, plan.Trial(n % 4).params);  // replicas share the params
    EXPECT_EQ(trial.seed, ReplicaSeed(spec.seed, trial.replica));
  }
  EXPECT_NE(ReplicaSeed(0, 1), TrialSeed(0, 1));  // a stream of its own

  const StudySpec retrain = ParseStudySpec(std::string(kHeader) + R"(replicas: 2
sampler:
  name: list
  configs:
    - {optimizer: adam, learning_rate: 0.01}
    - {optimizer: sgd, learning_rate: 0.05}
space:
  optimizer: {values: [sgd, adam], role: scientific}
  learning_rate: {min: 0.001, max: 0.1, scale: log}
procedure:
  kind: retrain
  parent: p
  from_trials: [{trial: 7, seed: 111}, {trial: 4, seed: 222}]
)",
                                           "retrain.yaml");
  const StudyPlan retrain_plan(retrain);
  // The list puts the sgd config in sub-study 0 (configuration 0) and the adam one in sub-study 1.
  EXPECT_EQ(retrain_plan.Trial(0).seed, 222u);
  EXPECT_EQ(retrain_plan.Trial(1).seed, 111u);
  EXPECT_EQ(retrain_plan.ParentOf(0)->trial, 4u);
  EXPECT_EQ(retrain_plan.ParentOf(1)->trial, 7u);
  EXPECT_EQ(retrain_plan.Trial(2).seed, ReplicaSeed(0, 1));
  EXPECT_EQ(retrain_plan.Trial(3).seed, ReplicaSeed(0, 1));
}

TEST(StudySpec, ReplicasAndProcedureMistakes) {
  const std::string space = "space: {learning_rate: {min: 0.001, max: 0.1}}\n";
  EXPECT_THAT(SpecError(std::string(kHeader) + "replicas: 0\n" + space), HasSubstr("replicas must be between 1"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "replicas: 2\nsampler: gp\n" + space),
              HasSubstr("needs a sampler that plans its trials up front"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "procedure: {kind: retrian, parent: p}\n" + space),
              HasSubstr("did you mean 'retrain'"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "procedure: {kind: retrain}\n" + space), HasSubstr("needs parent:"));
  EXPECT_THAT(SpecError(std::string(kHeader) +
                        "procedure: {kind: retrain, parent: p, from_trials: [{trial: 1, seed: "
                        "2}]}\n" +
                        space),
              HasSubstr("it needs one per config of the list sampler"));
  EXPECT_THAT(SpecError(std::string(kHeader) + "evaluate_command: python3 eval.py\n" + space),
              HasSubstr("applies to a study with its own command:"));
}

}  // namespace
}  // namespace dltune
