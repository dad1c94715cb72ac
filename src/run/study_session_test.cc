#include "dltune/run/study_session.h"

#include <gtest/gtest.h>

#include <cmath>

#include "run/run_test_util.h"

namespace dltune {
namespace {

using test::CommandSpec;
using test::TempStore;

TEST(StudySession, CreatesTheStudyWithItsPlannedTrialsOnce) {
  TempStore temp;
  const StudySpec spec = CommandSpec("s", "true", temp.dir(), 5);
  const StudySession first = StudySession::OpenOrCreate(temp.store(), spec, "dltune run s.yaml");
  EXPECT_EQ(first.Trials().size(), 5u);
  EXPECT_EQ(first.study().command_line, "dltune run s.yaml");
  const StudyPlan plan(spec);
  for (const auto& trial : first.Trials()) {
    EXPECT_EQ(trial.params, plan.Trial(trial.number).params);
    EXPECT_EQ(trial.seed, TrialSeed(spec.seed, trial.number));
    EXPECT_LT(trial.seed, std::uint64_t{1} << 63);
  }
  // The same spec, written differently, opens the same study without adding trials.
  StudySpec reformatted = spec;
  reformatted.text = "# a comment\n" + spec.text + "\n\n";
  const StudySession again = StudySession::OpenOrCreate(temp.store(), reformatted, "other");
  EXPECT_EQ(again.study().id, first.study().id);
  EXPECT_EQ(again.Trials().size(), 5u);
  EXPECT_EQ(StudySession::Open(temp.store(), "s").spec().command, "true");
  EXPECT_THROW(StudySession::Open(temp.store(), "nope"), Error);
}

TEST(StudySession, AChangedSpecIsRefusedWithItsDifference) {
  TempStore temp;
  (void)StudySession::OpenOrCreate(temp.store(), CommandSpec("s", "true", temp.dir(), 5), "");
  try {
    (void)StudySession::OpenOrCreate(temp.store(), CommandSpec("s", "true", temp.dir(), 6), "");
    FAIL() << "a changed spec must be refused";
  } catch (const SpecChangedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("- trials: 5"), std::string::npos) << message;
    EXPECT_NE(message.find("+ trials: 6"), std::string::npos) << message;
    EXPECT_NE(message.find("run with --extend"), std::string::npos) << message;  // only trials: was raised
  }
  try {
    (void)StudySession::OpenOrCreate(temp.store(), CommandSpec("s", "false", temp.dir(), 5), "", /*extend=*/true);
    FAIL() << "--extend takes only a raised trials:";
  } catch (const SpecChangedError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("give it another name (name: in the spec)"), std::string::npos) << message;
    EXPECT_NE(message.find("dltune show s --spec"), std::string::npos) << message;
  }
}

TEST(StudySession, AskReportTell) {
  TempStore temp;
  StudySession session = StudySession::OpenOrCreate(temp.store(), CommandSpec("s", "true", temp.dir(), 2), "");
  auto trial = session.Ask("me:1");
  ASSERT_TRUE(trial);
  EXPECT_EQ(trial->number(), 0u);
  EXPECT_TRUE(trial->ParamsByName().count("learning_rate"));
  trial->ReportTrain({.step = 1, .loss = 2.0});
  trial->ReportTrain({.step = 2, .loss = 1.0});
  EXPECT_THROW(trial->ReportTrain({.step = 2, .loss = 1.0}), Error);  // steps must increase
  trial->ReportEval(2, "valid", {{"error_rate", 0.5}, {"loss", 1.0}});
  trial->ReportTrain({.step = 3, .loss = 0.5});
  trial->ReportEval(3, "valid", {{"error_rate", 0.25}});
  trial->ReportTrain({.step = 4, .loss = 0.4});
  trial->ReportEval(4, "valid", {{"error_rate", 0.3}});
  EXPECT_THROW(trial->ReportEval(4, "valid", {{"loss", NAN}}), Error);
  EXPECT_EQ(trial->best_step(), 3);
  EXPECT_EQ(trial->Complete(), TrialState::kCompleted);
  EXPECT_THROW(trial->Complete(), Error);

  const auto record = temp.store().FindTrial(session.study().id, 0);
  EXPECT_EQ(record->state, TrialState::kCompleted);
  EXPECT_EQ(record->best_step, 3);
  EXPECT_EQ(record->best_value, 0.25);
  EXPECT_EQ(record->final_value, 0.3);
  EXPECT_EQ(temp.store().TrainSeries(record->id).size(), 4u);

  // A trial that never evaluated the objective has nothing to be judged by.
  auto second = session.Ask("me:1");
  second->ReportEval(1, "train", {{"error_rate", 0.1}});
  EXPECT_EQ(second->Complete(), TrialState::kFailed);
  EXPECT_NE(temp.store().FindTrial(session.study().id, 1)->reason.find("valid/error_rate"), std::string::npos);
  EXPECT_FALSE(session.Ask("me:1"));
}

TEST(StudySession, BeginAtACheckpointDropsLaterMeasurementsAndTheirBest) {
  TempStore temp;
  StudySession session = StudySession::OpenOrCreate(temp.store(), CommandSpec("s", "true", temp.dir(), 1), "");
  auto first = session.Ask("a:1");
  for (int step = 1; step <= 4; ++step) first->ReportTrain({.step = step, .loss = 1.0 / step});
  first->ReportEval(2, "valid", {{"error_rate", 0.4}});
  first->ReportEval(4, "valid", {{"error_rate", 0.1}});
  first->Stop("preempted");
  ASSERT_EQ(temp.store().ResumeStopped(session.study().id), 1);

  auto resumed = session.Ask("b:2");
  resumed->Begin(2);  // its checkpoint is at step 2
  EXPECT_EQ(resumed->best_step(), 2);
  EXPECT_EQ(resumed->best_value(), 0.4);
  EXPECT_THROW(resumed->ReportTrain({.step = 2}), Error);
  resumed->ReportTrain({.step = 3, .loss = 0.3});
  resumed->ReportTrain({.step = 4, .loss = 0.2});
  resumed->ReportEval(4, "valid", {{"error_rate", 0.3}});
  resumed->Complete();
  const auto record = temp.store().FindTrial(session.study().id, 0);
  std::vector<std::int64_t> steps;
  for (const auto& m : temp.store().TrainSeries(record->id)) steps.push_back(m.step);
  EXPECT_EQ(steps, (std::vector<std::int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(temp.store().TrainSeries(record->id)[3].loss, 0.2);
  EXPECT_EQ(record->best_value, 0.3);
  EXPECT_EQ(record->best_step, 4);
}

TEST(StudySession, ParamsByNameResolvesSharedNames) {
  const StudySpec spec = ParseStudySpec(R"(name: s
workload: synthetic
max_train_steps: 10
space:
  optimizer: {values: [sgd, adam], role: scientific}
  sgd_lr: {name: learning_rate, when: {optimizer: sgd}, min: 0.1, max: 1}
  adam_lr: {name: learning_rate, when: {optimizer: adam}, min: 0.001, max: 0.01}
)",
                                        "s.yaml");
  const auto params = ParamsByName(*spec.space, {{"optimizer", std::string("adam")}, {"adam_lr", 0.005}});
  EXPECT_EQ(params.at("learning_rate"), Value(0.005));
  EXPECT_EQ(params.size(), 2u);
}

// A made-up objective with its minimum at learning_rate = 0.1.
double Bowl(const ActiveTrial& trial) {
  const double lr = std::get<double>(trial.record().params.at("learning_rate"));
  return 0.1 + std::pow(std::log10(lr) + 1, 2);
}

TEST(StudySession, AGpStudyMakesItsLaterTrialsFromTheResultsSoFar) {
  TempStore temp;
  const StudySpec spec = CommandSpec("gp", "true", temp.dir(), 8, "sampler: {name: gp, initial_trials: 3}\n");
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  EXPECT_EQ(session.Trials().size(), 3u);  // the Halton start; the model makes the rest
  const StudyPlan plan(spec);
  EXPECT_TRUE(plan.IsAdaptive());
  EXPECT_TRUE(plan.IsPlanned(2));
  EXPECT_FALSE(plan.IsPlanned(3));
  EXPECT_THROW(plan.Trial(3), Error);

  int close_model_trials = 0;
  std::uint64_t expected = 0;
  while (auto trial = session.Ask("me:1")) {
    EXPECT_EQ(trial->number(), expected++);
    const double value = Bowl(*trial);
    if (trial->number() >= 3 && value < 0.1 + 0.05 * 0.05) ++close_model_trials;  // within 0.05 decades of 0.1
    trial->ReportEval(1, "valid", {{"error_rate", value}});
    EXPECT_EQ(trial->Complete(), TrialState::kCompleted);
  }
  EXPECT_EQ(expected, 8u);
  EXPECT_EQ(session.Trials().size(), 8u);
  // The model's trials close in on the bottom of a smooth 1-D bowl. Quasi-random points 0.25 decades apart (8 over
  // the range's 2 decades) could put at most one within 0.05 decades of it.
  EXPECT_GE(close_model_trials, 2);
}

TEST(StudySession, AGpTrialAskedWhileAnotherRunsIsNotTheSamePoint) {
  TempStore temp;
  const StudySpec spec = CommandSpec("gp", "true", temp.dir(), 6, "sampler: {name: gp, initial_trials: 2}\n");
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  for (int i = 0; i < 2; ++i) {
    auto trial = session.Ask("me:1");
    ASSERT_TRUE(trial);
    trial->ReportEval(1, "valid", {{"error_rate", Bowl(*trial)}});
    trial->Complete();
  }
  auto third = session.Ask("me:1");   // made from the two results
  auto fourth = session.Ask("me:2");  // made with the third still running
  ASSERT_TRUE(third && fourth);
  EXPECT_EQ(third->number(), 2u);
  EXPECT_EQ(fourth->number(), 3u);
  const auto history = session.History(3, session.Trials());
  ASSERT_EQ(history.size(), 3u);
  EXPECT_EQ(history[2].kind, ObservationKind::kPending);
  const double a = std::get<double>(third->record().params.at("learning_rate"));
  const double b = std::get<double>(fourth->record().params.at("learning_rate"));
  EXPECT_GT(std::abs(std::log10(a) - std::log10(b)), 0.01) << a << " vs " << b;
}

TEST(StudySession, AGpStudyWarmStartsFromAnEarlierStudysResults) {
  TempStore temp;
  StudySession earlier = StudySession::OpenOrCreate(temp.store(), CommandSpec("explore", "true", temp.dir(), 6), "");
  int n = 0;
  while (auto trial = earlier.Ask("me:1")) {
    if (n++ == 0) {
      trial->Infeasible("diverged");
      continue;
    }
    trial->ReportEval(1, "valid", {{"error_rate", Bowl(*trial)}});
    trial->Complete();
  }
  const StudySpec spec = CommandSpec("exploit", "true", temp.dir(), 3, "sampler: {name: gp, warm_start: explore}\n");
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  EXPECT_TRUE(session.Trials().empty());  // no Halton start: the earlier results are the start
  const auto history = session.History(0, {});
  ASSERT_EQ(history.size(), 6u);
  EXPECT_EQ(history[0].kind, ObservationKind::kInfeasible);
  EXPECT_EQ(history[1].kind, ObservationKind::kCompleted);
  auto trial = session.Ask("me:1");
  ASSERT_TRUE(trial);
  EXPECT_EQ(trial->number(), 0u);

  // The earlier study must exist and measure the same objective.
  try {
    (void)StudySession::OpenOrCreate(
        temp.store(), CommandSpec("other", "true", temp.dir(), 3, "sampler: {name: gp, warm_start: nope}\n"), "");
    FAIL() << "a missing warm_start study must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'nope'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      (void)StudySession::OpenOrCreate(temp.store(),
                                       CommandSpec("third", "true", temp.dir(), 3,
                                                   "objective: valid/loss\nsampler: {name: gp, warm_start: explore}\n"),
                                       ""),
      Error);
}

TEST(StudySession, HistoryOrientsMaximizedObjectivesSoLowerIsBetter) {
  TempStore temp;
  const StudySpec spec = CommandSpec("max", "true", temp.dir(), 4,
                                     "objective: {metric: valid/accuracy, direction: maximize}\n"
                                     "sampler: {name: gp, initial_trials: 2}\n");
  StudySession session = StudySession::OpenOrCreate(temp.store(), spec, "");
  auto trial = session.Ask("me:1");
  ASSERT_TRUE(trial);
  trial->ReportEval(1, "valid", {{"accuracy", 0.75}});
  trial->Complete();
  const auto history = session.History(3, session.Trials());
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].kind, ObservationKind::kCompleted);
  EXPECT_EQ(history[0].value, -0.75);
  EXPECT_EQ(history[1].kind, ObservationKind::kPending);
}

// More replicas extend a study: the trials made stay (same numbers, params, seeds) and only the new rounds are added;
// more configurations of a study with replicas would renumber its trials and are refused.
TEST(StudySession, MoreReplicasExtendAStudyWithoutRerunningAny) {
  TempStore temp;
  const StudySpec two = CommandSpec("r", "true", temp.dir(), 3, "replicas: 2\ndescription: 2 replicas\n");
  StudySession session = StudySession::OpenOrCreate(temp.store(), two, "");
  while (auto trial = session.Ask("w")) {
    trial->ReportEval(1, "valid", {{"error_rate", 0.5}});
    trial->Complete();
  }
  const auto before = session.Trials();
  ASSERT_EQ(before.size(), 6u);
  const StudySpec four = CommandSpec("r", "true", temp.dir(), 3, "replicas: 4\ndescription: 4 replicas\n");
  StudySession extended = StudySession::OpenOrCreate(temp.store(), four, "", /*extend=*/true);
  int added = 0;
  while (auto trial = extended.Ask("w")) {
    EXPECT_GE(trial->number(), 6u);  // none of the six made before
    trial->ReportEval(1, "valid", {{"error_rate", 0.5}});
    trial->Complete();
    ++added;
  }
  EXPECT_EQ(added, 6);
  const auto after = extended.Trials();
  ASSERT_EQ(after.size(), 12u);
  for (std::size_t i = 0; i < before.size(); ++i) {
    EXPECT_EQ(after[i].params, before[i].params);
    EXPECT_EQ(after[i].seed, before[i].seed);
    EXPECT_EQ(after[i].replica, before[i].replica);
  }
  for (std::size_t i = 6; i < 12; ++i) EXPECT_EQ(after[i].configuration, after[i - 3].configuration);
  EXPECT_THROW(StudySession::OpenOrCreate(temp.store(), CommandSpec("r", "true", temp.dir(), 4, "replicas: 4\n"), "",
                                          /*extend=*/true),
               SpecChangedError);
}

}  // namespace
}  // namespace dltune
