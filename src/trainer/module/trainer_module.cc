// The trainer module (lib/dltune/trainer.so): dltune_workloads and dltune_train, which train in this module, behind
// the table of trainer/trainer_table.h. Only dltune_trainer_table is exported; everything else the module holds is
// hidden, so its copies of dltune's torch-free code never meet the program's.
#include <optional>
#include <string>

#include "train/rendezvous_store.h"
#include "trainer/trainer_table.h"

namespace dltune {

struct TrainerRendezvous {
  RendezvousStore store;
};

namespace {

TrainerRendezvous* OpenRendezvous(const std::string& host, int port, bool serve, double timeout_seconds) {
  return new TrainerRendezvous{RendezvousStore(host, port, serve, timeout_seconds)};
}

void CloseRendezvous(TrainerRendezvous* store) { delete store; }

void RendezvousSet(TrainerRendezvous& store, const std::string& key, const std::string& value) {
  store.store.Set(key, value);
}

std::optional<std::string> RendezvousTryGet(TrainerRendezvous& store, const std::string& key) {
  return store.store.TryGet(key);
}

long long RendezvousAdd(TrainerRendezvous& store, const std::string& key, long long amount) {
  return store.store.Add(key, amount);
}

}  // namespace
}  // namespace dltune

extern "C" __attribute__((visibility("default"))) const dltune::TrainerTable* dltune_trainer_table() {
  static const std::string kBuild = dltune::TrainerBuild();
  static const dltune::TrainerTable kTable{
      .version = dltune::kTrainerTableVersion,
      .size = sizeof(dltune::TrainerTable),
      .build = kBuild.c_str(),
      .train = &dltune::Train,
      .fusible_workload = &dltune::FusibleWorkload,
      .train_fused_trials = &dltune::TrainFusedTrials,
      .evaluate_workload_checkpoint = &dltune::EvaluateWorkloadCheckpoint,
      .check_workload_params = &dltune::CheckWorkloadParams,
      .check_workload_splits = &dltune::CheckWorkloadSplits,
      .preload_workload_data = &dltune::PreloadWorkloadData,
      .measure_training_speed = &dltune::MeasureTrainingSpeed,
      .measure_fused_training_speed = &dltune::MeasureFusedTrainingSpeed,
      .workload_names = &dltune::WorkloadNames,
      .resolve_training_device = &dltune::ResolveTrainingDevice,
      .distributed_options_from_environment = &dltune::DistributedOptionsFromEnvironment,
      .faster_blas_environment = &dltune::FasterBlasEnvironment,
      .reexec_with_faster_blas_kernels = &dltune::ReexecWithFasterBlasKernels,
      .split_overlap_text = &dltune::SplitOverlapText,
      .open_rendezvous = &dltune::OpenRendezvous,
      .close_rendezvous = &dltune::CloseRendezvous,
      .rendezvous_set = &dltune::RendezvousSet,
      .rendezvous_try_get = &dltune::RendezvousTryGet,
      .rendezvous_add = &dltune::RendezvousAdd,
  };
  return &kTable;
}
