// The torch-free side of the trainer's seam (trainer_table.h): the training functions, defined by loading the trainer
// module on their first call and calling its.
#include <dlfcn.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "dltune/core/error.h"
#include "train/rendezvous_store.h"
#include "train/torch_build.h"
#include "trainer/trainer_table.h"

namespace dltune {
namespace {

#ifdef DLTUNE_WITHOUT_TRAINER

constexpr bool kWithTrainer = false;

// Built without the trainer: what trains says so, naming the workload where known.
const TrainerTable& Trainer(const std::string& workload = "") {
  throw Error(fmt::format(
      "{}this dltune was built without its trainer (DLTUNE_TRAINER=OFF): built-in workloads and workloads of one's "
      "own need a dltune built with it; studies whose trials are command: programs do not (docs/building.md)",
      workload.empty() ? "" : fmt::format("workload '{}' cannot train: ", workload)));
}

#else

constexpr bool kWithTrainer = true;

// The module's path from the directory of the program (bin/): lib/dltune/trainer.so as installed, and in the build
// tree alike (CMake gives it).
#ifndef DLTUNE_TRAINER_FROM_BIN
#define DLTUNE_TRAINER_FROM_BIN "../lib/dltune/trainer.so"
#endif

std::filesystem::path ModulePath() {
  const char* chosen = std::getenv(kTrainerModuleVariable);
  if (chosen != nullptr && *chosen != '\0') return chosen;
  std::error_code error;
  const std::filesystem::path program = std::filesystem::read_symlink("/proc/self/exe", error);
  return (program.parent_path() / DLTUNE_TRAINER_FROM_BIN).lexically_normal();
}

const TrainerTable* LoadTrainer() {
  const std::filesystem::path path = ModulePath();
  const auto refused = [&path](const std::string& why) {
    return Error(fmt::format("cannot load dltune's trainer {}: {}; built-in workloads need it, command: programs do "
                             "not (reinstall dltune, or set {} to the module's path)",
                             path.string(), why, kTrainerModuleVariable),
                 ErrorKind::kIo);
  };
  // RTLD_GLOBAL as if the program linked LibTorch: the BLAS LibTorch loads is looked up by name in the process
  // (train/blas_kernels.h).
  void* module = ::dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (module == nullptr) throw refused(::dlerror());
  using TableFunction = const TrainerTable* (*)();
  auto* get = reinterpret_cast<TableFunction>(::dlsym(module, kTrainerTableFunction));
  if (get == nullptr) throw refused(fmt::format("it has no {}", kTrainerTableFunction));
  const TrainerTable* table = get();
  const std::string build = table != nullptr ? table->build : "";
  if (table == nullptr || table->version != kTrainerTableVersion || table->size != sizeof(TrainerTable) ||
      build != TrainerBuild()) {
    throw refused(fmt::format("it is of another build of dltune ({}; this program: {})", build, TrainerBuild()));
  }
  return table;  // never unloaded: objects it made (exceptions, stores) may outlive any call
}

// The module's table, loaded on the first call; throws Error when it cannot be loaded (a later call tries again).
const TrainerTable& Trainer(const std::string& /*workload*/ = "") {
  static const TrainerTable* const kTable = LoadTrainer();
  return *kTable;
}

#endif

}  // namespace

TrainResult Train(const std::string& workload_name, const nlohmann::json& workload_args, const HyperParams& params,
                  const TrainerOptions& options, TrainerCallbacks& callbacks) {
  return Trainer(workload_name).train(workload_name, workload_args, params, options, callbacks);
}

// No workload (a command: study's) and no trainer register none: nothing to load to say that it cannot fuse.
bool FusibleWorkload(const std::string& workload_name, const nlohmann::json& workload_args) {
  if (workload_name.empty() || !kWithTrainer) return false;
  return Trainer(workload_name).fusible_workload(workload_name, workload_args);
}

std::vector<TrainResult> TrainFusedTrials(const std::string& workload_name, const nlohmann::json& workload_args,
                                          const std::vector<FusedMember>& members, const TrainerOptions& shared,
                                          MemberCallbacks& callbacks) {
  return Trainer(workload_name).train_fused_trials(workload_name, workload_args, members, shared, callbacks);
}

CheckpointMetrics EvaluateWorkloadCheckpoint(const std::string& workload_name, const nlohmann::json& workload_args,
                                             const HyperParams& params, const TrainerOptions& options,
                                             const std::string& checkpoint_path, const std::string& split,
                                             const std::string& export_path) {
  return Trainer(workload_name)
      .evaluate_workload_checkpoint(workload_name, workload_args, params, options, checkpoint_path, split, export_path);
}

void CheckWorkloadParams(const std::string& workload_name, const nlohmann::json& workload_args,
                         const HyperParams& params, std::int64_t max_train_steps) {
  Trainer(workload_name).check_workload_params(workload_name, workload_args, params, max_train_steps);
}

SplitOverlap CheckWorkloadSplits(const std::string& workload_name, const nlohmann::json& workload_args) {
  return Trainer(workload_name).check_workload_splits(workload_name, workload_args);
}

void PreloadWorkloadData(const std::string& workload_name, const nlohmann::json& workload_args) {
  Trainer(workload_name).preload_workload_data(workload_name, workload_args);
}

double MeasureTrainingSpeed(const std::string& workload_name, const nlohmann::json& workload_args,
                            const HyperParams& params, TrainerOptions options, double seconds) {
  return Trainer(workload_name)
      .measure_training_speed(workload_name, workload_args, params, std::move(options), seconds);
}

double MeasureFusedTrainingSpeed(const std::string& workload_name, const nlohmann::json& workload_args,
                                 const HyperParams& params, TrainerOptions options, std::size_t members,
                                 double seconds) {
  return Trainer(workload_name)
      .measure_fused_training_speed(workload_name, workload_args, params, std::move(options), members, seconds);
}

std::vector<std::string> WorkloadNames() { return Trainer().workload_names(); }

std::string ResolveTrainingDevice(const TrainingSettings& training) {
  return Trainer().resolve_training_device(training);
}

DistributedOptions DistributedOptionsFromEnvironment(const TrainingSettings& training) {
  return Trainer().distributed_options_from_environment(training);
}

// Known when dltune was built, without loading LibTorch (CMake tells whether it has CUDA). This side of the seam
// answers for itself, as train's torch_build.cc does for a program that links the trainer: a dltune without its
// trainer compiles nothing of src/train.
bool LibTorchHasCuda() {
#ifdef DLTUNE_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

// Without a trainer no trial trains in a process of dltune's: nothing to choose, nothing to restart for.
std::optional<std::pair<std::string, std::string>> FasterBlasEnvironment() {
  if constexpr (!kWithTrainer) return std::nullopt;
  return Trainer().faster_blas_environment();
}

// Called before the command line is parsed (process_setup.h): a trainer that cannot be loaded is for the command that
// trains to report, as it reports its other errors.
void ReexecWithFasterBlasKernels(char** argv) {
  const TrainerTable* trainer = nullptr;
  try {
    trainer = &Trainer();
  } catch (const Error&) {
    return;
  }
  trainer->reexec_with_faster_blas_kernels(argv);
}

std::string SplitOverlapText(const SplitOverlap& overlap) { return Trainer().split_overlap_text(overlap); }

struct RendezvousStore::Impl {
  const TrainerTable* trainer = nullptr;
  TrainerRendezvous* store = nullptr;
  ~Impl() {
    if (store != nullptr) trainer->close_rendezvous(store);
  }
};

RendezvousStore::RendezvousStore(const std::string& host, int port, bool serve, double timeout_seconds)
    : impl_(std::make_unique<Impl>()) {
  impl_->trainer = &Trainer();
  impl_->store = impl_->trainer->open_rendezvous(host, port, serve, timeout_seconds);
}

RendezvousStore::~RendezvousStore() = default;

void RendezvousStore::Set(const std::string& key, const std::string& value) {
  impl_->trainer->rendezvous_set(*impl_->store, key, value);
}

std::optional<std::string> RendezvousStore::TryGet(const std::string& key) {
  return impl_->trainer->rendezvous_try_get(*impl_->store, key);
}

long long RendezvousStore::Add(const std::string& key, long long amount) {
  return impl_->trainer->rendezvous_add(*impl_->store, key, amount);
}

}  // namespace dltune
