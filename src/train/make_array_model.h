// The array model (array_model.h) a workload's Fusion describes: its ArrayMlp or ArrayCnn.
#pragma once

#include <memory>
#include <vector>

#include <torch/torch.h>

#include "array_model.h"
#include "dltune/train/workload.h"

namespace dltune {

// How `workload`'s trials fuse (Workload::Fusion); Error naming the workload when it offers no fusion.
ArrayNetwork FusionOf(const Workload& workload);

// The array version of `members`, lone models `workload` built, on `device`: the network its Fusion describes,
// ArrayMlp (array_mlp.h) or ArrayCnn (array_cnn.h). Error when it offers none or its models are not that network.
std::shared_ptr<ArrayModel> MakeArrayModel(const Workload& workload, const std::vector<std::shared_ptr<Model>>& members,
                                           const torch::Device& device = torch::kCPU);

}  // namespace dltune
