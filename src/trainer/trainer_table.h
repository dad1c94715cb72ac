// The seam between dltune's torch-free code and its trainer (docs/architecture.md, "The trainer's seam").
//
// The functions that code calls to train, evaluate or measure a workload (dltune/workloads/train.h) and the few of
// src/train's headers free of LibTorch types are defined twice: by dltune_workloads and dltune_train, which train in
// the calling process, and by dltune_trainer (trainer_seam.cc), which loads the trainer module on their first call and
// calls the module's. The module (lib/dltune/trainer.so beside bin/dltune: dltune_workloads, dltune_train and
// LibTorch) hands the program that loads it this table through its one exported function, dltune_trainer_table. The
// `dltune` program links dltune_trainer, so that its commands that do not train never load LibTorch; a program
// linking dltune::dltune trains in its own process. Both sides pass C++ objects and exceptions to each other, so they
// come from one build: TrainerBuild() tells a module of another build, which is refused.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "dltune/version.h"
#include "dltune/workloads/train.h"
#include "train/blas_kernels.h"
#include "train/split_overlap.h"

namespace dltune {

// Raised whenever the table changes.
inline constexpr int kTrainerTableVersion = 1;

// The environment variable naming the trainer module to load instead of the one beside the program.
inline constexpr char kTrainerModuleVariable[] = "DLTUNE_TRAINER_MODULE";

// The module's exported function, extern "C": returns its table, static, valid as long as the module is loaded.
inline constexpr char kTrainerTableFunction[] = "dltune_trainer_table";

// A rendezvous store made by the module (train/rendezvous_store.h), opaque to the program.
struct TrainerRendezvous;

struct TrainerTable {
  int version = 0;         // kTrainerTableVersion
  std::size_t size = 0;    // sizeof(TrainerTable)
  const char* build = "";  // TrainerBuild() of the module
  // dltune/workloads/train.h
  decltype(&Train) train = nullptr;
  decltype(&FusibleWorkload) fusible_workload = nullptr;
  decltype(&TrainFusedTrials) train_fused_trials = nullptr;
  decltype(&EvaluateWorkloadCheckpoint) evaluate_workload_checkpoint = nullptr;
  decltype(&CheckWorkloadParams) check_workload_params = nullptr;
  decltype(&CheckWorkloadSplits) check_workload_splits = nullptr;
  decltype(&PreloadWorkloadData) preload_workload_data = nullptr;
  decltype(&MeasureTrainingSpeed) measure_training_speed = nullptr;
  decltype(&MeasureFusedTrainingSpeed) measure_fused_training_speed = nullptr;
  decltype(&WorkloadNames) workload_names = nullptr;
  // dltune/train/trainer.h
  decltype(&ResolveTrainingDevice) resolve_training_device = nullptr;
  decltype(&DistributedOptionsFromEnvironment) distributed_options_from_environment = nullptr;
  // train/blas_kernels.h
  decltype(&FasterBlasEnvironment) faster_blas_environment = nullptr;
  decltype(&ReexecWithFasterBlasKernels) reexec_with_faster_blas_kernels = nullptr;
  // train/split_overlap.h
  decltype(&SplitOverlapText) split_overlap_text = nullptr;
  // train/rendezvous_store.h: RendezvousStore's constructor, destructor and methods.
  TrainerRendezvous* (*open_rendezvous)(const std::string& host, int port, bool serve,
                                        double timeout_seconds) = nullptr;
  void (*close_rendezvous)(TrainerRendezvous* store) = nullptr;
  void (*rendezvous_set)(TrainerRendezvous& store, const std::string& key, const std::string& value) = nullptr;
  std::optional<std::string> (*rendezvous_try_get)(TrainerRendezvous& store, const std::string& key) = nullptr;
  long long (*rendezvous_add)(TrainerRendezvous& store, const std::string& key, long long amount) = nullptr;
};

// The build both sides must share: dltune's version and commit, and the sizes of the table and of what crosses it most.
inline std::string TrainerBuild() {
  return std::string(kVersion) + " (" + kBuildCommit + "), table " + std::to_string(kTrainerTableVersion) + "/" +
         std::to_string(sizeof(TrainerTable)) + ", options " + std::to_string(sizeof(TrainerOptions)) + ", params " +
         std::to_string(sizeof(HyperParams)) + ", result " + std::to_string(sizeof(TrainResult));
}

}  // namespace dltune

// The trainer module's one exported function (kTrainerTableFunction).
extern "C" const dltune::TrainerTable* dltune_trainer_table();  // NOLINT(readability-identifier-naming): a C symbol
