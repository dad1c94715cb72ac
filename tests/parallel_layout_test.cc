// The parallel layout (include/dltune/run/parallel_layout.h): which layouts are measured, which one the measurements
// choose, what overrides them, and the real probe with its per-machine cache, through `dltune run` as well.
#include "run/parallel_layout.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "core/machine.h"
#include "dltune/store/store.h"
#include "own_directory.h"
#include "run/trial_setup.h"
#include "trial/trial_environment.h"
#include "trial/trial_process.h"
#include "trial/trial_server.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Measurements as (trials, threads, steps/s).
std::vector<LayoutMeasurement> Measured(std::initializer_list<LayoutMeasurement> list) { return list; }

TEST(LayoutCandidates, OneThreadEachUpToAllCoresForOneTrial) {
  const auto text = [](int cores) {
    std::string out;
    for (const auto& c : LayoutCandidates(cores))
      out += std::to_string(c.trials) + "x" + std::to_string(c.threads) + " ";
    return out;
  };
  EXPECT_EQ(text(1), "1x1 ");
  EXPECT_EQ(text(2), "2x1 1x2 ");
  EXPECT_EQ(text(6), "6x1 3x2 1x4 1x6 ");
  EXPECT_EQ(text(8), "8x1 4x2 2x4 1x8 ");
}

TEST(PickMeasuredLayout, TakesTheLayoutThatFinishesTheTrialsSoonest) {
  // 100 trials: 50 rounds at 400 steps/s beat 100 rounds at 500.
  const ParallelLayout many = PickMeasuredLayout(Measured({{2, 1, 400}, {1, 2, 500}}), 100);
  EXPECT_EQ(many.trials, 2);
  EXPECT_EQ(many.threads, 1);
  // One trial left: it runs alone either way, and faster with both threads.
  const ParallelLayout last = PickMeasuredLayout(Measured({{1, 1, 400}, {1, 2, 500}}), 1);
  EXPECT_EQ(last.threads, 2);
  // A model whose steps scale with threads: 2 threads more than double the speed.
  EXPECT_EQ(PickMeasuredLayout(Measured({{2, 1, 100}, {1, 2, 230}}), 100).threads, 2);
  // Three trials on 4 cores: 4×1 finishes in one round, 2×2 in two.
  EXPECT_EQ(PickMeasuredLayout(Measured({{3, 1, 100}, {2, 2, 150}, {1, 4, 200}}), 3).trials, 3);
}

TEST(PickMeasuredLayout, NearTiesGoToFewerThreadsPerTrial) {
  // 100 rounds at 790 steps/s is within 3% of 50 rounds at 400.
  EXPECT_EQ(PickMeasuredLayout(Measured({{1, 2, 790}, {2, 1, 400}}), 100).threads, 1);
  EXPECT_EQ(PickMeasuredLayout(Measured({{1, 2, 850}, {2, 1, 400}}), 100).threads, 2);
}

TEST(PickMeasuredLayout, RefusesMeasurementsWithoutSpeed) {
  EXPECT_THROW(PickMeasuredLayout({}, 10), Error);
  EXPECT_THROW(PickMeasuredLayout(Measured({{2, 1, 0}}), 10), Error);
}

TEST(PickFusion, TakesTheFastestGroupWhenItBeatsTrialsAloneByTheMargin) {
  // Per trial: alone 100 steps/s; groups of 2, 4, 8 at 150, 260, 240.
  EXPECT_EQ(PickFusion({{1, 100}, {2, 150}, {4, 260}, {8, 240}}), 4U);
  // Within the margin of alone: apart.
  EXPECT_EQ(PickFusion({{1, 100}, {2, 105}, {4, 95}}), 0U);
  EXPECT_EQ(PickFusion({{1, 100}, {2, 80}}), 0U);
  EXPECT_EQ(PickFusion({{1, 100}}), 0U);
  EXPECT_THROW(PickFusion({{2, 100}}), Error);
}

class ChooseLayout : public test::InOwnDirectory {
 protected:
  ChooseLayout() : InOwnDirectory("layout") {}

  // A Fashion-MNIST MLP study of `trials` trials of `steps` steps, with `training` as its training: block.
  static StudySpec Spec(int trials, int steps, const std::string& training = "{}") {
    return ParseStudySpec(
        "name: layout\n"
        "workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [32]}}\n"
        "max_train_steps: " +
            std::to_string(steps) + "\ntraining: " + training + "\ntrials: " + std::to_string(trials) +
            "\nspace:\n  optimizer: nesterov\n  learning_rate: {min: 0.01, max: 0.1, scale: log}\n"
            "  momentum: 0.9\n  batch_size: 64\n",
        "layout.yaml");
  }

  LayoutRequest Request(int cores, std::uint64_t trials_to_run, int parallel = 0) const {
    return {.parallel = parallel,
            .cores = cores,
            .trials_to_run = trials_to_run,
            .dltune_executable = DLTUNE_CLI,
            .cache_file = dir_ / "cache" / "parallel-layouts.json",
            .probe_seconds = 0.2};
  }
};

TEST_F(ChooseLayout, TheSpecsThreadsAndParallelOverrideTheMeasurement) {
  const ParallelLayout by_threads = ChooseParallelLayout(Spec(100, 1000, "{threads: 2}"), Request(8, 100));
  EXPECT_EQ(by_threads.trials, 4);
  EXPECT_EQ(by_threads.threads, 2);
  EXPECT_THAT(by_threads.basis, HasSubstr("training.threads"));
  const ParallelLayout by_parallel = ChooseParallelLayout(Spec(100, 1000), Request(6, 100, 3));
  EXPECT_EQ(by_parallel.trials, 3);
  EXPECT_EQ(by_parallel.threads, 2);
  EXPECT_THAT(by_parallel.basis, HasSubstr("--parallel"));
  const ParallelLayout both = ChooseParallelLayout(Spec(100, 1000, "{threads: 3}"), Request(2, 100, 5));
  EXPECT_EQ(both.trials, 5);
  EXPECT_EQ(both.threads, 3);
  EXPECT_FALSE(fs::exists(dir_ / "cache")) << "nothing was measured";
}

TEST_F(ChooseLayout, AShortStudyIsNotMeasured) {
  const ParallelLayout layout = ChooseParallelLayout(Spec(4, 100), Request(4, 4));
  EXPECT_EQ(layout.trials, 4);
  EXPECT_EQ(layout.threads, 1);
  EXPECT_THAT(layout.basis, HasSubstr("400 training steps left in all, too few to be worth measuring"));
  EXPECT_FALSE(fs::exists(dir_ / "cache"));
}

TEST_F(ChooseLayout, TrialsOnGpusAreNotMeasuredOnTheCpu) {
  LayoutRequest request = Request(16, 32);
  request.trials_on_gpus = true;
  const ParallelLayout layout = ChooseParallelLayout(Spec(32, 2000), request);
  EXPECT_EQ(layout.trials, 16) << "at most one trial per core; the GPU packing decides how many run";
  EXPECT_EQ(layout.threads, 1);
  EXPECT_THAT(layout.basis, HasSubstr("train on GPUs"));
  EXPECT_FALSE(fs::exists(dir_ / "cache")) << "nothing was measured";
}

// training.fuse: auto measures the real probe alone and in groups, and says why it chose; a short study, or one whose
// trials cannot fuse, is not measured.
TEST_F(ChooseLayout, FuseAutoMeasuresGroupsAgainstATrialAlone) {
  std::vector<std::string> progress;
  LayoutRequest request = Request(2, 6);
  request.progress = [&](const std::string& what) { progress.push_back(what); };
  const FusionChoice choice = ChooseFusion(Spec(6, 20000, "{fuse: auto}"), request, {.trials = 2, .threads = 1});
  EXPECT_THAT(progress,
              ::testing::ElementsAre("measuring trials alone", "measuring fused groups of 2",
                                     "measuring fused groups of 4", "measuring trials alone again",
                                     "measuring fused groups of 2 again", "measuring fused groups of 4 again"));
  // Whichever it chose, the figures of every candidate are in its reason.
  EXPECT_THAT(choice.basis, ::testing::ContainsRegex("alone [0-9]+, in groups of 2 [0-9]+, in groups of 4 [0-9]+"));
  if (choice.members > 0) {
    EXPECT_THAT(choice.basis, HasSubstr(fmt::format("groups of up to {}: measured", choice.members)));
  } else {
    EXPECT_THAT(choice.basis, HasSubstr("apart: no fused group measured"));
  }
  const FusionChoice short_study = ChooseFusion(Spec(4, 100, "{fuse: auto}"), Request(2, 4), {});
  EXPECT_EQ(short_study.members, 0U);
  EXPECT_THAT(short_study.basis, HasSubstr("too few to be worth measuring"));
  StudySpec ranks = Spec(6, 20000, "{fuse: auto}");
  ranks.training.processes = 2;
  EXPECT_THAT(ChooseFusion(ranks, Request(2, 6), {}).basis, HasSubstr("cannot train fused"));
}

// training.fuse left out (chosen) is measured as auto only where fusion can win and the probe is cheap: the trials
// train on CUDA, the workload offers fusion and the probe's steps are at most 5% of the study's; on the CPU, in a
// short study or for a workload without fusion, the trials train apart unmeasured. Explicit values are the spec's.
// The fusion probe runs as many processes as the layout's trials on the CPU, and one where the trials train on GPUs
// (each would start a CUDA context on the same GPU; their packing is measured apart).
TEST_F(ChooseLayout, TheFusionProbeRunsOneProcessWhereTheTrialsTrainOnGpus) {
  const ParallelLayout layout{16, 1, "one thread per trial"};
  EXPECT_EQ(FusionProbeProcesses({.trials_on_gpus = false}, layout), 16);
  EXPECT_EQ(FusionProbeProcesses({.trials_on_gpus = true}, layout), 1);
  EXPECT_EQ(FusionProbeProcesses({}, ParallelLayout{0, 1, ""}), 1);
}

TEST_F(ChooseLayout, TheDefaultFusionIsMeasuredOnlyOnCudaForAFusibleLongStudy) {
  int asked = 0;
  const auto fusible = [&asked](const StudySpec&) { return ++asked, true; };
  const auto not_fusible = [](const StudySpec&) { return false; };
  // Alone and groups of 2, 4, 8 and 16, each twice: 2,500 steps; no more candidates than trials.
  EXPECT_EQ(FusionProbeSteps(32), 2500U);
  EXPECT_EQ(FusionProbeSteps(2), 1000U);
  EXPECT_EQ(FusionProbeSteps(0), 0U);
  EXPECT_EQ(Spec(32, 2000).training.fuse, "chosen");
  // The quickstart on CUDA: 32 trials of 2000 steps, the probe 3.9% of them.
  const FusionPlan quickstart = PlanFusion(Spec(32, 2000), true, 32, fusible);
  EXPECT_TRUE(quickstart.probe);
  EXPECT_THAT(quickstart.why, HasSubstr("a probe of about 2500 training steps, 3.9% of the 64000 left"));
  EXPECT_EQ(asked, 1);
  // On the CPU never, and the workload is not even asked (that loads the trainer).
  const FusionPlan cpu = PlanFusion(Spec(32, 2000), false, 32, fusible);
  EXPECT_FALSE(cpu.probe);
  EXPECT_THAT(cpu.why, HasSubstr("the trials train on the CPU"));
  EXPECT_EQ(asked, 1);
  // 5% of the study's steps at most: 32 trials need 50,000 steps in all, 2 trials 20,000 (the layout's threshold).
  EXPECT_TRUE(PlanFusion(Spec(32, 1563), true, 32, fusible).probe);
  const FusionPlan short_study = PlanFusion(Spec(32, 1562), true, 32, fusible);
  EXPECT_FALSE(short_study.probe);
  EXPECT_THAT(short_study.why, HasSubstr("more than 5% of the 49984 left in all (32 trials)"));
  EXPECT_TRUE(PlanFusion(Spec(2, 10000), true, 2, fusible).probe);
  EXPECT_FALSE(PlanFusion(Spec(2, 9999), true, 2, fusible).probe);
  EXPECT_FALSE(PlanFusion(Spec(1, 1000000), true, 1, fusible).probe) << "one trial left has nothing to fuse with";
  // A workload without fusion.
  const FusionPlan apart = PlanFusion(Spec(32, 2000), true, 32, not_fusible);
  EXPECT_FALSE(apart.probe);
  EXPECT_THAT(apart.why, HasSubstr("cannot train fused"));
  // Explicit values as before: auto is measured anywhere (ChooseFusion skips a short study itself), off and a number
  // never.
  EXPECT_TRUE(PlanFusion(Spec(4, 100, "{fuse: auto}"), false, 4, not_fusible).probe);
  EXPECT_FALSE(PlanFusion(Spec(32, 2000, "{fuse: off}"), true, 32, fusible).probe);
  EXPECT_FALSE(PlanFusion(Spec(32, 2000, "{fuse: 8}"), true, 32, fusible).probe);
  // What the runner asks: the built-in MLP fuses; data-parallel ranks and a program of yours do not.
  StudySpec study = Spec(32, 2000);
  EXPECT_TRUE(FusibleStudy(study));
  study.training.processes = 2;
  EXPECT_FALSE(FusibleStudy(study));
  EXPECT_FALSE(
      FusibleStudy(ParseStudySpec("name: p\ncommand: ./train.sh {params_file}\nmax_train_steps: 2000\n"
                                  "trials: 32\nspace:\n  learning_rate: {min: 0.01, max: 0.1}\n",
                                  "p.yaml")));
}

TEST_F(ChooseLayout, MeasuresEachCandidateOnceAndReusesTheMeasurement) {
  const StudySpec spec = Spec(40, 1000);
  std::vector<std::string> progress;
  LayoutRequest request = Request(2, 40);
  request.progress = [&](const std::string& what) { progress.push_back(what); };
  const ParallelLayout first = ChooseParallelLayout(spec, request);
  EXPECT_THAT(first.basis, ::testing::StartsWith("measured (2×1: "));
  EXPECT_THAT(progress, ::testing::ElementsAre("measuring 2 trials at once, 1 thread each",
                                               "measuring 1 trial at once, 2 threads each",
                                               "measuring 2 trials at once, 1 thread each again",
                                               "measuring 1 trial at once, 2 threads each again"));
  std::ifstream in(request.cache_file);
  const nlohmann::json cache = nlohmann::json::parse(in);
  ASSERT_EQ(cache.at("layouts").size(), 1u);
  const nlohmann::json entry = cache.at("layouts").begin().value();
  EXPECT_EQ(entry.at("machine_and_workload").at("cpu"), CpuModelName());
  EXPECT_EQ(entry.at("machine_and_workload").at("params").at("batch_size"), 64);
  // training.fuse left out trains as off on the CPU, and is keyed so: entries measured for off serve it.
  EXPECT_EQ(entry.at("machine_and_workload").at("training").at("fuse"), "off");
  ASSERT_EQ(entry.at("measurements").size(), 2u);
  for (const auto& m : entry.at("measurements")) {
    EXPECT_GT(m.at("steps_per_second").get<double>(), 10) << m.dump();  // a 32-unit MLP trains far faster
  }
  // The same model again, in a study of another name and length: the cache answers, nothing is measured.
  progress.clear();
  request.trials_to_run = 30;
  const ParallelLayout again = ChooseParallelLayout(Spec(30, 2000), request);
  EXPECT_TRUE(progress.empty());
  EXPECT_THAT(again.basis, HasSubstr("measured before on this machine"));
  EXPECT_EQ(again.threads, first.threads);
  EXPECT_THAT(ChooseParallelLayout(Spec(30, 2000, "{fuse: off}"), request).basis,
              HasSubstr("measured before on this machine"));
  EXPECT_TRUE(progress.empty());
  // Another core count is another machine as far as the measurement goes.
  request.cores = 1;
  const ParallelLayout one_core = ChooseParallelLayout(spec, request);
  EXPECT_EQ(progress.size(), 2u);  // the one candidate, twice
  EXPECT_EQ(one_core.trials, 1);
  EXPECT_EQ(one_core.threads, 1);
}

// Given a trial server, the probe forks its processes from it: one server, loaded with one thread, serves the
// candidates of every thread count (and the trials after them).
TEST_F(ChooseLayout, TheProbeIsForkedByOneTrialServerForEveryThreadCount) {
  BecomeSubreaper();  // as dltune run is: warm processes are re-parented to it
  TrialServer server;
  LayoutRequest request = Request(2, 40);
  request.trial_server = &server;
  const ParallelLayout layout = ChooseParallelLayout(Spec(40, 1000), request);
  EXPECT_THAT(layout.basis, ::testing::StartsWith("measured (2×1: "));
  EXPECT_EQ(server.servers_started(), 1);
  // The study's trials then start from the same server: the probes' settings are a trial's.
  const StudySpec spec = Spec(40, 1000, "{threads: 1}");
  const auto store = OpenStore("sqlite://" + (dir_ / "s.db").string(), true);
  StudySession session = StudySession::OpenOrCreate(*store, spec, "");
  const std::optional<ActiveTrial> trial = session.Ask("test:1");
  ASSERT_TRUE(trial);
  const PreparedTrial prepared = PrepareTrial(spec, session.study(), *trial, DLTUNE_CLI);
  {
    TrialProcess process(prepared.command, &server);  // killed as it goes
  }
  EXPECT_EQ(server.servers_started(), 1) << "the trial needed a trial server of its own";
}

// dltune run warms its trial server before the layout is chosen: the study's trials are then forked by it, not by a
// server of their own.
TEST_F(ChooseLayout, AServerWarmedAheadForksTheStudysTrials) {
  BecomeSubreaper();
  TrialServer server;
  const StudySpec spec = Spec(4, 100, "{threads: 1}");
  server.Warm(DLTUNE_CLI, LoadEnvironmentOf(SharedTrialEnvironment(/*builtin=*/true)),
              {{"DLTUNE_WORKLOAD", spec.workload.name}, {"DLTUNE_WORKLOAD_ARGS", spec.workload.args.dump()}});
  EXPECT_EQ(server.servers_started(), 1);
  const auto store = OpenStore("sqlite://" + (dir_ / "s.db").string(), true);
  StudySession session = StudySession::OpenOrCreate(*store, spec, "");
  const std::optional<ActiveTrial> trial = session.Ask("test:1");
  ASSERT_TRUE(trial);
  const PreparedTrial prepared = PrepareTrial(spec, session.study(), *trial, DLTUNE_CLI);
  TrialProcess process(prepared.command, &server);
  EXPECT_EQ(server.servers_started(), 1) << "the trial needed a trial server of its own";
  std::optional<ExitStatus> status;
  for (int i = 0; i < 600 && !status; ++i) {
    std::string report;
    if (process.report_fd() >= 0) process.ReadReport(report);
    status = process.TryWait();
    if (!status) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(status);
  EXPECT_TRUE(status->ok()) << status->Describe() << ": " << test::Slurp(prepared.command.stderr_path);
  EXPECT_THAT(test::Slurp(prepared.command.stdout_path), HasSubstr("started warm: forked by trial server"));
}

TEST_F(ChooseLayout, AnUnreadableCacheIsMeasuredAgainAndAFailedProbeFallsBack) {
  LayoutRequest request = Request(2, 40);
  fs::create_directories(request.cache_file.parent_path());
  std::ofstream(request.cache_file) << "{ not json";
  EXPECT_THAT(ChooseParallelLayout(Spec(40, 1000), request).basis, ::testing::StartsWith("measured ("));
  EXPECT_TRUE(nlohmann::json::parse(test::Slurp(request.cache_file), nullptr, false).is_object());

  request.cache_file = dir_ / "other-cache.json";
  request.dltune_executable = "/bin/false";
  const ParallelLayout fallback = ChooseParallelLayout(Spec(40, 1000), request);
  EXPECT_EQ(fallback.trials, 2);
  EXPECT_EQ(fallback.threads, 1);
  EXPECT_THAT(fallback.basis,
              HasSubstr("the layout could not be measured (the probe process ended with exit status 1"));
  EXPECT_FALSE(fs::exists(request.cache_file));
}

// dltune run says which layout it took, and a trial of an auto study trains with the layout's threads: trial.json
// and the reproduction command say so.
TEST_F(ChooseLayout, DltuneRunGivesEachTrialTheLayoutsThreads) {
  std::ofstream(dir_ / "study.yaml") << "name: threads\n"
                                        "workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [16]}}\n"
                                        "max_train_steps: 10\n"
                                        "training: {train_eval_examples: 500}\n"
                                        "trials: 2\n"
                                        "space:\n  optimizer: adam\n  learning_rate: 0.001\n  batch_size: 32\n";
  const test::Result run =
      test::RunDltune("run study.yaml --parallel 1 --no-report --storage sqlite://" + (dir_ / "s.db").string(), dir_);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const int cores = AvailableCores();
  EXPECT_THAT(run.out, HasSubstr(fmt::format("parallel layout: 1 trial at once, {} thread{} each: --parallel", cores,
                                             cores == 1 ? "" : "s")));
  fs::path trial_json;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "runs")) {
    if (entry.path().filename() == "trial.json") trial_json = entry.path();
  }
  ASSERT_FALSE(trial_json.empty());
  EXPECT_EQ(nlohmann::json::parse(test::Slurp(trial_json)).at("training").at("threads"), cores);
  // The best trial's reproduction command trains with the same threads.
  EXPECT_THAT(run.out, ::testing::ContainsRegex(fmt::format("reproduce: +dltune train .*--threads {} ", cores)));
}

}  // namespace
}  // namespace dltune
