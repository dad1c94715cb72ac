#include "dltune/analyze/throughput.h"

#include <gtest/gtest.h>

#include "analyze_test_util.h"

namespace dltune {
namespace {

using testing::AddTrial;
using testing::MakeData;

// Batch sizes 32..512 whose step times give efficiencies 1, 0.95, 0.7, 0.5 per doubling, the first step slow.
StudyData Sweep(double wait_share = 0.0) {
  StudyData data = MakeData(
      "name: t\nworkload: synthetic\nmax_train_steps: 10\nsampler: grid\n"
      "space:\n  batch_size: {values: [32, 64, 128, 256, 512, 1024]}\n");
  // Efficiency e of a doubling is t_smaller / t_larger.
  const double times[] = {0.01, 0.01, 0.01 / 0.95, 0.01 / 0.95 / 0.7, 0.01 / 0.95 / 0.7 / 0.5};
  for (std::uint64_t i = 0; i < 6; ++i) {
    const std::int64_t batch = std::int64_t{32} << i;
    AddTrial(data, i, i < 5 ? TrialState::kCompleted : TrialState::kInfeasible, {{"batch_size", Value(batch)}}, 0.5);
    if (i == 5) {
      data.trials.back().reason = "out of memory at batch size 1024: cannot allocate";
      continue;
    }
    for (std::int64_t step = 1; step <= 10; ++step) {
      const double t = times[i] * (step == 1 ? 10.0 : 1.0);
      data.train[i].push_back({.step = step, .step_time = t, .data_wait = wait_share * t});
    }
  }
  return data;
}

TEST(Throughput, ScalingEfficiencyPerDoublingAndTheKnee) {
  const Throughput throughput = AnalyzeThroughput(Sweep());
  ASSERT_EQ(throughput.rows.size(), 6u);
  EXPECT_EQ(throughput.rows[0].measured_steps, 8);  // 10 steps, the first 2 (a fifth) warm-up
  EXPECT_NEAR(*throughput.rows[0].step_time, 0.01, 1e-15);
  EXPECT_NEAR(*throughput.rows[0].examples_per_second, 3200, 1e-9);
  EXPECT_FALSE(throughput.rows[0].efficiency);
  EXPECT_NEAR(*throughput.rows[1].efficiency, 1.0, 1e-12);
  EXPECT_NEAR(*throughput.rows[2].efficiency, 0.95, 1e-12);
  EXPECT_NEAR(*throughput.rows[3].efficiency, 0.7, 1e-12);
  EXPECT_NEAR(*throughput.rows[4].efficiency, 0.5, 1e-12);
  EXPECT_EQ(throughput.perfect_until, std::optional<std::int64_t>(128));
  EXPECT_EQ(throughput.worth_using, std::optional<std::int64_t>(256));
  EXPECT_EQ(throughput.first_out_of_memory, std::optional<std::int64_t>(1024));
  EXPECT_TRUE(throughput.rows[5].out_of_memory);
  EXPECT_FALSE(throughput.input_bound);
  EXPECT_TRUE(AnalyzeThroughput(Sweep(0.2)).input_bound);
}

// A busy machine makes step times bimodal (0.4 ms, then 60 ms): no batch size is recommended from such measurements,
// nor from an efficiency no doubling can reach.
TEST(Throughput, NoisyOrImpossibleMeasurementsGiveNoVerdict) {
  StudyData noisy = Sweep();
  for (TrainMeasurement& m : noisy.train[2]) {
    if (m.step > 1) m.step_time = m.step % 2 == 0 ? 0.0004 : 0.06;
  }
  const Throughput busy = AnalyzeThroughput(noisy);
  EXPECT_NE(busy.untrustworthy.find("at batch size 128"), std::string::npos) << busy.untrustworthy;
  EXPECT_FALSE(busy.worth_using);
  EXPECT_FALSE(busy.perfect_until);
  StudyData impossible = Sweep();
  for (TrainMeasurement& m : impossible.train[3]) m.step_time = *m.step_time / 10;  // 256: ten times too fast
  const Throughput off = AnalyzeThroughput(impossible);
  EXPECT_NE(off.untrustworthy.find("doubling to batch size 256"), std::string::npos) << off.untrustworthy;
  EXPECT_FALSE(off.worth_using);
  // The measurements as they should be: a verdict.
  EXPECT_EQ(AnalyzeThroughput(Sweep()).untrustworthy, "");
}

}  // namespace
}  // namespace dltune
