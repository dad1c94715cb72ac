#include "make_array_model.h"

#include <optional>

#include <fmt/format.h>

#include "array_cnn.h"
#include "array_mlp.h"
#include "dltune/core/error.h"

namespace dltune {

ArrayNetwork FusionOf(const Workload& workload) {
  std::optional<ArrayNetwork> network = workload.Fusion();
  if (!network) {
    throw Error(
        fmt::format("workload {} cannot train fused: it offers no array model (Workload::Fusion; "
                    "docs/training.md, \"Fused trials\")",
                    workload.name()));
  }
  return *network;
}

std::shared_ptr<ArrayModel> MakeArrayModel(const Workload& workload, const std::vector<std::shared_ptr<Model>>& members,
                                           const torch::Device& device) {
  const ArrayNetwork network = FusionOf(workload);
  try {
    switch (network.kind) {
      case ArrayNetwork::Kind::kMlp: return std::make_shared<ArrayMlp>(members, network.standardize, device);
      case ArrayNetwork::Kind::kCnn: return std::make_shared<ArrayCnn>(members, network.standardize, device);
    }
  } catch (const Error& e) {
    throw Error(fmt::format("workload {}: {}", workload.name(), e.what()));
  }
  throw Error(fmt::format("workload {} describes an array network dltune does not know", workload.name()));
}

}  // namespace dltune
