#include "dltune/workloads/train.h"

#include <torch/torch.h>

#include "dltune/workloads/registry.h"

namespace dltune {

TrainResult Train(const std::string& workload_name, const nlohmann::json& workload_args, const HyperParams& params,
                  const TrainerOptions& options, TrainerCallbacks& callbacks) {
  options.Validate();
  const auto workload = MakeWorkload(workload_name, workload_args);
  return TrainWorkload(*workload, params, options, callbacks);
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

}  // namespace dltune
