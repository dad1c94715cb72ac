#include "run/gpu_placement.h"

#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "dltune/core/error.h"
#include "gpu/gpu_packing_cache.h"
#include "run/parallel_layout.h"
#include "train/torch_build.h"

namespace dltune {
namespace {

std::string GpuList(const std::vector<GpuDevice>& gpus) {
  std::string text;
  for (const auto& gpu : gpus) text += (text.empty() ? "" : ", ") + gpu.Label();
  return text;
}

}  // namespace

GpuPlacement::GpuPlacement(const std::string& gpus_option, int trials_per_gpu,
                           std::function<void(const std::string&)> notice)
    : nvml_(std::make_unique<Nvml>()), trials_per_gpu_(trials_per_gpu), notice_(std::move(notice)) {
  inventory_ = FindGpus(*nvml_, gpus_option.empty() ? "all" : gpus_option);
  if (inventory_.gpus.empty()) return;
  GpuPoolOptions options{.trials_per_gpu = trials_per_gpu};
  options.notice = notice_;
  pool_ = std::make_unique<GpuPool>(inventory_, *nvml_, options);
}

GpuPlacement::~GpuPlacement() = default;

std::string GpuPlacement::Describe() const {
  if (!pool_) return "no GPU" + (inventory_.note.empty() ? "" : ": " + inventory_.note);
  return fmt::format("{} GPU{} ({}), driver {}; trials per GPU: {}", inventory_.gpus.size(),
                     inventory_.gpus.size() == 1 ? "" : "s", GpuList(inventory_.gpus), inventory_.driver_version,
                     trials_per_gpu_ > 0 ? std::to_string(trials_per_gpu_) : "auto, measured");
}

std::vector<std::string> GpuPlacement::Uuids() const {
  std::vector<std::string> uuids;
  for (const GpuDevice& gpu : inventory_.gpus) uuids.push_back(gpu.uuid);
  return uuids;
}

std::set<std::string> GpuPlacement::ModelNames() const {
  std::set<std::string> models;
  for (const GpuDevice& gpu : inventory_.gpus) models.insert(gpu.name);
  return models;
}

std::string GpuPlacement::Models() const {
  if (inventory_.gpus.empty()) return "";
  return fmt::format("{}; driver {}", fmt::join(ModelNames(), ", "), inventory_.driver_version);
}

bool GpuPlacement::Shares() const {
  if (!pool_) return false;
  return std::any_of(inventory_.gpus.begin(), inventory_.gpus.end(),
                     [&](const GpuDevice& gpu) { return pool_->capacity(gpu.uuid) > 1; });
}

void GpuPlacement::UsePackingsMeasuredBefore(const StudySpec& spec, bool mps, std::filesystem::path cache_file) {
  if (!pool_ || trials_per_gpu_ > 0) return;
  nlohmann::json first_trial;
  try {
    first_trial = FirstTrialDescription(spec);
  } catch (const Error&) {
    return;  // trials proposed one at a time: nothing to key a packing by; measured as ever
  }
  if (cache_file.empty()) cache_file = PackingCacheFile();
  const std::string driver = inventory_.driver_version;
  const std::string command = spec.command;
  for (const std::string& model : ModelNames()) {
    if (const auto trials = CachedPacking(cache_file, PackingKey(first_trial, command, model, driver, mps))) {
      pool_->Know(model, *trials, fmt::format("measured before on this machine (cached in {})", cache_file.string()));
    }
  }
  pool_->OnSettled([this, first_trial, command, driver, mps, cache_file](const std::string& model, int trials) {
    try {
      StorePacking(cache_file, PackingKey(first_trial, command, model, driver, mps), trials);
    } catch (const std::exception& e) {
      if (notice_) notice_(fmt::format("GPU packing: not cached: {}", e.what()));
    }
  });
}

int GpuPlacement::GpusFor(const StudySpec& spec) const {
  // A program gets one GPU; the built-in trainer one unless training.device is cpu, its data-parallel ranks one each
  // with device cuda (with auto they train on the CPU, as a trainer whose LibTorch has no CUDA does).
  const bool builtin_on_gpu =
      spec.command.empty() && (spec.training.device == "cuda" ||
                               (spec.training.device != "cpu" && spec.training.processes == 1 && LibTorchHasCuda()));
  const int per_process =
      spec.resources.gpus_per_trial.value_or(pool_ && (!spec.command.empty() || builtin_on_gpu) ? 1 : 0);
  return per_process * std::max(1, spec.training.processes);
}

void GpuPlacement::CheckCanRun(const StudySpec& spec) const {
  const int gpus = GpusFor(spec);
  if (gpus == 0) return;
  if (!pool_) {
    throw Error(fmt::format("study {} asks for {} GPU{} per trial (resources.gpus_per_trial), and this worker has {}",
                            spec.name, gpus, gpus == 1 ? "" : "s", Describe()));
  }
  if (gpus > pool_->usable_gpus()) {
    throw Error(
        fmt::format("study {} asks for {} GPUs per trial (resources.gpus_per_trial x training.processes); "
                    "this worker has {} usable: {}",
                    spec.name, gpus, pool_->usable_gpus(), Describe()));
  }
}

bool GpuPlacement::Fits(const StudySpec& spec, std::int64_t study_id) const {
  const int gpus = GpusFor(spec);
  if (gpus == 0) return true;
  if (!pool_) return false;
  // While a trial of the study waits to run alone, its study's trials start only where a GPU is empty, so that
  // whichever is claimed next can have one.
  const bool alone = std::any_of(alone_.begin(), alone_.end(), [&](const auto& key) { return key.first == study_id; });
  return pool_->CanAcquire(gpus, alone);
}

std::optional<GpuAssignment> GpuPlacement::Assign(const StudySpec& spec, std::int64_t study_id, std::uint64_t number,
                                                  double now) {
  const int gpus = GpusFor(spec);
  if (gpus == 0) return std::nullopt;
  CheckCanRun(spec);
  const bool alone = alone_.contains({study_id, number});
  auto lease = pool_->Acquire(gpus, now, alone);
  if (!lease) throw Error(fmt::format("no free GPU for trial {} of study {}", number, spec.name));
  GpuAssignment assignment{.lease = lease->id};
  for (const auto& uuid : lease->uuids) {
    const auto gpu = std::find_if(inventory_.gpus.begin(), inventory_.gpus.end(),
                                  [&](const GpuDevice& device) { return device.uuid == uuid; });
    if (gpu != inventory_.gpus.end()) assignment.gpus.push_back(*gpu);
  }
  return assignment;
}

std::optional<std::vector<GpuDevice>> GpuPlacement::VisibleTo(const std::optional<GpuAssignment>& assignment) const {
  if (!pool_) return std::nullopt;
  return assignment ? assignment->gpus : std::vector<GpuDevice>{};
}

void GpuPlacement::Started(const GpuAssignment& assignment, const std::vector<pid_t>& pids) {
  for (const pid_t pid : pids) pool_->AddTrialProcess(assignment.lease, pid);
}

void GpuPlacement::Progressed(GpuAssignment& assignment, std::int64_t step, double now) {
  if (step <= 0 || step == assignment.last_step) return;
  // The first step seen ends its start-up: its steps count from there.
  const std::int64_t steps = assignment.last_step < 0 ? 0 : step - assignment.last_step;
  assignment.last_step = step;
  pool_->ReportSteps(assignment.lease, steps, now);
}

void GpuPlacement::Update(double now) {
  if (!pool_) return;
  pool_->Update(now);
  const std::vector<std::string> sentences = pool_->Explain();
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    if (i >= explained_.size() || explained_[i] != sentences[i]) {
      if (notice_) notice_("GPU packing: " + sentences[i]);
    }
  }
  explained_ = sentences;
}

std::optional<GpuMemoryEnding> GpuPlacement::Ended(const GpuAssignment& assignment, const std::vector<pid_t>& pids,
                                                   const std::string& stderr_tail, const std::string& end_reason,
                                                   ActiveTrial& trial, double now) {
  const std::pair<std::int64_t, std::uint64_t> key{trial.record().study_id, trial.number()};
  std::optional<GpuMemoryEnding> ending;
  if (IsOutOfGpuMemory(stderr_tail, end_reason)) {
    const GpuTrialRecord record = pool_->Record(assignment.lease);
    if (pool_->TrialRanOutOfMemory(assignment.lease) == OutOfMemoryVerdict::kRescheduleAlone) {
      alone_.insert(key);
      ending = GpuMemoryEnding{
          .state = TrialState::kStopped,
          .reason =
              fmt::format("out of GPU memory on {} while sharing it with {} other trial{}; it runs again alone",
                          GpuList(assignment.gpus), record.trials_at_once - 1, record.trials_at_once == 2 ? "" : "s")};
    } else {
      alone_.erase(key);
      const double gib = static_cast<double>(assignment.gpus.front().total_memory_bytes) / (1ULL << 30);
      ending = GpuMemoryEnding{
          .state = TrialState::kInfeasible,
          .reason = fmt::format("out of GPU memory on {} ({:.0f} GiB), alone on it", GpuList(assignment.gpus), gib)};
    }
  } else {
    alone_.erase(key);
  }
  pool_->Release(assignment.lease, pids, now);
  trial.SetResources(pool_->Record(assignment.lease).ToJson().dump());
  return ending;
}

}  // namespace dltune
