// `dltune train`: train one workload once with given hyperparameters, writing metrics and checkpoints to a directory.
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/machine.h"
#include "core/sha256.h"
#include "dltune/core/error.h"
#include "dltune/workloads/train.h"
#include "run/trial_gang.h"
#include "run/trial_process.h"
#include "space/yaml_node.h"

namespace dltune::cli {
namespace {

std::atomic<bool> stop_requested{false};

extern "C" void RequestStop(int) { stop_requested.store(true); }

// Writes every measurement as a JSON line to DIR/metrics.jsonl and prints progress.
class JsonlCallbacks final : public TrainerCallbacks {
 public:
  JsonlCallbacks(const std::filesystem::path& file, std::int64_t max_steps, std::string objective,
                 std::int64_t stop_at_step)
      : out_(file, std::ios::app),
        max_steps_(max_steps),
        objective_(std::move(objective)),
        stop_at_step_(stop_at_step) {
    if (!out_) throw IoError(fmt::format("{}: cannot write metrics", file.string()));
  }

  void OnTrainMetrics(const std::vector<StepMetrics>& steps) override {
    for (const auto& s : steps) {
      nlohmann::json line = {{"type", "train"},
                             {"step", s.step},
                             {"loss", s.loss},
                             {"learning_rate", s.learning_rate},
                             {"step_time", s.step_time},
                             {"data_wait", s.data_wait},
                             {"examples_per_second", s.examples_per_second}};
      if (s.grad_norm) line["grad_norm"] = *s.grad_norm;
      if (s.clipped) line["clipped"] = *s.clipped;
      out_ << line.dump() << "\n";
    }
    out_.flush();
    if (steps.empty()) return;
    const auto& last = steps.back();
    std::printf("step %6lld/%lld  loss %.4f  lr %.3g  %.0f examples/s  data wait %.0f%%\n",
                static_cast<long long>(last.step), static_cast<long long>(max_steps_), last.loss, last.learning_rate,
                last.examples_per_second, last.step_time > 0 ? 100.0 * last.data_wait / last.step_time : 0.0);
    std::fflush(stdout);
  }

  void OnEvaluation(std::int64_t step, const std::vector<EvalMetric>& metrics, std::int64_t best_step,
                    double best_value) override {
    std::string summary;
    for (const auto& m : metrics) {
      out_ << nlohmann::json({{"type", "eval"},
                              {"step", step},
                              {"split", m.split},
                              {"metric", m.metric},
                              {"value", m.value},
                              {"examples", m.examples}})
                  .dump()
           << "\n";
      if (m.metric == "error_rate") summary += fmt::format("  {}/error_rate {:.4f}", m.split, m.value);
    }
    out_.flush();
    std::printf("eval at step %lld:%s  (best %s %.4f at step %lld)\n", static_cast<long long>(step), summary.c_str(),
                objective_.c_str(), best_value, static_cast<long long>(best_step));
    std::fflush(stdout);
  }

  void OnPredictions(std::int64_t step, const std::vector<Prediction>& predictions) override {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& p : predictions) {
      list.push_back(
          {{"example", p.example}, {"label", p.label}, {"predicted", p.predicted}, {"confidence", p.confidence}});
    }
    out_ << nlohmann::json({{"type", "predictions"}, {"step", step}, {"predictions", list}}).dump() << "\n";
  }

  void OnCheckpoint(const CheckpointEvent& event) override {
    nlohmann::json line = {{"type", "checkpoint"}, {"step", event.step},       {"path", event.path},
                           {"best", event.best},   {"deleted", event.deleted}, {"checksum", event.checksum}};
    if (event.objective) line["objective"] = *event.objective;
    out_ << line.dump() << "\n";
  }

  bool ShouldStop(std::int64_t step) override {
    return stop_requested.load() || (stop_at_step_ > 0 && step >= stop_at_step_);
  }

 private:
  std::ofstream out_;
  std::int64_t max_steps_;
  std::string objective_;
  std::int64_t stop_at_step_ = 0;
};

// A data-parallel rank other than 0: rank 0 writes the metrics and checkpoints; this one only hears a stop.
class QuietRankCallbacks final : public TrainerCallbacks {
 public:
  explicit QuietRankCallbacks(std::int64_t stop_at_step) : stop_at_step_(stop_at_step) {}
  bool ShouldStop(std::int64_t step) override {
    return stop_requested.load() || (stop_at_step_ > 0 && step >= stop_at_step_);
  }

 private:
  std::int64_t stop_at_step_ = 0;
};

// `dltune train --processes N` run by hand: this process becomes rank 0 and starts ranks 1 to N-1 as copies of the
// same command on this machine, each writing its output to DIR/rank_<r>.log.
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
    std::printf("data-parallel: rank 0 of %d here; ranks 1 to %d log to %s/rank_<r>.log\n", processes, processes - 1,
                out.string().c_str());
    std::fflush(stdout);
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

// "key=value" with the value read as YAML (numbers, booleans, text, lists such as [256, 256]).
std::pair<std::string, nlohmann::json> ParseAssignment(const std::string& text) {
  const auto equals = text.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw Error(fmt::format("--set {}: write key=value, e.g. --set learning_rate=0.1", text));
  }
  const std::string key = text.substr(0, equals);
  const YamlNode value = YamlNode::Parse(text.substr(equals + 1), "--set " + key);
  return {key, value.AsJson()};
}

}  // namespace

void RegisterTrainCommand(CLI::App& app) {
  struct Args {
    std::string workload;
    std::vector<std::string> sets;
    std::int64_t steps = 0;
    std::string out;
    std::uint64_t seed = 0;
    std::int64_t stop_at_step = 0;
    std::string objective = "valid/error_rate";
    bool maximize = false;
    TrainingSettingOptions training;
  };
  auto args = std::make_shared<Args>();
  auto* train = app.add_subcommand(
      "train",
      "Train a workload once with the given hyperparameters, evaluating at step intervals, keeping the latest and best "
      "checkpoints and writing every measurement to DIR/metrics.jsonl (and, with --profile-steps A:B, a trace of "
      "those steps to DIR/profile.trace.json). Running it again with the same DIR resumes "
      "from the latest checkpoint; Ctrl-C stops after a checkpoint (exit status 75: resumable); a training that "
      "diverges "
      "ends infeasible (exit status 4).\n\n"
      "Example:\n  dltune train fashion_mnist_mlp --set optimizer=nesterov --set learning_rate=0.05 --steps 2000 "
      "--out runs/mlp");
  train->add_option("WORKLOAD", args->workload, "Workload name (fashion_mnist_mlp, fashion_mnist_cnn, synthetic)")
      ->required();
  train->add_option("--set", args->sets, "Hyperparameter key=value (repeatable), e.g. --set hidden_sizes=[256,256]");
  train->add_option("--steps", args->steps, "max_train_steps")->required()->check(WholeNumberIn(1, 1000000000000));
  train->add_option("--out", args->out, "Directory for metrics.jsonl and checkpoints/")->required();
  train->add_option("--seed", args->seed, "Initialization and data seed (default 0)")
      ->check(WholeNumberIn(0, std::numeric_limits<long long>::max()));
  AddTrainingSettingOptions(train, args->training);
  train->add_option("--objective", args->objective,
                    "split/metric that picks the best checkpoint (default valid/error_rate)");
  train->add_flag("--maximize,!--minimize", args->maximize, "Higher objective is better (default: lower)");
  train->add_option("--stop-at-step", args->stop_at_step,
                    "Stop after this step with a checkpoint, as if interrupted (exit 75); run again to resume. For "
                    "splitting a long run into time-limited jobs, and for testing resumption");
  train->callback([args] {
    std::map<std::string, Value> params;
    nlohmann::json workload_args = nlohmann::json::object();
    for (const auto& text : args->sets) {
      auto [key, value] = ParseAssignment(text);
      if (auto scalar = ValueFromJson(value)) {
        params[key] = *scalar;
      } else {
        workload_args[key] = value;  // lists and mappings (e.g. hidden_sizes) are read as workload arguments
      }
    }
    std::filesystem::create_directories(args->out);
    TrainerOptions options;
    options.max_train_steps = args->steps;
    options.training = args->training.Settings();
    options.init_seed = args->seed;
    options.data_seed = args->seed;
    options.objective = Objective::Parse(args->objective, args->maximize ? Direction::kMaximize : Direction::kMinimize);
    options.checkpoint_dir = (std::filesystem::path(args->out) / "checkpoints").string();
    // Checkpoints of a run with other hyperparameters, seed or workload in the same --out are refused, not resumed.
    nlohmann::json params_json = nlohmann::json::object();
    for (const auto& [name, value] : params) params_json[name] = ValueToJson(value);
    options.checkpoint_owner = {
        {"run", "dltune train"},
        {"workload", args->workload},
        {"seed", args->seed},
        {"params_sha256", Sha256Hex(nlohmann::json({{"args", workload_args}, {"params", params_json}}).dump())}};
    std::signal(SIGINT, RequestStop);
    std::signal(SIGTERM, RequestStop);
    std::unique_ptr<LocalRanks> local_ranks;
    if (options.training.processes > 1) {
      // auto: the cores shared out among the ranks of this machine.
      const int local_ranks_here = WholeNumberVariable("LOCAL_WORLD_SIZE").value_or(options.training.processes);
      if (options.training.threads == 0) options.training.threads = std::max(1, AvailableCores() / local_ranks_here);
      if (std::getenv("RANK") == nullptr && std::getenv("SLURM_PROCID") == nullptr) {
        std::vector<std::string> argv = {SelfExecutable().string()};
        argv.insert(argv.end(), CommandLineWords().begin(), CommandLineWords().end());
        local_ranks = std::make_unique<LocalRanks>(argv, options.training.processes, args->out);
      }
      options.distributed = DistributedOptionsFromEnvironment(options.training);
      if (options.distributed.rank != 0) {
        QuietRankCallbacks quiet(args->stop_at_step);
        const TrainResult result =
            Train(args->workload, workload_args, HyperParams(workload_args, params), options, quiet);
        std::printf("data-parallel rank %d of %d: %lld steps done; rank 0 reports them\n", options.distributed.rank,
                    options.distributed.world_size, static_cast<long long>(result.steps));
        if (result.outcome == TrainOutcome::kStopped) throw CLI::RuntimeError(kExitStopped);
        return;
      }
    }
    JsonlCallbacks callbacks(std::filesystem::path(args->out) / "metrics.jsonl", args->steps, options.objective.Name(),
                             args->stop_at_step);
    const TrainResult result =
        Train(args->workload, workload_args, HyperParams(workload_args, params), options, callbacks);
    if (local_ranks) local_ranks->Join();
    if (result.resumed_from_step > 0)
      std::printf("(resumed from step %lld)\n", static_cast<long long>(result.resumed_from_step));
    if (options.training.threads == 0 && result.threads < AvailableCores()) {
      std::printf(
          "trained with %d of this machine's %d cores: other processes kept the rest busy when it started "
          "(--threads N to choose)\n",
          result.threads, AvailableCores());
    }
    if (!result.profile_trace.empty()) {
      std::printf("profile trace of steps %s in %s (open it in ui.perfetto.dev or chrome://tracing)\n",
                  options.training.profile_steps.c_str(), result.profile_trace.c_str());
    }
    switch (result.outcome) {
      case TrainOutcome::kCompleted:
        std::printf("completed %lld steps: best %s %.4f at step %lld; metrics in %s/metrics.jsonl\n",
                    static_cast<long long>(result.steps), options.objective.Name().c_str(),
                    result.best_value.value_or(0), static_cast<long long>(result.best_step.value_or(0)),
                    args->out.c_str());
        return;
      case TrainOutcome::kInfeasible:
        std::printf("infeasible: %s\n", result.reason.c_str());
        throw CLI::RuntimeError(kExitInfeasible);
      case TrainOutcome::kStopped: std::printf("%s\n", result.reason.c_str()); throw CLI::RuntimeError(kExitStopped);
    }
  });
}

}  // namespace dltune::cli
