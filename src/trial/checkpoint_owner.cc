#include "trial/checkpoint_owner.h"

#include "core/sha256.h"

namespace dltune {
namespace {

// `who` with the SHA-256 of `hyperparameters`: runs that differ only in their hyperparameters differ in their owner.
nlohmann::json OwnerWithHyperparameters(nlohmann::json who, const nlohmann::json& hyperparameters) {
  who["params_sha256"] = Sha256Hex(hyperparameters.dump());
  return who;
}

}  // namespace

nlohmann::json ParamsByNameJson(const std::map<std::string, Value>& params) {
  nlohmann::json by_name = nlohmann::json::object();
  for (const auto& [name, value] : params) by_name[name] = ValueToJson(value);
  return by_name;
}

nlohmann::json TrialCheckpointOwner(const StudyRecord& study, const TrialRecord& trial,
                                    const std::map<std::string, Value>& params) {
  return OwnerWithHyperparameters(
      {{"study", study.name}, {"study_uid", study.uid}, {"trial", trial.number}, {"seed", trial.seed}},
      ParamsByNameJson(params));
}

nlohmann::json TrainByHandCheckpointOwner(const std::string& workload, std::uint64_t seed,
                                          const nlohmann::json& workload_args,
                                          const std::map<std::string, Value>& params) {
  return OwnerWithHyperparameters({{"run", "dltune train"}, {"workload", workload}, {"seed", seed}},
                                  {{"args", workload_args}, {"params", ParamsByNameJson(params)}});
}

}  // namespace dltune
