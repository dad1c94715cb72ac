#include "dltune/workloads/train.h"

#include "dltune/workloads/registry.h"

namespace dltune {

TrainResult Train(const std::string& workload_name, const nlohmann::json& workload_args, const HyperParams& params,
                  const TrainerOptions& options, TrainerCallbacks& callbacks) {
  options.Validate();
  const auto workload = MakeWorkload(workload_name, workload_args);
  return TrainWorkload(*workload, params, options, callbacks);
}

}  // namespace dltune
