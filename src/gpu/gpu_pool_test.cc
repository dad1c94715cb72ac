#include "gpu/gpu_pool.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "gpu/gpu_inventory.h"
#include "gpu/gpu_test_util.h"
#include "gpu/nvml.h"

namespace dltune {
namespace {

using ::testing::ElementsAre;
using Names = std::vector<std::string>;
using test::kGiB;

constexpr const char* kOneGpu = "gpu GPU-0 total=85899345920 name=NVIDIA H100 80GB HBM3\n";
constexpr const char* kTwoGpus =
    "gpu GPU-0 total=85899345920 name=NVIDIA H100 80GB HBM3\n"
    "gpu GPU-1 total=85899345920 name=NVIDIA H100 80GB HBM3\n";

// A fake machine, its NVML, and a pool of its GPUs.
struct PoolRig {
  PoolRig(const std::string& machine, GpuPoolOptions options)
      : fake(machine), pool(FindGpus(nvml), nvml, std::move(options)) {}
  test::FakeGpus fake;
  Nvml nvml;
  GpuPool pool;
};

// A trial on the pool: a child process that uses `bytes` of the GPU it was given.
struct Trial {
  int lease = 0;
  std::unique_ptr<test::ChildProcess> process;
};

Trial StartTrial(PoolRig& rig, double now, std::uint64_t bytes) {
  const auto lease = rig.pool.Acquire(1, now);
  if (!lease) return {};
  Trial trial{.lease = lease->id, .process = std::make_unique<test::ChildProcess>()};
  rig.fake.UseMemory(lease->uuids.at(0), trial.process->pid(), bytes);
  rig.pool.AddTrialProcess(trial.lease, trial.process->pid());
  return trial;
}

// Reports each trial's steps every second for four seconds from `start` (`rate` steps each time), the pool reading
// NVML each second: a measurement's worth. Returns the time after.
double Steady(GpuPool& pool, const std::vector<std::pair<int, double>>& rates, double start) {
  for (int second = 0; second < 4; ++second) {
    for (const auto& [lease, rate] : rates) pool.ReportSteps(lease, static_cast<std::int64_t>(rate), start + second);
    pool.Update(start + second);
  }
  return start + 4;
}

TEST(GpuPoolTest, AFixedCapacityTakesThatManyTrialsPerGpuSpreadingThemFirst) {
  PoolRig rig(kTwoGpus, {.trials_per_gpu = 2});
  Names order;
  for (int i = 0; i < 4; ++i) {
    const auto lease = rig.pool.Acquire(1, 0);
    ASSERT_TRUE(lease);
    order.push_back(lease->uuids.at(0));
  }
  EXPECT_EQ(order, (Names{"GPU-0", "GPU-1", "GPU-0", "GPU-1"}));
  EXPECT_FALSE(rig.pool.Acquire(1, 0));
  rig.pool.Release(1, {}, 1);
  const auto again = rig.pool.Acquire(1, 1);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->uuids, (Names{"GPU-0"}));
  EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 2 trials at once — trials per GPU: 2",
                                              "GPU 1 (NVIDIA H100 80GB HBM3): 2 trials at once — trials per GPU: 2"));
}

TEST(GpuPoolTest, ADataParallelTrialTakesOneGpuPerRank) {
  PoolRig rig(kTwoGpus, {.trials_per_gpu = 1});
  const auto lease = rig.pool.Acquire(2, 0);
  ASSERT_TRUE(lease);
  EXPECT_EQ(lease->uuids, (Names{"GPU-0", "GPU-1"}));
  EXPECT_FALSE(rig.pool.Acquire(1, 0));
  rig.pool.Release(lease->id, {}, 1);
  EXPECT_FALSE(rig.pool.Acquire(3, 1));
  EXPECT_EQ(rig.pool.usable_gpus(), 2);
  EXPECT_TRUE(rig.pool.Acquire(2, 1));
}

TEST(GpuPoolTest, ATrialAloneKeepsItsGpuToItself) {
  PoolRig rig(kTwoGpus, {.trials_per_gpu = 3});
  EXPECT_EQ(rig.pool.Acquire(1, 0)->uuids, (Names{"GPU-0"}));
  EXPECT_EQ(rig.pool.Acquire(1, 0, /*alone=*/true)->uuids, (Names{"GPU-1"}));
  EXPECT_FALSE(rig.pool.Acquire(1, 0, /*alone=*/true));
  EXPECT_EQ(rig.pool.Acquire(1, 0)->uuids, (Names{"GPU-0"}));
  EXPECT_EQ(rig.pool.Acquire(1, 0)->uuids, (Names{"GPU-0"}));
  EXPECT_FALSE(rig.pool.Acquire(1, 0));
}

TEST(GpuPoolTest, AutoDoublesTheTrialsAtOnceWhileStepsPerSecondRiseAndSettlesWhenTheyStop) {
  PoolRig rig(kOneGpu, {});
  EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 1 trial at once so far — measuring"));
  std::vector<Trial> trials;
  const auto at_rate = [&](double rate) {
    std::vector<std::pair<int, double>> rates;
    rates.reserve(trials.size());
    for (const Trial& trial : trials) rates.emplace_back(trial.lease, rate);
    return rates;
  };
  double now = 0;
  trials.push_back(StartTrial(rig, now, 4 * kGiB));
  now = Steady(rig.pool, at_rate(100), now);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 2);

  trials.push_back(StartTrial(rig, now, 4 * kGiB));
  now = Steady(rig.pool, at_rate(90), now);
  EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 4 trials at once so far — measuring: 2 "
                                              "gave 80% more steps per second than 1"));

  while (trials.size() < 4) trials.push_back(StartTrial(rig, now, 4 * kGiB));
  now = Steady(rig.pool, at_rate(50), now);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 8);

  while (trials.size() < 8) trials.push_back(StartTrial(rig, now, 4 * kGiB));
  ASSERT_NE(trials[7].lease, 0);
  now = Steady(rig.pool, at_rate(26), now);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 4);
  EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 4 trials at once — 8 gave 4% more "
                                              "steps per second than 4; memory 20% at 4"));
  EXPECT_FALSE(rig.pool.Acquire(1, now));  // eight still run
}

// Trials shorter than a measurement (2 s each, the first half second of it start-up) are measured as they come and
// go: each trial's steps per second between its reports while the GPU holds n, times n. Here the GPU gives each of
// the t trials past their start-up 100 * min(t, 4) / t steps per second: 4 training at once is as fast as it gets,
// which 8 at once, a quarter of them starting up at any time, keep up; 16 add nothing.
TEST(GpuPoolTest, TrialsShorterThanAMeasurementArePackedAsTheyComeAndGo) {
  PoolRig rig(kOneGpu, {});
  struct Running {
    Trial trial;
    double started = 0;
  };
  std::vector<Running> running;
  int started = 0;
  constexpr double kTick = 0.5;
  for (double now = 0; now < 60 && rig.pool.Explain()[0].find("so far") != std::string::npos; now += kTick) {
    const auto training = static_cast<double>(
        std::count_if(running.begin(), running.end(), [&](const Running& r) { return now - r.started > 0.5; }));
    for (auto it = running.begin(); it != running.end();) {
      const double age = now - it->started;
      if (age >= 0.5) {
        const double rate = 100 * std::min(training, 4.0) / std::max(training, 1.0);
        rig.pool.ReportSteps(it->trial.lease, age == 0.5 ? 0 : static_cast<std::int64_t>(rate * kTick), now);
      }
      if (age >= 2) {
        const pid_t pid = it->trial.process->pid();
        it->trial.process->Finish();
        rig.pool.Release(it->trial.lease, {pid}, now);
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    rig.pool.Update(now);
    while (rig.pool.CanAcquire(1)) {
      running.push_back({StartTrial(rig, now, kGiB), now});
      ++started;
    }
  }
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 8);
  EXPECT_THAT(rig.pool.Explain()[0],
              ::testing::StartsWith("GPU 0 (NVIDIA H100 80GB HBM3): 8 trials at once — 16 gave"));
  EXPECT_THAT(rig.pool.Explain()[0], ::testing::HasSubstr("steps per second than 8"));
  EXPECT_LT(started, 60) << "measured within a few seconds at each count";
}

TEST(GpuPoolTest, AutoSettlesAtTheSmallerCountWhenMoreAreNotWorthItAndWaitsForAMeasurement) {
  PoolRig rig(kOneGpu, {});
  Trial first = StartTrial(rig, 0, 4 * kGiB);
  rig.pool.ReportSteps(first.lease, 0, 0);  // its start-up is over: the measurement opens
  rig.pool.ReportSteps(first.lease, 100, 1);
  rig.pool.Update(1);
  rig.pool.Update(2);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 1);  // one report over two seconds is not a measurement
  double now = Steady(rig.pool, {{first.lease, 100}}, 2);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 2);
  Trial second = StartTrial(rig, now, 4 * kGiB);
  now = Steady(rig.pool, {{first.lease, 51}, {second.lease, 51}}, now);
  EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 1 trial at once — 2 gave 2% more steps "
                                              "per second than 1; memory 5% at 1"));

  PoolRig worse(kOneGpu, {});
  first = StartTrial(worse, 0, kGiB);
  now = Steady(worse.pool, {{first.lease, 100}}, 0);
  second = StartTrial(worse, now, kGiB);
  Steady(worse.pool, {{first.lease, 45}, {second.lease, 45}}, now);
  EXPECT_EQ(worse.pool.capacity("GPU-0"), 1);
  EXPECT_THAT(worse.pool.Explain()[0], ::testing::HasSubstr("2 gave 10% fewer steps per second than 1"));
}

TEST(GpuPoolTest, AutoStopsPackingWhenOneMoreTrialWouldNotFitInMemory) {
  PoolRig rig("gpu GPU-0 total=10737418240 baseline=536870912 name=NVIDIA L4\n", {});
  Trial first = StartTrial(rig, 0, 4 * kGiB);
  double now = Steady(rig.pool, {{first.lease, 100}}, 0);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 2);  // 2 × 4 GiB + 0.5 GiB: 85% of 10 GiB
  Trial second = StartTrial(rig, now, 4 * kGiB);
  Steady(rig.pool, {{first.lease, 90}, {second.lease, 90}}, now);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 2);
  EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA L4): 2 trials at once — 3 would need about 125% of its "
                                              "memory; memory 85% at 2"));
}

TEST(GpuPoolTest, ASlotFreesOnlyOnceTheEndedTrialsProcessesHaveLetGoOfTheirMemory) {
  PoolRig rig("gpu GPU-0 total=17179869184 util=40 name=NVIDIA L4\n", {.trials_per_gpu = 1});
  const auto lease = rig.pool.Acquire(1, 0);
  ASSERT_TRUE(lease);
  const test::FakeGpus& fake = rig.fake;
  test::ChildProcess trial([&] { fake.UseMemory("GPU-0", ::getpid(), 2 * kGiB); });
  rig.pool.AddTrialProcess(lease->id, trial.pid());
  rig.pool.Update(1);

  // The trial's end is seen before its process has let go of the GPU.
  rig.pool.Release(lease->id, {trial.pid()}, 2);
  EXPECT_FALSE(rig.pool.Acquire(1, 2));
  rig.pool.Update(3);
  EXPECT_FALSE(rig.pool.Acquire(1, 3));
  trial.Finish();
  // Read again soon (drain_interval), not at the next sampling (sample_interval): the next trial waits no longer
  // than it must.
  rig.pool.Update(3.1);
  EXPECT_TRUE(rig.pool.Acquire(1, 3.1));

  const GpuTrialRecord record = rig.pool.Record(lease->id);
  EXPECT_EQ(record.ToJson(), nlohmann::json::parse(R"({"model": "NVIDIA L4", "uuids": ["GPU-0"],
      "driver": "550.54.15", "peak_memory_bytes": 2147483648, "mean_utilization_percent": 40.0,
      "trials_at_once": 1})"));
}

TEST(GpuPoolTest, AGpuWhoseMemoryIsNeverFreedIsReportedAndLeftOut) {
  std::vector<std::string> notices;
  PoolRig rig("gpu GPU-0 total=17179869184 name=NVIDIA L4\n",
              {.trials_per_gpu = 1, .notice = [&](const std::string& text) { notices.push_back(text); }});
  const auto lease = rig.pool.Acquire(1, 0);
  ASSERT_TRUE(lease);
  const test::FakeGpus& fake = rig.fake;
  test::ChildProcess trial([&] { fake.UseMemory("GPU-0", ::getpid(), 2 * kGiB, /*lingering=*/true); });
  rig.pool.AddTrialProcess(lease->id, trial.pid());
  rig.pool.Update(1);
  const pid_t pid = trial.pid();
  trial.Finish();

  rig.pool.Release(lease->id, {pid}, 2);
  rig.pool.Update(30);
  EXPECT_FALSE(rig.pool.Acquire(1, 30));
  EXPECT_TRUE(notices.empty());
  rig.pool.Update(62);
  EXPECT_THAT(notices, ElementsAre("GPU 0 (NVIDIA L4): the memory of an ended trial was not freed within 60 s; no "
                                   "more trials run on it"));
  EXPECT_EQ(rig.pool.usable_gpus(), 0);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 0);
  EXPECT_THAT(rig.pool.Explain(),
              ElementsAre("GPU 0 (NVIDIA L4): left out — the memory of an ended trial was not freed within 60 s"));
  EXPECT_FALSE(rig.pool.Acquire(1, 63));
}

TEST(GpuPoolTest, OutOfMemoryWhileSharingLowersTheCapacityAndRunsTheTrialAgainAlone) {
  PoolRig rig(kOneGpu, {.trials_per_gpu = 3});
  const auto first = rig.pool.Acquire(1, 0);
  const auto second = rig.pool.Acquire(1, 0);
  ASSERT_TRUE(first && second);
  EXPECT_EQ(rig.pool.TrialRanOutOfMemory(second->id), OutOfMemoryVerdict::kRescheduleAlone);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 1);
  EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 1 trial at once — a trial ran out of "
                                              "GPU memory with 2 at once"));
  rig.pool.Release(second->id, {}, 1);
  EXPECT_FALSE(rig.pool.Acquire(1, 1));  // the first still runs, and the GPU takes one at a time now
  rig.pool.Release(first->id, {}, 2);
  const auto alone = rig.pool.Acquire(1, 2, /*alone=*/true);
  ASSERT_TRUE(alone);
  EXPECT_EQ(rig.pool.TrialRanOutOfMemory(alone->id), OutOfMemoryVerdict::kInfeasible);
}

TEST(GpuPoolTest, AfterAnOutOfMemoryAutoNeverPacksAboveTheLoweredCapacity) {
  PoolRig rig(kOneGpu, {});
  Trial first = StartTrial(rig, 0, kGiB);
  double now = Steady(rig.pool, {{first.lease, 100}}, 0);
  Trial second = StartTrial(rig, now, kGiB);
  EXPECT_EQ(rig.pool.TrialRanOutOfMemory(second.lease), OutOfMemoryVerdict::kRescheduleAlone);
  rig.pool.Release(second.lease, {}, now);
  now = Steady(rig.pool, {{first.lease, 100}}, now);
  EXPECT_EQ(rig.pool.capacity("GPU-0"), 1);
  EXPECT_FALSE(rig.pool.Acquire(1, now));
}

// A packing measured before (GpuPlacement::UsePackingsMeasuredBefore) starts a fresh GPU of that model at it, settled;
// and a packing settled by measurement (here by an out-of-memory) is told to whoever keeps them.
TEST(GpuPoolTest, APackingMeasuredBeforeStartsAtItsCountAndASettledOneIsTold) {
  PoolRig known(kTwoGpus, {});
  known.pool.Know("NVIDIA H100 80GB HBM3", 3, "measured before on this machine (cached in x.json)");
  known.pool.Know("NVIDIA H100 80GB HBM3", 99, "not applied: settled already");
  EXPECT_EQ(known.pool.capacity("GPU-0"), 3);
  EXPECT_THAT(known.pool.Explain()[0],
              ::testing::StartsWith("GPU 0 (NVIDIA H100 80GB HBM3): 3 trials at once — measured before"));
  int leased = 0;
  while (known.pool.Acquire(1, 0)) ++leased;
  EXPECT_EQ(leased, 6) << "three on each GPU from the first trial";

  PoolRig measured(kOneGpu, {});
  std::vector<std::pair<std::string, int>> told;
  measured.pool.OnSettled([&](const std::string& model, int trials) { told.emplace_back(model, trials); });
  Trial first = StartTrial(measured, 0, kGiB);
  double now = Steady(measured.pool, {{first.lease, 100}}, 0);
  Trial second = StartTrial(measured, now, kGiB);
  ASSERT_NE(second.lease, 0);
  EXPECT_EQ(measured.pool.TrialRanOutOfMemory(second.lease), OutOfMemoryVerdict::kRescheduleAlone);
  EXPECT_THAT(told, ElementsAre(std::pair<std::string, int>("NVIDIA H100 80GB HBM3", 1)));
  measured.pool.Know("NVIDIA H100 80GB HBM3", 8, "not applied: it has trials");
  EXPECT_EQ(measured.pool.capacity("GPU-0"), 1);
}

TEST(GpuPoolTest, OutOfGpuMemoryIsRecognizedInStderrOrTheEndReason) {
  EXPECT_TRUE(IsOutOfGpuMemory("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_TRUE(IsOutOfGpuMemory("torch.cuda.OutOfMemoryError: ..."));
  EXPECT_TRUE(IsOutOfGpuMemory("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling cublasCreate"));
  EXPECT_TRUE(IsOutOfGpuMemory("", "out of GPU memory"));
  EXPECT_FALSE(IsOutOfGpuMemory("MemoryError", "killed by signal 9 (SIGKILL)"));
  EXPECT_FALSE(IsOutOfGpuMemory("terminate called after throwing an instance of 'std::bad_alloc'"));
}

// A study of `trials` trials on one GPU, in simulated time: each starts up for `startup` seconds, then trains 2000
// steps, reported every 200, at 2000 / `alone` steps per second while at most `saturates_at` trials train at once
// (beyond, they share that rate). Returns the seconds it took and the trials at once the pool ended with.
std::pair<double, int> SimulateStudy(double startup, double alone, double saturates_at, int trials) {
  PoolRig rig(kOneGpu, {});
  struct Running {
    Trial trial;
    double started = 0;
    double steps = 0;
    std::int64_t reported = -1;
  };
  std::vector<Running> running;
  int started = 0, done = 0;
  constexpr double kTick = 0.02, kSteps = 2000;
  double now = 0;
  for (; done < trials && now < 600; now += kTick) {
    const auto training =
        std::count_if(running.begin(), running.end(), [&](const Running& r) { return now - r.started >= startup; });
    for (auto it = running.begin(); it != running.end();) {
      if (now - it->started >= startup) {
        it->steps += kSteps / alone * std::min(1.0, saturates_at / static_cast<double>(training)) * kTick;
        const auto step = static_cast<std::int64_t>(std::min(it->steps, kSteps)) / 200 * 200;
        if (step > 0 && step != it->reported) {
          rig.pool.ReportSteps(it->trial.lease, it->reported < 0 ? 0 : step - it->reported, now);
          it->reported = step;
        }
      }
      if (it->steps >= kSteps) {
        const pid_t pid = it->trial.process->pid();
        it->trial.process->Finish();
        rig.pool.Release(it->trial.lease, {pid}, now);
        it = running.erase(it);
        ++done;
      } else {
        ++it;
      }
    }
    rig.pool.Update(now);
    while (started < trials && rig.pool.CanAcquire(1)) {
      running.push_back({StartTrial(rig, now, kGiB), now});
      ++started;
    }
  }
  return {now, rig.pool.capacity("GPU-0")};
}

// A short study packs its GPU within a few of its trials' lifetimes, and a trial's start-up, however long, does not
// pass for a busy GPU: a trial's rate is measured between its reports, so start-ups are in no interval.
TEST(GpuPoolTest, AShortStudyPacksItsGpuWithinAFewTrialLifetimes) {
  // A graphed built-in trial: 0.5 s start-up, 0.35 s of training alone; one at a time the study takes 27 s, 16 at
  // once 2.9 s.
  const auto [graphed_seconds, graphed_at_once] = SimulateStudy(0.5, 0.35, 6, 32);
  EXPECT_LT(graphed_seconds, 6);
  EXPECT_GE(graphed_at_once, 8);
  // A Python program: 2 s of start-up (the interpreter, torch, CUDA), 2 s of training alone.
  const auto [python_seconds, python_at_once] = SimulateStudy(2, 2, 8, 32);
  EXPECT_LT(python_seconds, 19) << "the next count's trials start up while a count is measured";
  EXPECT_GE(python_at_once, 8);
  // Two trials of a second's start-up and half a second's training (a fused study of two groups): the second starts
  // up while the first is measured, not a start-up after.
  const auto [two_seconds, two_at_once] = SimulateStudy(1, 0.5, 2, 2);
  EXPECT_LT(two_seconds, 2.7);
}

// While a count is measured, the next count's trials start up, a start-up before the measurement is due to end; one
// that starts training before it ends ends it with what it has.
TEST(GpuPoolTest, TheNextCountsTrialsStartUpWhileACountIsMeasured) {
  for (const bool cut_short : {false, true}) {
    SCOPED_TRACE(cut_short ? "the second trial trains before the measurement ends" : "it trains after");
    PoolRig rig(kOneGpu, {});
    const Trial first = StartTrial(rig, 0, kGiB);
    rig.pool.Update(0.5);
    rig.pool.ReportSteps(first.lease, 0, 1);  // a start-up of 1 s
    rig.pool.Update(1);
    EXPECT_FALSE(rig.pool.CanAcquire(1)) << "the measurement's end cannot be foreseen before a report";
    double now = 1;
    for (; now < 1.25; now += 0.1) {
      rig.pool.ReportSteps(first.lease, 100, now + 0.1);
      rig.pool.Update(now + 0.1);
    }
    // Three reports in: 0.2 s of the measurement's 0.5 s left, within half a start-up.
    EXPECT_TRUE(rig.pool.CanAcquire(1));
    EXPECT_EQ(rig.pool.capacity("GPU-0"), 1);
    const Trial second = StartTrial(rig, now, kGiB);
    ASSERT_NE(second.lease, 0);
    EXPECT_FALSE(rig.pool.CanAcquire(1)) << "two at once, the next count";
    if (cut_short) {
      rig.pool.ReportSteps(second.lease, 0, 1.35);
      EXPECT_EQ(rig.pool.capacity("GPU-0"), 2);
      EXPECT_THAT(rig.pool.Explain(),
                  ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 2 trials at once so far — measuring"));
      continue;
    }
    rig.pool.ReportSteps(first.lease, 200, 1.5);
    rig.pool.Update(1.5);
    EXPECT_EQ(rig.pool.capacity("GPU-0"), 2);
    // Its first report opens the measurement at two, and the pair's reports complete it.
    rig.pool.ReportSteps(second.lease, 0, 2.3);
    for (now = 2.3; now < 3.3; now += 0.1) {
      rig.pool.ReportSteps(first.lease, 85, now + 0.1);
      rig.pool.ReportSteps(second.lease, 85, now + 0.1);
      rig.pool.Update(now + 0.1);
    }
    EXPECT_THAT(rig.pool.Explain(), ElementsAre("GPU 0 (NVIDIA H100 80GB HBM3): 4 trials at once so far — measuring: "
                                                "2 gave 70% more steps per second than 1"));
  }
}

}  // namespace
}  // namespace dltune
