#include "builtin/train_by_hand.h"

#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "builtin/builtin_trial.h"
#include "core/machine.h"
#include "dltune/core/error.h"
#include "dltune/core/hyperparams.h"
#include "dltune/workloads/train.h"
#include "trial/checkpoint_owner.h"
#include "trial/trial_gang.h"
#include "trial/trial_process.h"

namespace dltune {
namespace {

// Whether to stop after `step`: asked (Ctrl-C, SIGTERM), or the step to stop at is reached.
class StopRule {
 public:
  StopRule(const std::atomic<bool>* stop_requested, std::int64_t stop_at_step)
      : stop_requested_(stop_requested), stop_at_step_(stop_at_step) {}
  bool ShouldStop(std::int64_t step) const {
    return (stop_requested_ && stop_requested_->load()) || (stop_at_step_ > 0 && step >= stop_at_step_);
  }

 private:
  const std::atomic<bool>* stop_requested_;
  std::int64_t stop_at_step_;
};

// Writes every measurement as a JSON line to DIR/metrics.jsonl, and tells `progress` of the training metrics and
// evaluations once written.
class MetricsJsonlWriter final : public TrainerCallbacks {
 public:
  MetricsJsonlWriter(const std::filesystem::path& file, StopRule stop, TrainByHandProgress* progress)
      : out_(file, std::ios::app), stop_(stop), progress_(progress) {
    if (!out_) throw IoError(fmt::format("{}: cannot write metrics", file.string()));
  }

  void OnTrainMetrics(const std::vector<StepMetrics>& steps) override {
    for (const auto& s : steps) out_ << TrainLineOf(s) << "\n";
    out_.flush();
    if (progress_) progress_->OnTrainMetrics(steps);
  }

  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& metrics, std::int64_t best_step,
                    double best_value) override {
    for (const auto& m : metrics) {
      out_ << nlohmann::json({{"type", "eval"},
                              {"step", step},
                              {"split", m.split},
                              {"metric", m.metric},
                              {"value", m.value},
                              {"examples", m.examples}})
                  .dump()
           << "\n";
    }
    out_.flush();
    if (progress_) progress_->OnEvaluation(step, metrics, best_step, best_value);
  }

  void OnPredictions(std::int64_t step, const std::vector<Prediction>& predictions) override {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : predictions) {
      list.push_back(
          {{"example", p.example}, {"label", p.label}, {"predicted", p.predicted}, {"confidence", p.confidence}});
    }
    out_ << nlohmann::json({{"type", "predictions"}, {"step", step}, {"predictions", list}}).dump() << "\n";
  }

  void OnCheckpoint(const CheckpointEvent& event) override { out_ << CheckpointLineOf(event) << "\n"; }

  bool ShouldStop(std::int64_t step) override { return stop_.ShouldStop(step); }

 private:
  std::ofstream out_;
  StopRule stop_;
  TrainByHandProgress* progress_;
};

// A data-parallel rank other than 0: rank 0 writes the metrics and checkpoints; this one only hears a stop.
class QuietRankCallbacks final : public TrainerCallbacks {
 public:
  explicit QuietRankCallbacks(StopRule stop) : stop_(stop) {}
  bool ShouldStop(std::int64_t step) override { return stop_.ShouldStop(step); }

 private:
  StopRule stop_;
};

// Data-parallel ranks started by hand: this process becomes rank 0 and starts ranks 1 to N-1 as copies of the same
// command on this machine, each writing its output to DIR/rank_<r>.log.
class LocalRanks {
 public:
  LocalRanks(const std::vector<std::string>& argv, int processes, const std::filesystem::path& out) {
    const int port = FreePort();
    for (const auto& [key, value] : RendezvousVariables({0, processes, 0, processes}, "127.0.0.1", port)) {
      ::setenv(key.c_str(), value.c_str(), 1);
    }
    for (int rank = 1; rank < processes; ++rank) {
      TrialCommand command;
      command.argv = argv;
      command.environment = RendezvousVariables({rank, processes, rank, processes}, "127.0.0.1", port);
      command.stdout_path = command.stderr_path = out / fmt::format("rank_{}.log", rank);
      peers_.push_back(std::make_unique<TrialProcess>(command));
    }
  }

  // Waits for the other ranks to end (they end with rank 0), killing those still running after a grace period.
  void Join() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(kGangGraceSeconds);
    for (auto& peer : peers_) {
      while (!peer->TryWait()) {
        if (std::chrono::steady_clock::now() > deadline) peer->Signal(SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

 private:
  std::vector<std::unique_ptr<TrialProcess>> peers_;  // destroyed (killed if running) when rank 0 fails
};

TrainerOptions OptionsOf(const TrainByHandRequest& request) {
  TrainerOptions options;
  options.max_train_steps = request.max_train_steps;
  options.training = request.training;
  options.device = ResolveTrainingDevice(request.training);
  options.init_seed = request.seed;
  options.data_seed = request.seed;
  options.objective = request.objective;
  options.checkpoint_dir = (request.out / "checkpoints").string();
  options.checkpoint_owner =
      TrainByHandCheckpointOwner(request.workload, request.seed, request.workload_args, request.params);
  return options;
}

// Whether a launcher (torchrun, srun) started this process as one of its ranks.
bool StartedByLauncher() { return std::getenv("RANK") != nullptr || std::getenv("SLURM_PROCID") != nullptr; }

}  // namespace

TrainByHandResult TrainByHand(const TrainByHandRequest& request) {
  std::filesystem::create_directories(request.out);
  TrainByHandResult trained{.result = {}, .options = OptionsOf(request)};
  TrainerOptions& options = trained.options;
  const StopRule stop(request.stop_requested, request.stop_at_step);
  std::unique_ptr<LocalRanks> local_ranks;
  if (options.training.processes > 1) {
    // auto: the cores shared out among the ranks of this machine.
    const int local_ranks_here = WholeNumberVariable("LOCAL_WORLD_SIZE").value_or(options.training.processes);
    if (options.training.threads == 0) options.training.threads = std::max(1, AvailableCores() / local_ranks_here);
    if (!StartedByLauncher()) {
      std::vector<std::string> argv = {SelfExecutable().string()};
      argv.insert(argv.end(), request.command_words.begin(), request.command_words.end());
      local_ranks = std::make_unique<LocalRanks>(argv, options.training.processes, request.out);
      if (request.progress) request.progress->OnLocalRanksStarted(options.training.processes, request.out);
    }
    options.distributed = DistributedOptionsFromEnvironment(options.training);
    if (options.distributed.rank != 0) {
      QuietRankCallbacks quiet(stop);
      trained.result = Train(request.workload, request.workload_args,
                             HyperParams(request.workload_args, request.params), options, quiet);
      return trained;
    }
  }
  MetricsJsonlWriter metrics(request.out / "metrics.jsonl", stop, request.progress);
  trained.result = Train(request.workload, request.workload_args, HyperParams(request.workload_args, request.params),
                         options, metrics);
  if (local_ranks) local_ranks->Join();
  return trained;
}

}  // namespace dltune
