// GPUs as a resource of the worker, end to end on a machine without one: the fake NVML (tests/fake_nvml) scripts the
// GPUs, and shell-script trials "use GPU memory" by writing their process files there.
#include "run/gpu_placement.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>

#include "analyze/time_split.h"
#include "dltune/run/study_session.h"
#include "gpu/gpu_inventory.h"
#include "gpu/gpu_packing_cache.h"
#include "gpu/gpu_test_util.h"
#include "gpu/nvml.h"
#include "report/study_text.h"
#include "run/parallel_layout.h"
#include "run/run_test_util.h"
#include "run/worker.h"
#include "store/export.h"
#include "train/torch_build.h"

namespace dltune {
namespace {

using test::FakeGpus;
using test::kGiB;
using test::TempStore;

class Notices : public RunObserver {
 public:
  void Notice(const std::string& message) override { said.push_back(message); }
  bool Saw(const std::string& part) const {
    return std::any_of(said.begin(), said.end(), [&](const auto& s) { return s.find(part) != std::string::npos; });
  }
  std::vector<std::string> said;
};

// A trial that takes 2 GiB of its GPU for about a second, logs when it starts and ends, and reports one evaluation.
// TRIAL_OOM_ONCE=1 makes trial 1's first attempt fail as PyTorch does when the GPU's memory runs out.
const std::string kTrial = R"(R() { printf '%s\n' "$1" >> "$DLTUNE_REPORT"; }
log="$DLTUNE_FAKE_NVML_DIR/events.log"
echo "start $DLTUNE_TRIAL_NUMBER" >> "$log"
printf '%s' "${CUDA_VISIBLE_DEVICES-unset}" > "$DLTUNE_TRIAL_DIR/visible"
printf '%s' "${CUDA_MPS_PIPE_DIRECTORY-unset}" > "$DLTUNE_TRIAL_DIR/mps"
if [ -n "$CUDA_VISIBLE_DEVICES" ]; then
  mkdir -p "$DLTUNE_FAKE_NVML_DIR/processes/$CUDA_VISIBLE_DEVICES"
  echo 2147483648 > "$DLTUNE_FAKE_NVML_DIR/processes/$CUDA_VISIBLE_DEVICES/$$"
fi
if [ "$OOM" = always ] || { [ "$OOM" = once ] && [ "$DLTUNE_TRIAL_NUMBER" = 1 ] && [ ! -e "$DLTUNE_TRIAL_DIR/oom" ]; }; then
  touch "$DLTUNE_TRIAL_DIR/oom"; sleep 0.5
  echo "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" >&2
  echo "end $DLTUNE_TRIAL_NUMBER" >> "$log"; exit 1
fi
for s in $(seq 1 "${STEPS:-4}"); do R '{"type":"train","step":'$s',"loss":0.5}'; sleep 0.3; done
R '{"type":"eval","step":'"${STEPS:-4}"',"split":"valid","metrics":{"error_rate":0.2}}'
echo "end $DLTUNE_TRIAL_NUMBER" >> "$log"
)";

class GpuPlacementTest : public ::testing::Test {
 protected:
  // Runs a study of `trials` trials of kTrial on `machine` (the fake NVML's gpus file), `parallel` at once.
  RunSummary RunStudy(const std::string& machine, int trials, const std::string& resources,
                      const std::string& oom = "never", int parallel = 4, const std::string& gpus = "all") {
    gpus_.emplace(machine);
    ::setenv("OOM", oom.c_str(), 1);
    const auto script = temp_.dir() / "trial.sh";
    std::ofstream(script) << kTrial;
    spec_ = test::CommandSpec("g", "sh " + script.string(), temp_.dir(), trials, resources);
    session_.emplace(StudySession::OpenOrCreate(temp_.store(), spec_, ""));
    static const std::atomic<int> no_stop{0};
    WorkerOptions options{.study = "g", .parallel = parallel, .stale_after = 30};
    options.gpus = gpus;
    options.trials_per_gpu = spec_.resources.trials_per_gpu;
    options.mps = mps_;
    return RunWorker(temp_.store(), options, notices_, no_stop);
  }
  // Packings measured in a test are kept in its own directory, not the user's cache.
  void SetUp() override { ::setenv("DLTUNE_CACHE_DIR", (temp_.dir() / "cache").c_str(), 1); }
  void TearDown() override {
    ::unsetenv("DLTUNE_CACHE_DIR");
    ::unsetenv("OOM");
    ::unsetenv("STEPS");
    ::unsetenv("DLTUNE_MPS_CONTROL");
    ::unsetenv("FAKE_MPS_LOG");
    ::unsetenv("FAKE_MPS_FAIL");
  }
  // The next RunStudy runs with --mps, the fake control program (tests/fixtures/fake_mps_control) as the daemon's.
  void UseFakeMps() {
    mps_ = true;
    ::setenv("DLTUNE_MPS_CONTROL", DLTUNE_SOURCE_DIR "/tests/fixtures/fake_mps_control", 1);
    ::setenv("FAKE_MPS_LOG", (temp_.dir() / "mps.log").c_str(), 1);
  }
  std::vector<std::string> MpsTold() {
    std::ifstream in(temp_.dir() / "mps.log");
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  TrialRecord Trial(std::uint64_t number) { return *temp_.store().FindTrial(session_->study().id, number); }
  std::filesystem::path TrialDir(std::uint64_t number) { return TrialDirectory(spec_, session_->study(), number); }
  // What kTrial wrote to `name` in its directory ("visible", "mps").
  std::string TrialFile(std::uint64_t number, const std::string& name) {
    std::ifstream in(TrialDir(number) / name);
    return {std::istreambuf_iterator<char>(in), {}};
  }
  std::string Visible(std::uint64_t number) { return TrialFile(number, "visible"); }
  // The events log as (start|end, trial) in order.
  std::vector<std::pair<std::string, int>> Events() {
    std::ifstream in(gpus_->dir() / "events.log");
    std::vector<std::pair<std::string, int>> events;
    std::string what;
    int trial = 0;
    while (in >> what >> trial) events.emplace_back(what, trial);
    return events;
  }
  // The most trials running at once, by the log.
  int MostAtOnce() {
    int running = 0, most = 0;
    for (const auto& [what, trial] : Events()) {
      running += what == "start" ? 1 : -1;
      most = std::max(most, running);
    }
    return most;
  }

  TempStore temp_;
  std::optional<FakeGpus> gpus_;
  StudySpec spec_;
  std::optional<StudySession> session_;
  Notices notices_;
  bool mps_ = false;
};

const std::string kOneGpu = "gpu GPU-11111111-aaaa total=85899345920 util=40 name=NVIDIA H100 80GB HBM3\n";
const std::string kTwoGpus = kOneGpu + "gpu GPU-22222222-bbbb total=85899345920 name=NVIDIA H100 80GB HBM3\n";

TEST_F(GpuPlacementTest, WithMpsTheTrialsOnAGpuAreClientsOfADaemonTheRunStartsAndStops) {
  UseFakeMps();
  const RunSummary summary = RunStudy(kOneGpu, 2, "resources: {trials_per_gpu: 2}\n");
  EXPECT_EQ(summary.completed, 2);
  const std::vector<std::string> told = MpsTold();
  ASSERT_EQ(told.size(), 2u) << ::testing::PrintToString(told);
  const std::string pipe = told[0].substr(std::string("start ").size(), told[0].rfind(' ') - 6);
  EXPECT_EQ(told[0], "start " + pipe + " GPU-11111111-aaaa");
  EXPECT_EQ(told[1], "quit " + pipe) << "stopped at the run's end";
  for (std::uint64_t n = 0; n < 2; ++n) EXPECT_EQ(TrialFile(n, "mps"), pipe) << "trial " << n;
  EXPECT_FALSE(std::filesystem::exists(pipe));
  EXPECT_TRUE(notices_.Saw("MPS: a private MPS control daemon")) << ::testing::PrintToString(notices_.said);
  EXPECT_FALSE(notices_.Saw("take turns on it; --mps runs")) << ::testing::PrintToString(notices_.said);
}

TEST_F(GpuPlacementTest, WithMpsThatCannotStartTheTrialsRunWithoutItAndTheRunSaysWhy) {
  UseFakeMps();
  ::setenv("FAKE_MPS_FAIL", "1", 1);
  const RunSummary summary = RunStudy(kOneGpu, 2, "resources: {trials_per_gpu: 2}\n");
  EXPECT_EQ(summary.completed, 2);
  for (std::uint64_t n = 0; n < 2; ++n) EXPECT_EQ(TrialFile(n, "mps"), "unset") << "trial " << n;
  EXPECT_TRUE(notices_.Saw("--mps: ")) << ::testing::PrintToString(notices_.said);
  EXPECT_TRUE(notices_.Saw("trials sharing a GPU take turns on it")) << ::testing::PrintToString(notices_.said);
}

TEST_F(GpuPlacementTest, EachTrialGetsItsOwnGpuAndItIsRecorded) {
  const RunSummary summary = RunStudy(kTwoGpus, 4, "resources: {trials_per_gpu: 1}\n");
  EXPECT_EQ(summary.completed, 4);
  EXPECT_LE(MostAtOnce(), 2);  // two GPUs, one trial each, though 4 could run at once
  for (std::uint64_t n = 0; n < 4; ++n) {
    const std::string visible = Visible(n);
    EXPECT_TRUE(visible == "GPU-11111111-aaaa" || visible == "GPU-22222222-bbbb") << visible;
    std::ifstream in(TrialDir(n) / "trial.json");
    const auto description = nlohmann::json::parse(in);
    EXPECT_EQ(description["gpus"][0]["uuid"], visible);
    EXPECT_EQ(description["gpus"][0]["name"], "NVIDIA H100 80GB HBM3");
    const auto resources = nlohmann::json::parse(Trial(n).resources);
    EXPECT_EQ(resources["model"], "NVIDIA H100 80GB HBM3");
    EXPECT_EQ(resources["uuids"][0], visible);
    EXPECT_EQ(resources["driver"], "550.54.15");
    EXPECT_EQ(resources["peak_memory_bytes"], 2 * kGiB) << resources.dump();
  }
  EXPECT_TRUE(notices_.Saw("GPUs: 2 GPUs")) << ::testing::PrintToString(notices_.said);
  // What was recorded reaches the study's summary, the trial's page and the export.
  const auto trials = temp_.store().ListTrials(session_->study().id);
  EXPECT_EQ(DescribeGpuUsage(trials).rfind("4 trials on GPUs (NVIDIA H100 80GB HBM3): ", 0), 0)
      << DescribeGpuUsage(trials);
  const std::string trial_text = TrialText(temp_.store(), session_->study(), 0);
  EXPECT_NE(trial_text.find("NVIDIA H100 80GB HBM3 (GPU-"), std::string::npos) << trial_text;
  const std::string study_text = StudyText(temp_.store(), session_->study(), 10, false);
  EXPECT_NE(study_text.find("GPUs of all trials"), std::string::npos) << study_text;
  const ExportedTable exported = ExportTrials(temp_.store(), session_->study());
  ASSERT_FALSE(exported.rows.empty());
  EXPECT_EQ(exported.rows[0]["gpu_model"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(exported.rows[0]["gpu_peak_memory_bytes"], 2.0 * kGiB);
  EXPECT_EQ(exported.rows[0]["gpu_uuids"], Visible(exported.rows[0]["trial"].get<std::uint64_t>()));
}

TEST_F(GpuPlacementTest, AFixedNumberOfTrialsShareAGpu) {
  EXPECT_EQ(RunStudy(kOneGpu, 6, "resources: {trials_per_gpu: 3}\n", "never", 6).completed, 6);
  EXPECT_EQ(MostAtOnce(), 3);
  // Without --mps, the run says once what would let them run side by side.
  EXPECT_EQ(
      std::count_if(notices_.said.begin(), notices_.said.end(),
                    [](const std::string& s) { return s.find("take turns on it; --mps runs") != std::string::npos; }),
      1)
      << ::testing::PrintToString(notices_.said);
}

// A packing measured before for this training on this kind of GPU (kept in the cache directory) is where the run
// starts: its trials share the GPU from the first, and the run says why.
TEST_F(GpuPlacementTest, APackingMeasuredBeforeIsWhereTheRunStarts) {
  const std::filesystem::path cache = temp_.dir() / "cache";  // the fixture's DLTUNE_CACHE_DIR
  gpus_.emplace(kOneGpu);
  Nvml nvml;
  const GpuInventory inventory = FindGpus(nvml, "all");
  ASSERT_EQ(inventory.gpus.size(), 1U);
  const StudySpec spec = test::CommandSpec("g", "sh " + (temp_.dir() / "trial.sh").string(), temp_.dir(), 4, "");
  StorePacking(
      cache / "gpu-packings.json",
      PackingKey(FirstTrialDescription(spec), spec.command, inventory.gpus[0].name, inventory.driver_version, false),
      2);
  const RunSummary summary = RunStudy(kOneGpu, 4, "");
  EXPECT_EQ(summary.completed, 4);
  EXPECT_EQ(MostAtOnce(), 2);
  EXPECT_TRUE(notices_.Saw("2 trials at once — measured before on this machine (cached in " + cache.string()))
      << ::testing::PrintToString(notices_.said);
}

TEST_F(GpuPlacementTest, PackingByMeasurementStartsWithOneTrialPerGpu) {
  // Trials of two steps (one interval between reports) never complete a measurement at one trial at once: the GPU
  // stays at one.
  ::setenv("STEPS", "2", 1);
  EXPECT_EQ(RunStudy(kOneGpu, 3, "").completed, 3);
  EXPECT_EQ(MostAtOnce(), 1);
}

TEST_F(GpuPlacementTest, ATrialOutOfMemoryBecauseItWasPackedRunsAgainAlone) {
  const RunSummary summary = RunStudy(kOneGpu, 3, "resources: {trials_per_gpu: 2}\n", "once");
  EXPECT_EQ(Trial(1).state, TrialState::kCompleted) << Trial(1).reason;
  EXPECT_EQ(summary.completed, 3);
  EXPECT_EQ(summary.infeasible + summary.failed, 0);
  EXPECT_TRUE(
      notices_.Saw("out of GPU memory on GPU 0 (NVIDIA H100 80GB HBM3) while sharing it with 1 other trial; "
                   "it runs again alone"))
      << ::testing::PrintToString(notices_.said);
  // Its second attempt had the GPU to itself: no trial started or ran beside it.
  const auto events = Events();
  const auto second_start = std::find_if(std::find(events.begin(), events.end(), std::pair<std::string, int>{"end", 1}),
                                         events.end(), [](const auto& e) {
                                           return e == std::pair<std::string, int>{"start", 1};
                                         });
  ASSERT_NE(second_start, events.end());
  int running = 0;
  for (auto it = events.begin(); it != second_start; ++it) running += it->first == "start" ? 1 : -1;
  EXPECT_EQ(running, 0);
  EXPECT_EQ(*std::next(second_start), (std::pair<std::string, int>{"end", 1}));
}

TEST_F(GpuPlacementTest, ATrialOutOfMemoryAloneIsInfeasible) {
  const RunSummary summary = RunStudy(kOneGpu, 1, "resources: {trials_per_gpu: 1}\n", "always");
  EXPECT_EQ(summary.infeasible, 1);
  EXPECT_EQ(Trial(0).state, TrialState::kInfeasible);
  EXPECT_EQ(Trial(0).reason, "out of GPU memory on GPU 0 (NVIDIA H100 80GB HBM3) (80 GiB), alone on it");
}

TEST_F(GpuPlacementTest, ATrialOfNoGpuSeesNone) {
  EXPECT_EQ(RunStudy(kOneGpu, 2, "resources: {gpus_per_trial: 0}\n").completed, 2);
  EXPECT_EQ(Visible(0), "");   // set, and empty: the machine's GPUs hidden (unset would read "unset")
  EXPECT_EQ(MostAtOnce(), 2);  // GPUs do not limit it
  EXPECT_EQ(Trial(0).resources, "{}");
}

TEST_F(GpuPlacementTest, GpusOptionChoosesAmongTheVisible) {
  EXPECT_EQ(RunStudy(kTwoGpus, 2, "resources: {trials_per_gpu: 1}\n", "never", 4, "1").completed, 2);
  EXPECT_EQ(Visible(0), "GPU-22222222-bbbb");
  EXPECT_EQ(Visible(1), "GPU-22222222-bbbb");
  EXPECT_EQ(MostAtOnce(), 1);
}

TEST_F(GpuPlacementTest, WithoutNvmlNothingChanges) {
  gpus_.emplace(kOneGpu);
  ::setenv("DLTUNE_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
  GpuPlacement placement("all", 0, {});
  EXPECT_FALSE(placement.has_gpus());
  EXPECT_NE(placement.Describe().find("no GPU"), std::string::npos);
  EXPECT_FALSE(placement.VisibleTo(std::nullopt));
  const StudySpec spec = test::CommandSpec("c", "true", temp_.dir());
  EXPECT_EQ(placement.GpusFor(spec), 0);
  EXPECT_TRUE(placement.Fits(spec, 1));
  const StudySpec wants = test::CommandSpec("c", "true", temp_.dir(), 1, "resources: {gpus_per_trial: 1}\n");
  EXPECT_FALSE(placement.Fits(wants, 1));
  EXPECT_THROW(placement.Assign(wants, 1, 0, 0), Error);
  EXPECT_THROW(placement.CheckCanRun(wants), Error);
}

TEST_F(GpuPlacementTest, AStudyAskingForMoreGpusThanTheWorkerHasIsRefusedAtOnce) {
  try {
    RunStudy(kOneGpu, 1, "resources: {gpus_per_trial: 2}\n");
    FAIL() << "a study no trial of which can get its GPUs must not wait for ever";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("study g asks for 2 GPUs per trial"), std::string::npos) << e.what();
  }
}

// A built-in trial gets a GPU unless training.device is cpu (or auto with a LibTorch without CUDA, which trains on the
// CPU); a data-parallel one gets one per rank with device cuda, none with auto (its ranks train on the CPU).
TEST_F(GpuPlacementTest, ABuiltinTrialGetsAGpuUnlessItTrainsOnTheCpu) {
  gpus_.emplace(kOneGpu);
  GpuPlacement placement("all", 0, {});
  ASSERT_TRUE(placement.has_gpus());
  const auto builtin = [&](const std::string& training) {
    return ParseStudySpec(
        "name: b\nworkload: synthetic\nmax_train_steps: 4\nrun_dir: " + (temp_.dir() / "runs").string() +
            "\ntraining: " + training + "\nspace:\n  learning_rate: {min: 0.01, max: 1}\n",
        "b.yaml");
  };
  EXPECT_EQ(placement.GpusFor(builtin("{}")), LibTorchHasCuda() ? 1 : 0);
  EXPECT_EQ(placement.GpusFor(builtin("{device: cuda}")), 1);
  EXPECT_EQ(placement.GpusFor(builtin("{device: cpu}")), 0);
  EXPECT_EQ(placement.GpusFor(builtin("{processes: 2}")), 0);
  EXPECT_EQ(placement.GpusFor(builtin("{processes: 2, device: cuda}")), 2);
  EXPECT_EQ(placement.GpusFor(test::CommandSpec("c", "true", temp_.dir())), 1);
}

}  // namespace
}  // namespace dltune
