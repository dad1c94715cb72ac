// Data-parallel trials (training.processes, docs/data-parallel.md) on Fashion-MNIST, through the command as a user
// runs it: 2 ranks over loopback train what 1 process trains at the same global batch, their checkpoints resume under
// either count, one process writes, and a rank that dies or hangs fails the trial, which then resumes.
//
// Tolerances. A sum over 2 ranks adds in another order than one over 1 process, as a sum over 2 threads does; the
// differences start at float32 rounding and add up step by step: the MLP is compared within
// SmoothTrainingTolerance(step) (tests/numeric_tolerance.h derives it: 16 roundings a step). The CNN's ReLUs and
// max-pools amplify faster (a value on a kink takes the other branch), so it is compared over 30 small SGD steps,
// within 1e-4 (its gradient norm within 1e-3): the same as one process with 2 threads against 1.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "dltune/store/store.h"
#include "numeric_tolerance.h"
#include "own_directory.h"

namespace dltune {
namespace {

namespace fs = std::filesystem;
using test::RunDltune;
using test::Slurp;
using test::SomeProcessWorksIn;
using ::testing::HasSubstr;

// A run's metrics.jsonl: training loss and gradient norm by step, evaluations by "step split metric".
struct Series {
  std::map<std::int64_t, std::pair<double, double>> train;
  std::map<std::string, double> eval;
  int train_lines = 0;
};

Series ReadSeries(const fs::path& out) {
  Series series;
  std::ifstream in(out / "metrics.jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto j = nlohmann::json::parse(line);
    if (j["type"] == "train") {
      series.train[j["step"].get<std::int64_t>()] = {j["loss"].get<double>(), j["grad_norm"].get<double>()};
      ++series.train_lines;
    } else if (j["type"] == "eval") {
      series.eval[std::to_string(j["step"].get<std::int64_t>()) + " " + j["split"].get<std::string>() + " " +
                  j["metric"].get<std::string>()] = j["value"].get<double>();
    }
  }
  return series;
}

// A relative tolerance by step.
using Tolerance = std::function<double(std::int64_t step)>;
Tolerance Fixed(double tolerance) {
  return [tolerance](std::int64_t) { return tolerance; };
}
Tolerance Smooth() {
  return [](std::int64_t step) { return test::SmoothTrainingTolerance(step); };
}

// Losses and gradient norms within their relative tolerance at their step; evaluation losses within `eval_tolerance`
// (relative), and counted metrics (correct_class_k, accuracy, error_rate) within `examples` examples of 1000.
void ExpectSeriesAgree(const Series& one, const Series& two, const Tolerance& loss_tolerance,
                       const Tolerance& grad_tolerance, const Tolerance& eval_tolerance, int examples = 0) {
  ASSERT_EQ(one.train.size(), two.train.size());
  ASSERT_EQ(one.eval.size(), two.eval.size());
  for (const auto& [step, values] : one.train) {
    SCOPED_TRACE("step " + std::to_string(step));
    ASSERT_TRUE(two.train.count(step));
    EXPECT_NEAR(two.train.at(step).first, values.first, loss_tolerance(step) * std::abs(values.first));
    EXPECT_NEAR(two.train.at(step).second, values.second, grad_tolerance(step) * std::abs(values.second));
  }
  for (const auto& [key, value] : one.eval) {
    SCOPED_TRACE(key);
    ASSERT_TRUE(two.eval.count(key));
    const std::int64_t step = std::stoll(key.substr(0, key.find(' ')));
    // Counts are exact sums, but an example near a decision boundary may fall on the other side.
    if (key.find("correct_class_") != std::string::npos) {
      EXPECT_NEAR(two.eval.at(key), value, examples);
    } else if (key.find(" loss") == std::string::npos) {
      EXPECT_NEAR(two.eval.at(key), value, examples / 1000.0 + 1e-12);
    } else {
      EXPECT_NEAR(two.eval.at(key), value, eval_tolerance(step) * std::abs(value));
    }
  }
}

// The tensors of `archive` and of the archives nested in it (a module's submodules), by dotted name.
void CollectTensors(torch::serialize::InputArchive& archive, const std::string& prefix,
                    std::map<std::string, torch::Tensor>& tensors) {
  for (const std::string& key : archive.keys()) {
    torch::Tensor tensor;
    torch::serialize::InputArchive nested;
    if (archive.try_read(key, tensor) || archive.try_read(key, tensor, /*is_buffer=*/true)) {
      tensors[prefix + key] = tensor;
    } else if (archive.try_read(key, nested)) {
      CollectTensors(nested, prefix + key + ".", tensors);
    }
  }
}

// The model's tensors (parameters and buffers) in a checkpoint's state.pt, by name.
std::map<std::string, torch::Tensor> CheckpointTensors(const fs::path& state) {
  torch::serialize::InputArchive archive;
  archive.load_from(state.string());
  torch::serialize::InputArchive model;
  archive.read("model", model);
  std::map<std::string, torch::Tensor> tensors;
  CollectTensors(model, "", tensors);
  return tensors;
}

// The largest difference between the two checkpoints' tensors, relative to each tensor's largest value.
double LargestRelativeDifference(const fs::path& a, const fs::path& b, const std::string& name_part = "") {
  const auto one = CheckpointTensors(a);
  const auto two = CheckpointTensors(b);
  EXPECT_EQ(one.size(), two.size());
  double largest = 0;
  int compared = 0;
  for (const auto& [name, tensor] : one) {
    if (name.find(name_part) == std::string::npos || !tensor.is_floating_point()) continue;
    ++compared;
    const torch::Tensor other = two.at(name);
    const double scale = std::max(1e-12, tensor.abs().max().item<double>());
    largest = std::max(largest, (tensor - other).abs().max().item<double>() / scale);
  }
  EXPECT_GT(compared, 0) << "no tensor named *" << name_part << "* in " << a;
  return largest;
}

class DataParallel : public test::InOwnDirectory {
 protected:
  DataParallel() : InOwnDirectory("dp") {}

  // `dltune train ARGS --out DIR/out`; expects exit status `status`.
  void Train(const std::string& args, const std::string& out, int status = 0) {
    const auto result = RunDltune("train " + args + " --out " + (dir_ / out).string());
    ASSERT_EQ(result.exit_code, status) << result.out << result.err;
  }

  // The newest checkpoint's state.pt in `out`.
  fs::path LatestState(const std::string& out) {
    fs::path latest;
    for (const auto& entry : fs::directory_iterator(dir_ / out / "checkpoints")) {
      if (entry.is_directory() && entry.path().filename().string().rfind("step_", 0) == 0 &&
          entry.path().filename() > latest.filename()) {
        latest = entry.path();
      }
    }
    return latest / "state.pt";
  }
};

const std::string kMlp =
    "fashion_mnist_mlp --set hidden_sizes=[64] --set optimizer=adam --set learning_rate=0.003 --set batch_size=64 "
    "--steps 60 --eval-every 20 --log-every 1 --train-eval-examples 1000 --threads 1 --seed 7";

TEST_F(DataParallel, TwoRanksTrainTheMlpAsOneProcessDoesAndOnlyRankZeroWrites) {
  Train(kMlp, "one");
  Train(kMlp + " --processes 2 --collective-timeout 60s", "two");
  const Series one = ReadSeries(dir_ / "one");
  const Series two = ReadSeries(dir_ / "two");
  ASSERT_EQ(one.train.size(), 60U);
  ExpectSeriesAgree(one, two, Smooth(), Smooth(), Smooth());
  // Every step and evaluation once: rank 1 wrote none of them, nor a checkpoint of its own.
  EXPECT_EQ(two.train_lines, 60);
  EXPECT_LT(LargestRelativeDifference(LatestState("one"), LatestState("two")), test::SmoothTrainingTolerance(60));
  std::set<std::string> written;
  for (const auto& entry : fs::directory_iterator(dir_ / "two")) written.insert(entry.path().filename().string());
  EXPECT_EQ(written, (std::set<std::string>{"checkpoints", "metrics.jsonl", "rank_1.log"}));
  const std::string rank_log = Slurp(dir_ / "two" / "rank_1.log");
  EXPECT_THAT(rank_log, HasSubstr("data-parallel rank 1 of 2: 60 steps done"));
  EXPECT_THAT(rank_log, ::testing::Not(HasSubstr("eval at step")));
}

// Data-parallel ranks on CUDA (label gpu: they skip without a CUDA device, saying why). Each rank trains on the GPU of
// its local rank (shared round-robin where there are fewer); the gradients go over NCCL where every rank has a GPU of
// its own, else over Gloo. Against one process on the GPU, within float32's rounding of the roundings a step on a GPU
// adds (128: src/train/cuda_training_test.cc), accumulated over the steps.
class CudaDataParallel : public DataParallel {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) {
      GTEST_SKIP() << "no CUDA device: "
                   << (torch::hasCUDA() ? "this LibTorch has CUDA, but no GPU is visible"
                                        : "this LibTorch was built without CUDA (CPU-only)");
    }
    DataParallel::SetUp();
  }
  static Tolerance OnTheGpu() {
    return [](std::int64_t step) { return static_cast<double>(step) * 128 * 1.1920928955078125e-07; };
  }
};

TEST_F(CudaDataParallel, TwoRanksTrainTheMlpAsOneProcessDoesThere) {
  Train(kMlp + " --device cuda", "one");
  const auto two = RunDltune("train " + kMlp + " --device cuda --processes 2 --collective-timeout 60s --out " +
                             (dir_ / "two").string());
  ASSERT_EQ(two.exit_code, 0) << two.out << two.err;
  ExpectSeriesAgree(ReadSeries(dir_ / "one"), ReadSeries(dir_ / "two"), OnTheGpu(), OnTheGpu(), OnTheGpu(), 2);
  // NCCL where the ranks have a GPU each; two ranks on one GPU share it over Gloo (NCCL refuses that).
  const bool own_gpus = torch::cuda::device_count() >= 2;
  EXPECT_THAT(two.err, HasSubstr(own_gpus ? "on cuda:0, its CUDA tensors over nccl" : "its CUDA tensors over gloo"));
  EXPECT_THAT(Slurp(dir_ / "two" / "rank_1.log"), HasSubstr(own_gpus ? "on cuda:1" : "on cuda:0"));
}

// Stopped and resumed, with dropout drawing from each rank's own CUDA generator, 2 ranks on CUDA report exactly the
// series of the 2 ranks never stopped.
TEST_F(CudaDataParallel, TwoRanksStoppedAndResumedOnCudaContinueExactly) {
  const std::string dropout = kMlp + " --set dropout=0.2 --device cuda --processes 2";
  Train(dropout, "whole");
  Train(dropout + " --stop-at-step 30", "parts", 75);
  Train(dropout, "parts");
  const Series whole = ReadSeries(dir_ / "whole");
  const Series parts = ReadSeries(dir_ / "parts");
  EXPECT_EQ(parts.train_lines, 60);
  ExpectSeriesAgree(whole, parts, Fixed(0), Fixed(0), Fixed(0));
}

TEST_F(DataParallel, TwoRanksTrainTheCnnWithGhostBatchNormAsOneProcessDoes) {
  // Shares of 32 examples: two ghost batches of 16 on each rank, the four of the global batch in all.
  const std::string cnn =
      "fashion_mnist_cnn --set conv_channels=[8,16] --set dense_size=32 --set normalization=ghost "
      "--set virtual_batch_size=16 --set optimizer=sgd --set learning_rate=0.01 --set batch_size=64 --steps 30 "
      "--eval-every 10 --log-every 1 --train-eval-examples 1000 --threads 1 --seed 7";
  Train(cnn, "one");
  Train(cnn + " --processes 2", "two");
  ExpectSeriesAgree(ReadSeries(dir_ / "one"), ReadSeries(dir_ / "two"), Fixed(1e-4), Fixed(1e-3), Fixed(1e-4), 3);
  // The running averages were synchronized before the checkpoint: they differ from one process's as its weights do
  // (3e-4 here), where rank 0's own, from half of the ghost batches, differ by 2e-2.
  EXPECT_LT(LargestRelativeDifference(LatestState("one"), LatestState("two"), "running_"), 2e-3);
}

TEST_F(DataParallel, CheckpointsResumeUnderTheOtherRankCount) {
  Train(kMlp, "whole");
  // 2 ranks, stopped at step 30, resumed by 1 process; and the other way round.
  Train(kMlp + " --processes 2 --stop-at-step 30", "two_then_one", 75);
  Train(kMlp, "two_then_one");
  Train(kMlp + " --stop-at-step 30", "one_then_two", 75);
  Train(kMlp + " --processes 2", "one_then_two");
  const Series whole = ReadSeries(dir_ / "whole");
  for (const std::string out : {"two_then_one", "one_then_two"}) {
    SCOPED_TRACE(out);
    const Series resumed = ReadSeries(dir_ / out);
    EXPECT_EQ(resumed.train_lines, 60);  // no step twice, none missing
    ExpectSeriesAgree(whole, resumed, Smooth(), Smooth(), Smooth());
  }
}

// A study of one data-parallel trial of 60 steps, with a checkpoint every 20.
class DataParallelStudy : public DataParallel {
 protected:
  void SetUp() override {
    DataParallel::SetUp();
    std::ofstream(dir_ / "study.yaml") << "name: gang\n"
                                          "workload: {name: fashion_mnist_mlp, args: {hidden_sizes: [64]}}\n"
                                          "max_train_steps: 60\n"
                                          "training: {eval_every_steps: 20, log_every_steps: 1, "
                                          "train_eval_examples: 1000, processes: 2, collective_timeout: 3s}\n"
                                          "trials: 1\n"
                                          "space:\n"
                                          "  optimizer: adam\n"
                                          "  learning_rate: 0.003\n"
                                          "  batch_size: 64\n";
  }

  // `dltune run` of the study with `environment` (VAR=value ...); returns its exit status and elapsed seconds.
  std::pair<int, double> Run(const std::string& environment, const std::string& flags = "") {
    const auto start = std::chrono::steady_clock::now();
    const std::string command = "cd '" + dir_.string() + "' && env " + environment + " " + DLTUNE_CLI +
                                " run study.yaml --no-report " + flags + " --storage sqlite://" +
                                (dir_ / "dltune.db").string() + " >> run.out 2>&1";
    const int status = std::system(command.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  }

  // The content of file `name` in the trial's directory.
  std::string TrialFile(const std::string& name) {
    for (const auto& entry : fs::recursive_directory_iterator(dir_ / "runs")) {
      if (entry.path().filename() == name && entry.path().parent_path().filename() == "trial_0") {
        return Slurp(entry.path());
      }
    }
    return "";
  }

  TrialRecord Trial() {
    const auto store = OpenStore("sqlite://" + (dir_ / "dltune.db").string());
    return store->ListTrials(store->FindStudy("gang")->id).at(0);
  }

  std::vector<std::int64_t> TrainSteps() {
    const auto store = OpenStore("sqlite://" + (dir_ / "dltune.db").string());
    std::vector<std::int64_t> steps;
    for (const TrainMeasurement& m : store->TrainSeries(Trial().id)) steps.push_back(m.step);
    return steps;
  }

  void ExpectResumesWithoutGap() {
    EXPECT_FALSE(SomeProcessWorksIn(dir_ / "runs")) << "a rank outlived its trial";
    const auto [status, seconds] = Run("", "--retry-failed");
    ASSERT_EQ(status, 0) << Slurp(dir_ / "run.out");
    EXPECT_EQ(Trial().state, TrialState::kCompleted) << Slurp(dir_ / "run.out");
    EXPECT_THAT(Slurp(dir_ / "run.out"), HasSubstr("trial 0 resumes"));
    std::vector<std::int64_t> expected(60);
    for (std::int64_t i = 0; i < 60; ++i) expected[static_cast<std::size_t>(i)] = i + 1;
    EXPECT_EQ(TrainSteps(), expected);
  }
};

TEST_F(DataParallelStudy, AKilledRankFailsTheTrialLeavesNoRankAndTheTrialResumes) {
  const auto [status, seconds] = Run("DLTUNE_INJECT_FAULT=kill@0:30#1");
  EXPECT_NE(status, 0);
  const TrialRecord trial = Trial();
  EXPECT_EQ(trial.state, TrialState::kFailed);
  EXPECT_THAT(trial.reason, HasSubstr("rank 1 of 2 ended with killed by signal 9"));
  EXPECT_LT(seconds, 30);  // a dead peer is noticed at once, well within the collective timeout
  ExpectResumesWithoutGap();
}

TEST_F(DataParallelStudy, AHungRankFailsTheTrialWithinTheCollectiveTimeout) {
  const auto [status, seconds] = Run("DLTUNE_INJECT_FAULT=hang@0:30#1");
  EXPECT_NE(status, 0);
  const TrialRecord trial = Trial();
  EXPECT_EQ(trial.state, TrialState::kFailed);
  EXPECT_THAT(TrialFile("stderr.log"), HasSubstr("did not answer within 3 s"));
  EXPECT_LT(seconds, 30);
  ExpectResumesWithoutGap();
}

// The tasks of a launcher's job (srun -n 2) form a gang only for a data-parallel study: on any other each is a worker
// of its own, as before gangs existed; a data-parallel study's gang needs to know where to meet.
TEST_F(DataParallel, LauncherTasksFormAGangOnlyForADataParallelStudy) {
  std::ofstream(dir_ / "single.yaml") << "name: single\nworkload: synthetic\nmax_train_steps: 20\ntrials: 2\n"
                                         "space:\n  learning_rate: 0.1\n";
  std::ofstream(dir_ / "gang.yaml") << "name: gang\nworkload: synthetic\nmax_train_steps: 20\ntrials: 2\n"
                                       "training: {processes: 2}\nspace:\n  learning_rate: 0.1\n  batch_size: 64\n";
  const std::string task = "env -u RANK -u WORLD_SIZE -u MASTER_ADDR -u MASTER_PORT SLURM_PROCID=1 SLURM_NTASKS=2 ";
  const std::string storage = " --storage sqlite://" + (dir_ / "dltune.db").string();
  const auto run = [&](const std::string& spec) {
    const std::string command =
        "cd '" + dir_.string() + "' && " + task + DLTUNE_CLI + " worker --spec " + spec + storage + " > out.txt 2>&1";
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(run("single.yaml"), 0) << Slurp(dir_ / "out.txt");
  EXPECT_THAT(Slurp(dir_ / "out.txt"), HasSubstr("worker done"));
  EXPECT_EQ(run("gang.yaml"), 2) << Slurp(dir_ / "out.txt");
  EXPECT_THAT(Slurp(dir_ / "out.txt"), HasSubstr("set MASTER_ADDR"));
}

// examples/external/study_ddp.yaml as shipped: each trial is 2 ranks of PyTorch's DistributedDataParallel, started by
// dltune with the rendezvous variables; rank 0's reports are the trial's.
TEST_F(DataParallel, ThePytorchDdpExampleRunsAsAGangOfTwo) {
  fs::create_directory_symlink(fs::path(DLTUNE_SOURCE_DIR) / "examples", dir_ / "examples");
  const std::string storage = "sqlite://" + (dir_ / "dltune.db").string();
  const auto result = RunDltune("run examples/external/study_ddp.yaml --no-report --storage " + storage, dir_);
  ASSERT_EQ(result.exit_code, 0) << result.out << result.err;
  const auto store = OpenStore(storage);
  const auto trials = store->ListTrials(store->FindStudy("external_ddp")->id);
  ASSERT_EQ(trials.size(), 2U);
  for (const TrialRecord& trial : trials) {
    SCOPED_TRACE("trial " + std::to_string(trial.number));
    EXPECT_EQ(trial.state, TrialState::kCompleted) << trial.reason;
    EXPECT_EQ(store->TrainSeries(trial.id).size(), 100U);  // rank 0's steps, each once
    ASSERT_TRUE(trial.best_value.has_value());
    EXPECT_LT(*trial.best_value, 0.5);  // it learned: 10 classes, chance is 0.9
  }
  std::size_t rank_logs = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir_ / "runs"))
    rank_logs += entry.path().filename() == "rank_1.log";
  EXPECT_EQ(rank_logs, 2U);
}

}  // namespace
}  // namespace dltune
