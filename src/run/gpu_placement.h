// The worker's GPUs as a resource of its trials (docs/parallel-layout.md, "GPUs"): which trials may start (a claim
// waits until the GPUs a trial takes are free), the GPUs each one gets (CUDA_VISIBLE_DEVICES and trial.json), their
// step rates fed to the pool's packing by measurement, and what happens when one ends: a trial that ran out of GPU
// memory while sharing a GPU runs again alone (stopped and put back to pending, never recorded infeasible for it),
// one that ran out alone is infeasible, and every trial's GPUs, peak memory and utilization are recorded with it. A
// machine without GPUs (no NVML, or none visible) places nothing and changes nothing. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dltune/run/study_session.h"
#include "dltune/study/study_spec.h"
#include "gpu/gpu_inventory.h"
#include "gpu/gpu_pool.h"
#include "gpu/nvml.h"

namespace dltune {

// The GPUs one running trial holds.
struct GpuAssignment {
  int lease = 0;
  std::vector<GpuDevice> gpus;  // by rank
  std::int64_t last_step = -1;  // the last step it reported; -1 before its first
};

// How a trial that ran out of GPU memory ends, when the GPUs decide it.
struct GpuMemoryEnding {
  TrialState state = TrialState::kStopped;  // stopped (to run again alone) or infeasible
  std::string reason;
};

class GpuPlacement {
 public:
  // Finds the GPUs (`gpus_option`: --gpus, "all" by default) and pools them with `trials_per_gpu` (0: auto).
  // `notice` is told of GPUs left out and of packing decisions. Throws Error for a --gpus entry that names no GPU.
  GpuPlacement(const std::string& gpus_option, int trials_per_gpu, std::function<void(const std::string&)> notice);
  ~GpuPlacement();

  bool has_gpus() const { return pool_ != nullptr; }
  // The GPUs trials may use, by UUID.
  std::vector<std::string> Uuids() const;
  // The GPUs' model names (each once, sorted) and their driver, e.g. "NVIDIA H100 80GB HBM3; driver 550.54.15"; empty
  // without GPUs.
  std::string Models() const;
  // Whether some GPU takes more than one trial at once now.
  bool Shares() const;
  // With trials per GPU auto: the GPUs start at the packing measured before for `spec`'s trials (with MPS or not) on
  // their model, where one is kept (PackingCacheFile, or `cache_file`), and each packing measured from now on is
  // kept. Call before the first trial is placed.
  void UsePackingsMeasuredBefore(const StudySpec& spec, bool mps, std::filesystem::path cache_file = {});
  // "1 GPU (GPU 0 (NVIDIA H100 80GB HBM3)), driver 550.54.15; trials per GPU: auto, measured", or "no GPU: why".
  std::string Describe() const;
  // GPUs a trial of `spec` takes: each process its resources.gpus_per_trial (auto: 1 for a command: study when there
  // are GPUs, else 0).
  int GpusFor(const StudySpec& spec) const;
  // Throws Error when this worker can never give a trial of `spec` its GPUs (it has none, or fewer than a trial
  // takes), saying so: such a study's trials would wait for ever.
  void CheckCanRun(const StudySpec& spec) const;
  // Whether a trial of `spec` (of study `study_id`) could get its GPUs now (always, for one that takes none).
  bool Fits(const StudySpec& spec, std::int64_t study_id) const;
  // Leases the GPUs of a claimed trial; nullopt for one that takes none. Throws Error when they are not free (Fits
  // said they were) or the trial needs more GPUs than the machine has.
  std::optional<GpuAssignment> Assign(const StudySpec& spec, std::int64_t study_id, std::uint64_t number, double now);
  // The GPUs a trial's process environment names: nullopt on a machine without GPUs (leave the environment alone);
  // empty for a trial that takes none there (hide them).
  std::optional<std::vector<GpuDevice>> VisibleTo(const std::optional<GpuAssignment>& assignment) const;

  void Started(const GpuAssignment& assignment, const std::vector<pid_t>& pids);
  // The trial reached `step` at `now`: its steps, for the packing.
  void Progressed(GpuAssignment& assignment, std::int64_t step, double now);
  // Samples the GPUs, frees slots whose memory is free, measures the packing; tells `notice` when a GPU's capacity
  // changes.
  void Update(double now);

  // The trial's processes ended. Records its GPUs on `trial` (ActiveTrial::SetResources) and releases them; when it
  // ran out of GPU memory (its stderr tail or end reason says so), the ending the GPUs give it: stopped to run again
  // alone (the caller puts it back to pending), or infeasible.
  std::optional<GpuMemoryEnding> Ended(const GpuAssignment& assignment, const std::vector<pid_t>& pids,
                                       const std::string& stderr_tail, const std::string& end_reason,
                                       ActiveTrial& trial, double now);

 private:
  // The GPUs' model names, each once, sorted.
  std::set<std::string> ModelNames() const;

  std::unique_ptr<Nvml> nvml_;
  GpuInventory inventory_;
  std::unique_ptr<GpuPool> pool_;
  int trials_per_gpu_ = 0;
  std::function<void(const std::string&)> notice_;
  std::vector<std::string> explained_;                      // the pool's sentences last told
  std::set<std::pair<std::int64_t, std::uint64_t>> alone_;  // (study id, trial number) to run alone
};

}  // namespace dltune
