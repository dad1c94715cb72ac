// The trainer's seam (trainer_table.h): this test program links dltune_trainer, not the trainer, and trains through
// the module it loads.
#include <dlfcn.h>
#include <link.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "dltune/core/error.h"
#include "dltune/workloads/train.h"
#include "train/torch_build.h"
#include "trainer/trainer_table.h"

namespace dltune {
namespace {

using ::testing::HasSubstr;

#ifdef DLTUNE_WITHOUT_TRAINER

// Built without the trainer: every function that trains says so, naming the workload; nothing is loaded.
TEST(TrainerSeam, WithoutTheTrainerWhatTrainsSaysSo) {
  try {
    CheckWorkloadParams("synthetic", nlohmann::json::object(), HyperParams(nlohmann::json::object(), {}), 10);
    FAIL() << "a dltune without its trainer checked a workload";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("workload 'synthetic' cannot train: this dltune was built without its trainer "
                                    "(DLTUNE_TRAINER=OFF)"));
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  EXPECT_THROW(WorkloadNames(), Error);
  EXPECT_FALSE(FusibleWorkload("synthetic"));
  EXPECT_FALSE(FasterBlasEnvironment());
}

#else

void UseBuiltModule() { ::setenv(kTrainerModuleVariable, DLTUNE_TRAINER_MODULE_PATH, 1); }

HyperParams Params(std::map<std::string, Value> params) { return HyperParams(nlohmann::json::object(), params); }

// Thrown by a callback of this program's through the module's training loop.
struct CallbackAbort {
  std::int64_t step = 0;
};

struct Recorder : TrainerCallbacks {
  std::vector<StepMetrics> steps;
  std::vector<std::int64_t> evaluations;
  std::int64_t abort_at = 0;
  void OnTrainMetrics(const std::vector<StepMetrics>& s) override { steps.insert(steps.end(), s.begin(), s.end()); }
  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>&, std::int64_t, double) override {
    evaluations.push_back(step);
  }
  bool ShouldStop(std::int64_t step) override {
    if (abort_at != 0 && step >= abort_at) throw CallbackAbort{step};
    return false;
  }
};

// What the first call in a process of its own (no module loaded yet) throws when the module is `module`, as its exit
// status (the ErrorKind plus 10) and its message on standard error; 1 when it loads.
[[noreturn]] void FirstCallWith(const std::string& module) {
  ::setenv(kTrainerModuleVariable, module.c_str(), 1);
  try {
    WorkloadNames();
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    // A later call tries again: with the built module it loads.
    UseBuiltModule();
    const bool loads = !WorkloadNames().empty();
    std::_Exit(static_cast<int>(e.kind()) + (loads ? 10 : 20));
  }
  std::_Exit(1);
}

TEST(TrainerSeam, AMissingModuleIsAnErrorNamingItsPathAndALaterCallLoadsTheModule) {
  EXPECT_EXIT(FirstCallWith("/nonexistent/lib/dltune/trainer.so"),
              ::testing::ExitedWithCode(static_cast<int>(ErrorKind::kIo) + 10),
              "cannot load dltune's trainer /nonexistent/lib/dltune/trainer.so: .*; built-in workloads need it, "
              "command: programs do not \\(reinstall dltune, or set DLTUNE_TRAINER_MODULE to the module's path\\)");
}

TEST(TrainerSeam, AModuleOfAnotherBuildIsRefused) {
  EXPECT_EXIT(FirstCallWith(DLTUNE_FAKE_TRAINER_MODULE_PATH),
              ::testing::ExitedWithCode(static_cast<int>(ErrorKind::kIo) + 10),
              "it is of another build of dltune \\(0\\.0\\.0 \\(fake\\); this program: [0-9.]+ \\(");
}

TEST(TrainerSeam, TrainsThroughTheModuleReportingToThisProgramsCallbacks) {
  UseBuiltModule();
  TrainerOptions options;
  options.max_train_steps = 20;
  options.training.eval_every_steps = 10;
  options.training.log_every_steps = 5;
  Recorder recorder;
  const TrainResult result =
      Train("synthetic", {{"examples", 400}}, Params({{"optimizer", Value("sgd")}, {"learning_rate", Value(0.1)}}),
            options, recorder);
  EXPECT_EQ(result.outcome, TrainOutcome::kCompleted);
  EXPECT_EQ(result.steps, 20);
  ASSERT_EQ(recorder.steps.size(), 20u);
  EXPECT_EQ(recorder.steps.back().step, 20);
  EXPECT_EQ(recorder.evaluations, (std::vector<std::int64_t>{10, 20}));
  TrainingSettings on_cpu;
  on_cpu.device = "cpu";
  EXPECT_EQ(ResolveTrainingDevice(on_cpu), "cpu");
}

// The module's libraries are the process's, as if it had linked them: OpenBLAS, loaded by LibTorch, is found by name
// (train/blas_kernels.h asks it which kernels it runs).
TEST(TrainerSeam, TheModulesBlasIsFoundByNameInTheProcess) {
  UseBuiltModule();
  WorkloadNames();
  std::string openblas;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* found) {
        if (info->dlpi_name != nullptr && std::strstr(info->dlpi_name, "openblas") != nullptr) {
          *static_cast<std::string*>(found) = info->dlpi_name;
        }
        return 0;
      },
      &openblas);
  if (openblas.empty()) GTEST_SKIP() << "LibTorch's BLAS here is not OpenBLAS";
  EXPECT_NE(::dlsym(RTLD_DEFAULT, "openblas_get_corename"), nullptr) << openblas << " is loaded but hidden";
}

TEST(TrainerSeam, ErrorsThrownInTheModuleArriveWithTheirKindAndMessage) {
  UseBuiltModule();
  try {
    CheckWorkloadParams("synthetic", nlohmann::json::object(), Params({{"lerning_rate", Value(0.1)}}), 10);
    FAIL() << "an unknown param passed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("lerning_rate"));
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidInput);
  }
  EXPECT_THROW(CheckWorkloadParams("nope", nlohmann::json::object(), Params({}), 10), Error);
}

TEST(TrainerSeam, AnExceptionOfThisProgramsCallbackComesBackThroughTheModule) {
  UseBuiltModule();
  TrainerOptions options;
  options.max_train_steps = 50;
  Recorder recorder;
  recorder.abort_at = 3;
  try {
    Train("synthetic", {{"examples", 400}}, Params({{"optimizer", Value("sgd")}, {"learning_rate", Value(0.1)}}),
          options, recorder);
    FAIL() << "the callback's exception was lost";
  } catch (const CallbackAbort& abort) {
    EXPECT_EQ(abort.step, 3);
  }
}

#endif

// What the build knows of its LibTorch is answered by this side of the seam without loading the module, built with
// the trainer or without.
TEST(TrainerSeam, LibTorchHasCudaIsAnsweredWithoutTheModule) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a process of its own, which has loaded no module
  // Answered in a process whose module cannot be loaded: it loads none.
  EXPECT_EXIT(
      {
        ::setenv(kTrainerModuleVariable, "/nonexistent/trainer.so", 1);
        static_cast<void>(LibTorchHasCuda());
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "");
#ifdef DLTUNE_WITHOUT_TRAINER
  EXPECT_FALSE(LibTorchHasCuda());
#endif
}

}  // namespace
}  // namespace dltune
