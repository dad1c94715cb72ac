// `dltune train`: train one workload once with given hyperparameters, writing metrics and checkpoints to a directory.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "builtin/train_by_hand.h"
#include "commands.h"
#include "core/machine.h"
#include "dltune/core/error.h"
#include "space/yaml_node.h"

namespace dltune::cli {
namespace {

std::atomic<bool> stop_requested{false};

extern "C" void RequestStop(int) { stop_requested.store(true); }

// Prints rank 0's progress: a line per log interval and per evaluation, and where the other ranks log.
class ProgressPrinter final : public TrainByHandProgress {
 public:
  ProgressPrinter(std::int64_t max_steps, std::string objective)
      : max_steps_(max_steps), objective_(std::move(objective)) {}

  void OnTrainMetrics(const std::vector<StepMetrics>& steps) override {
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
      if (m.metric == "error_rate") summary += fmt::format("  {}/error_rate {:.4f}", m.split, m.value);
    }
    std::printf("eval at step %lld:%s  (best %s %.4f at step %lld)\n", static_cast<long long>(step), summary.c_str(),
                objective_.c_str(), best_value, static_cast<long long>(best_step));
    std::fflush(stdout);
  }

  void OnLocalRanksStarted(int processes, const std::filesystem::path& out) override {
    std::printf("data-parallel: rank 0 of %d here; ranks 1 to %d log to %s/rank_<r>.log\n", processes, processes - 1,
                out.string().c_str());
    std::fflush(stdout);
  }

 private:
  std::int64_t max_steps_;
  std::string objective_;
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
    TrainByHandRequest request;
    request.workload = args->workload;
    for (const auto& text : args->sets) {
      auto [key, value] = ParseAssignment(text);
      if (auto scalar = ValueFromJson(value)) {
        request.params[key] = *scalar;
      } else {
        request.workload_args[key] = value;  // lists and mappings (e.g. hidden_sizes) are read as workload arguments
      }
    }
    request.max_train_steps = args->steps;
    request.seed = args->seed;
    request.training = args->training.Settings();
    request.objective = Objective::Parse(args->objective, args->maximize ? Direction::kMaximize : Direction::kMinimize);
    request.out = args->out;
    request.stop_at_step = args->stop_at_step;
    request.command_words = CommandLineWords();
    request.stop_requested = &stop_requested;
    ProgressPrinter printer(args->steps, request.objective.Name());
    request.progress = &printer;
    std::signal(SIGINT, RequestStop);
    std::signal(SIGTERM, RequestStop);
    const TrainByHandResult trained = TrainByHand(request);
    const TrainResult& result = trained.result;
    const TrainerOptions& options = trained.options;
    if (options.distributed.rank != 0) {
      std::printf("data-parallel rank %d of %d: %lld steps done; rank 0 reports them\n", options.distributed.rank,
                  options.distributed.world_size, static_cast<long long>(result.steps));
      if (result.outcome == TrainOutcome::kStopped) throw CLI::RuntimeError(kExitStopped);
      return;
    }
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
