#include "analyze/pareto.h"

#include <algorithm>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "analyze_test_util.h"

namespace dltune {
namespace {

using testing::AddTrial;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::MakeData;

constexpr const char* kSpec =
    "name: p\nworkload: synthetic\nmax_train_steps: 10\nobjective: valid/error_rate\n"
    "space:\n  lr: {min: 0.001, max: 1.0, scale: log}\n";

// A completed trial with best objective `best` whose training steps took `seconds`.
void AddTimed(StudyData& data, std::uint64_t number, double best, double seconds, std::size_t substudy = 0,
              const std::string& label = "all") {
  AddTrial(data, number, TrialState::kCompleted, {{"lr", Value(0.01)}}, best, 10, substudy, label).time_split = {
      {"startup", 1.0}, {"train", seconds}};
}

std::vector<bool> OnFront(const ParetoSubStudy& sub) {
  std::vector<bool> marks;
  for (const ParetoPoint& point : sub.points) marks.push_back(point.on_front);
  return marks;
}

// Trial 1 is cheaper and better than trial 2; trials 0, 1 and 3 trade cost for quality.
TEST(Pareto, TheFrontHoldsTheTrialsNoOtherIsCheaperAndBetterThan) {
  StudyData data = MakeData(kSpec);
  AddTimed(data, 0, 0.30, 10);
  AddTimed(data, 1, 0.20, 20);
  AddTimed(data, 2, 0.25, 30);
  AddTimed(data, 3, 0.10, 40);
  const ParetoView view = AnalyzePareto(data, ParetoCost::kTrainingSeconds);
  EXPECT_TRUE(view.recorded);
  ASSERT_EQ(view.substudies.size(), 1u);
  const ParetoSubStudy& sub = view.substudies[0];
  EXPECT_THAT(sub.front, ElementsAre(0, 1, 3));
  EXPECT_THAT(OnFront(sub), ElementsAre(true, true, false, true));
  EXPECT_EQ(sub.points[2].cost, 30);
  EXPECT_EQ(sub.points[2].objective, 0.25);
}

// A maximized objective: the higher value is the better one.
TEST(Pareto, TheObjectivesDirectionDecidesWhichIsBetter) {
  std::string spec = kSpec;
  spec.replace(spec.find("objective: valid/error_rate"), 27,
               "objective: {metric: valid/accuracy, direction: maximize}");
  StudyData data = MakeData(spec);
  AddTimed(data, 0, 0.30, 10);
  AddTimed(data, 1, 0.20, 20);
  AddTimed(data, 2, 0.90, 30);
  EXPECT_THAT(AnalyzePareto(data, ParetoCost::kTrainingSeconds).substudies[0].front, ElementsAre(0, 2));
}

// Equal cost: the better objective wins; equal objective: the cheaper; equal both: every one of them is on the front,
// by trial number, whatever the trials' order.
TEST(Pareto, TiesAreDecidedTheSameWayEveryTime) {
  StudyData data = MakeData(kSpec);
  AddTimed(data, 0, 0.20, 10);
  AddTimed(data, 1, 0.10, 10);  // same cost as 0, better: 0 is off the front
  AddTimed(data, 2, 0.10, 20);  // same objective as 1, dearer: off
  AddTimed(data, 3, 0.05, 30);
  AddTimed(data, 4, 0.05, 30);  // the same as 3: both on it
  const ParetoView view = AnalyzePareto(data, ParetoCost::kTrainingSeconds);
  EXPECT_THAT(view.substudies[0].front, ElementsAre(1, 3, 4));
  std::reverse(data.trials.begin(), data.trials.end());
  const ParetoView reversed = AnalyzePareto(data, ParetoCost::kTrainingSeconds);
  EXPECT_THAT(reversed.substudies[0].front, ElementsAre(1, 3, 4));
  EXPECT_THAT(OnFront(reversed.substudies[0]), ElementsAre(false, true, false, true, true));
}

// Examples per second is a cost where more is cheaper: the fastest trial is the cheap end of the front.
TEST(Pareto, MoreExamplesPerSecondIsCheaper) {
  StudyData data = MakeData(kSpec);
  const double speeds[] = {1000, 500, 2000};
  const double best[] = {0.2, 0.1, 0.3};
  for (std::uint64_t i = 0; i < 3; ++i) {
    AddTrial(data, i, TrialState::kCompleted, {{"lr", Value(0.01)}}, best[i]);
    // The first step (a fifth of 5, start-up) is slow and left out of the median.
    for (std::int64_t step = 1; step <= 5; ++step) {
      const double speed = step == 1 ? speeds[i] / 100 : speeds[i] * (step % 2 == 0 ? 1.0 : 1.1);
      data.train[i].push_back({.step = step, .step_time = 64 / speed, .examples_per_second = speed});
    }
  }
  const ParetoView view = AnalyzePareto(data, ParetoCost::kExamplesPerSecond);
  EXPECT_THAT(view.substudies[0].front, ElementsAre(2, 0, 1));
  EXPECT_DOUBLE_EQ(view.substudies[0].points[0].cost, 1050);  // median of 1000, 1100, 1000, 1100
  // Against seconds per step the same trials: trial 2 is the quickest per step, the cheapest.
  const ParetoView per_step = AnalyzePareto(data, ParetoCost::kSecondsPerStep);
  EXPECT_THAT(per_step.substudies[0].front, ElementsAre(2, 0, 1));
  EXPECT_NEAR(per_step.substudies[0].points[1].cost, (64 / 500.0 + 64 / 550.0) / 2, 1e-15);
  // Slower and worse than trial 0: off the front of either.
  AddTrial(data, 3, TrialState::kCompleted, {{"lr", Value(0.01)}}, 0.25);
  data.train[3].push_back({.step = 1, .step_time = 0.5, .examples_per_second = 128});
  EXPECT_THAT(AnalyzePareto(data, ParetoCost::kExamplesPerSecond).substudies[0].front, ElementsAre(2, 0, 1));
  EXPECT_FALSE(AnalyzePareto(data, ParetoCost::kSecondsPerStep).substudies[0].points[3].on_front);
}

// Parameter count and peak GPU memory come from the resources record: a lower one is cheaper.
TEST(Pareto, ParameterCountAndPeakMemoryComeFromTheResourcesRecord) {
  StudyData data = MakeData(kSpec);
  AddTrial(data, 0, TrialState::kCompleted, {{"lr", Value(0.01)}}, 0.2).resources =
      R"({"parameter_count": 5000, "model": "NVIDIA H100", "uuids": ["GPU-1"], "peak_memory_bytes": 3e9})";
  AddTrial(data, 1, TrialState::kCompleted, {{"lr", Value(0.01)}}, 0.1).resources =
      R"({"parameter_count": 90000, "model": "NVIDIA H100", "uuids": ["GPU-1"], "peak_memory_bytes": 1e9})";
  EXPECT_THAT(AnalyzePareto(data, ParetoCost::kParameters).substudies[0].front, ElementsAre(0, 1));
  EXPECT_THAT(AnalyzePareto(data, ParetoCost::kPeakGpuMemory).substudies[0].front, ElementsAre(1));
  EXPECT_THAT(RecordedCosts(data), ElementsAre(ParetoCost::kParameters, ParetoCost::kPeakGpuMemory));
}

// Infeasible trials are points (marked, without an objective) but never on the front, even when cheapest; trials
// still running, failed or without the cost are counted, not drawn.
TEST(Pareto, InfeasibleTrialsAreMarkedButNeverOnTheFront) {
  StudyData data = MakeData(kSpec);
  AddTimed(data, 0, 0.2, 10);
  AddTrial(data, 1, TrialState::kInfeasible, {{"lr", Value(0.9)}}, 0.01).time_split = {{"train", 1.0}};
  AddTrial(data, 2, TrialState::kRunning, {{"lr", Value(0.1)}}, 0.05).time_split = {{"train", 1.0}};
  AddTrial(data, 3, TrialState::kFailed, {{"lr", Value(0.1)}});
  AddTrial(data, 4, TrialState::kCompleted, {{"lr", Value(0.1)}}, 0.3);  // no time split
  const ParetoView view = AnalyzePareto(data, ParetoCost::kTrainingSeconds);
  const ParetoSubStudy& sub = view.substudies[0];
  ASSERT_EQ(sub.points.size(), 2u);
  EXPECT_TRUE(sub.points[1].infeasible);
  EXPECT_FALSE(sub.points[1].objective);
  EXPECT_FALSE(sub.points[1].on_front);
  EXPECT_THAT(sub.front, ElementsAre(0));
  EXPECT_EQ(sub.unfinished, 2);
  EXPECT_EQ(sub.without_cost, 1);
}

// A cost no trial recorded says so, and why; a CPU study has no GPU memory, a GPU one without NVML's peak says that.
TEST(Pareto, ACostNoTrialRecordedIsNotRecorded) {
  StudyData data = MakeData(kSpec);
  AddTimed(data, 0, 0.2, 10);
  AddTimed(data, 1, 0.1, 20, 0);
  EXPECT_THAT(RecordedCosts(data), ElementsAre(ParetoCost::kTrainingSeconds));
  const ParetoView memory = AnalyzePareto(data, ParetoCost::kPeakGpuMemory);
  EXPECT_FALSE(memory.recorded);
  EXPECT_EQ(memory.substudies[0].without_cost, 2);
  EXPECT_TRUE(memory.substudies[0].front.empty());
  EXPECT_THAT(NotRecordedText(data, ParetoCost::kPeakGpuMemory), HasSubstr("a study on the CPU"));
  data.trials[0].resources = R"({"model": "NVIDIA H100", "uuids": ["GPU-1"], "peak_memory_bytes": null})";
  EXPECT_THAT(NotRecordedText(data, ParetoCost::kPeakGpuMemory), HasSubstr("NVML did not give"));
  EXPECT_FALSE(AnalyzePareto(data, ParetoCost::kParameters).recorded);
  // A zero or non-finite value is no measurement.
  data.trials[0].time_split["train"] = 0;
  data.trials[1].time_split["train"] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_FALSE(AnalyzePareto(data, ParetoCost::kTrainingSeconds).recorded);
}

// Each sub-study has its own front.
TEST(Pareto, EachSubStudyHasItsOwnFront) {
  StudyData data = MakeData(kSpec);
  AddTimed(data, 0, 0.2, 10, 0, "opt=sgd");
  AddTimed(data, 1, 0.1, 50, 1, "opt=adam");
  AddTimed(data, 2, 0.3, 20, 0, "opt=sgd");
  AddTimed(data, 3, 0.05, 60, 1, "opt=adam");
  const ParetoView view = AnalyzePareto(data, ParetoCost::kTrainingSeconds);
  ASSERT_EQ(view.substudies.size(), 2u);
  EXPECT_EQ(view.substudies[0].substudy, "opt=sgd");
  EXPECT_THAT(view.substudies[0].front, ElementsAre(0));
  EXPECT_EQ(view.substudies[1].substudy, "opt=adam");
  EXPECT_THAT(view.substudies[1].front, ElementsAre(1, 3));
}

// Against the definition, pair by pair, on many small studies full of ties: a completed trial is on the front when no
// other is at least as good in both and better in one, whichever way each measure runs.
TEST(Pareto, TheFrontIsTheDefinitionsOnStudiesFullOfTies) {
  std::uint64_t state = 12345;
  const auto next = [&](int n) {  // a small linear congruential generator: the same studies every run
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % static_cast<std::uint64_t>(n));
  };
  for (int round = 0; round < 200; ++round) {
    const bool maximize = round % 2 == 1;
    std::string spec = kSpec;
    if (maximize) {
      spec.replace(spec.find("objective: valid/error_rate"), 27,
                   "objective: {metric: valid/accuracy, direction: maximize}");
    }
    StudyData data = MakeData(spec);
    const int trials = 1 + next(12);
    for (int i = 0; i < trials; ++i) {
      const auto n = static_cast<std::uint64_t>(i);
      const double best = 0.1 * (1 + next(4));
      const double speed = 100.0 * (1 + next(4));
      AddTrial(data, n, next(6) == 0 ? TrialState::kInfeasible : TrialState::kCompleted, {{"lr", Value(0.01)}}, best)
          .time_split = {{"train", speed / 10}};
      data.train[n].push_back({.step = 1, .examples_per_second = speed});
    }
    for (const ParetoCost cost : {ParetoCost::kTrainingSeconds, ParetoCost::kExamplesPerSecond}) {
      const bool more_is_cheaper = cost == ParetoCost::kExamplesPerSecond;
      const ParetoSubStudy sub = AnalyzePareto(data, cost).substudies.at(0);
      const auto better_or_equal = [](double a, double b, bool higher) { return higher ? a >= b : a <= b; };
      for (const ParetoPoint& p : sub.points) {
        bool dominated = false;
        for (const ParetoPoint& q : sub.points) {
          if (q.infeasible || p.infeasible || q.trial == p.trial) continue;
          const bool cost_ok = better_or_equal(q.cost, p.cost, more_is_cheaper);
          const bool objective_ok = better_or_equal(*q.objective, *p.objective, maximize);
          dominated = dominated || (cost_ok && objective_ok && (q.cost != p.cost || *q.objective != *p.objective));
        }
        EXPECT_EQ(p.on_front, !p.infeasible && !dominated) << "round " << round << ", trial " << p.trial;
      }
      // Listed cheapest first, equal costs by trial number.
      for (std::size_t i = 1; i < sub.front.size(); ++i) {
        const auto cost_of = [&](std::uint64_t trial) {
          return std::find_if(sub.points.begin(), sub.points.end(), [&](const auto& p) { return p.trial == trial; })
              ->cost;
        };
        const double a = cost_of(sub.front[i - 1]), b = cost_of(sub.front[i]);
        EXPECT_TRUE(more_is_cheaper ? a > b || (a == b && sub.front[i - 1] < sub.front[i])
                                    : a < b || (a == b && sub.front[i - 1] < sub.front[i]))
            << "round " << round;
      }
    }
  }
}

TEST(Pareto, CostsByName) {
  for (const ParetoCostInfo& info : ParetoCosts()) EXPECT_EQ(ParseParetoCost(info.name), info.cost);
  EXPECT_FALSE(ParseParetoCost("memory"));
  EXPECT_EQ(ParetoCosts().front().cost, ParetoCost::kTrainingSeconds);
}

}  // namespace
}  // namespace dltune
