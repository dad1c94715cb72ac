#include "dltune/workloads/train.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include <fmt/format.h>
#include <torch/torch.h>

#include "core/clock.h"
#include "dltune/core/error.h"
#include "dltune/workloads/registry.h"
#include "train/fused_training.h"
#include "train/make_array_model.h"

namespace dltune {

TrainResult Train(const std::string& workload_name, const nlohmann::json& workload_args, const HyperParams& params,
                  const TrainerOptions& options, TrainerCallbacks& callbacks) {
  options.Validate();
  const auto workload = MakeWorkload(workload_name, workload_args);
  return TrainWorkload(*workload, params, options, callbacks);
}

bool FusibleWorkload(const std::string& workload_name, const nlohmann::json& workload_args) {
  const std::vector<std::string> names = RegisteredWorkloadNames();
  if (std::find(names.begin(), names.end(), workload_name) == names.end()) return false;
  return MakeWorkload(workload_name, workload_args)->Fusion().has_value();
}

std::vector<TrainResult> TrainFusedTrials(const std::string& workload_name, const nlohmann::json& workload_args,
                                          const std::vector<FusedMember>& members, const TrainerOptions& shared,
                                          MemberCallbacks& callbacks) {
  const auto workload = MakeWorkload(workload_name, workload_args);
  FusionOf(*workload);  // refuses a workload that offers no fusion before any model is built
  FusedOptions options{.max_train_steps = shared.max_train_steps,
                       .training = shared.training,
                       .objective = shared.objective,
                       .device = shared.device,
                       .callbacks = &callbacks};
  std::vector<TrainResult> results;
  for (FusedMemberResult& member : TrainFused(*workload, members, options)) results.push_back(member.result);
  return results;
}

CheckpointMetrics EvaluateWorkloadCheckpoint(const std::string& workload_name, const nlohmann::json& workload_args,
                                             const HyperParams& params, const TrainerOptions& options,
                                             const std::string& checkpoint_path, const std::string& split,
                                             const std::string& export_path) {
  const auto workload = MakeWorkload(workload_name, workload_args);
  return EvaluateCheckpoint(*workload, params, options, checkpoint_path, split, export_path);
}

SplitOverlap CheckWorkloadSplits(const std::string& workload_name, const nlohmann::json& workload_args) {
  const auto workload = MakeWorkload(workload_name, workload_args);
  return CheckSplitOverlap(*workload);
}

void CheckWorkloadParams(const std::string& workload_name, const nlohmann::json& workload_args,
                         const HyperParams& params, std::int64_t max_train_steps) {
  const auto workload = MakeWorkload(workload_name, workload_args);
  CheckTrialParams(*workload, params, max_train_steps);
}

void PreloadWorkloadData(const std::string& workload_name, const nlohmann::json& workload_args) {
  // One thread: no OpenMP team may exist when the process forks (a forked child cannot use a copied one).
  torch::set_num_threads(1);
  const auto workload = MakeWorkload(workload_name, workload_args);
  workload->Data();  // decoded data sets stay cached in the process (LoadFashionMnist)
}

namespace {

double MedianOf(std::vector<double>& times) {
  if (times.empty()) return 0;
  auto middle = times.begin() + static_cast<std::ptrdiff_t>(times.size() / 2);
  std::nth_element(times.begin(), middle, times.end());
  return *middle;
}

// Collects each step's time and stops training once `seconds` of steps are measured.
class StepTimer : public TrainerCallbacks {
 public:
  explicit StepTimer(double seconds) : seconds_(seconds) {}

  void OnTrainMetrics(const std::vector<StepMetrics>& steps) override {
    for (const StepMetrics& step : steps) {
      if (step.step <= kWarmUpSteps) continue;
      times_.push_back(step.step_time);
      measured_ += step.step_time;
    }
  }
  bool ShouldStop(std::int64_t step) override { return step > kWarmUpSteps + 5 && measured_ >= seconds_; }

  double Median() { return MedianOf(times_); }

 private:
  static constexpr std::int64_t kWarmUpSteps = 5;  // the first steps allocate and fill caches
  double seconds_;
  double measured_ = 0;
  std::vector<double> times_;
};

// The same for a fused group: each group step's wall time, between the polls after each step.
class GroupStepTimer : public MemberCallbacks {
 public:
  explicit GroupStepTimer(double seconds) : seconds_(seconds) {}

  bool ShouldStop(std::int64_t step) override {
    const auto now = std::chrono::steady_clock::now();
    if (step > kWarmUpSteps) {
      const double seconds = Seconds(now - last_);
      times_.push_back(seconds);
      measured_ += seconds;
    }
    last_ = now;
    return step > kWarmUpSteps + 5 && measured_ >= seconds_;
  }

  double Median() { return MedianOf(times_); }

 private:
  static constexpr std::int64_t kWarmUpSteps = 5;
  double seconds_;
  double measured_ = 0;
  std::chrono::steady_clock::time_point last_;
  std::vector<double> times_;
};

}  // namespace

double MeasureTrainingSpeed(const std::string& workload_name, const nlohmann::json& workload_args,
                            const HyperParams& params, TrainerOptions options, double seconds) {
  options.checkpoint_dir.clear();
  options.profile_path.clear();
  options.training.profile_steps.clear();
  options.training.log_every_steps = 1;
  options.training.eval_schedule.clear();
  options.training.eval_every_steps = options.max_train_steps;  // only at the end, which the timer stops before
  StepTimer timer(seconds);
  Train(workload_name, workload_args, params, options, timer);
  const double median = timer.Median();
  return median > 0 ? 1.0 / median : 0;
}

double MeasureFusedTrainingSpeed(const std::string& workload_name, const nlohmann::json& workload_args,
                                 const HyperParams& params, TrainerOptions options, std::size_t members,
                                 double seconds) {
  options.training.eval_schedule.clear();
  options.training.eval_every_steps = options.max_train_steps;  // only at the end, which the timer stops before
  options.training.profile_steps.clear();
  std::vector<FusedMember> group;
  for (std::size_t m = 0; m < members; ++m) {
    group.push_back({.params = params, .init_seed = options.init_seed + m, .data_seed = options.data_seed + m});
  }
  GroupStepTimer timer(seconds);
  TrainFusedTrials(workload_name, workload_args, group, options, timer);
  const double median = timer.Median();
  return median > 0 ? static_cast<double>(members) / median : 0;
}

std::vector<std::string> WorkloadNames() { return RegisteredWorkloadNames(); }

}  // namespace dltune
