// The worker's view of its GPUs while trials run. Acquire leases a new trial the GPUs it runs on (one per rank; the
// least busy first), each GPU taking up to its capacity of trials at once. Release hands them back once the trial's
// processes have ended, but a GPU's slot is free again only when NVML no longer lists those processes and the memory
// they held is free (a GPU whose memory stays taken past a bound is left out of the pool, with a notice). With
// `trials per GPU: auto` the capacity is measured: it starts at one and doubles (quadruples while each trial kept
// nearly its rate) while the GPU's steps per second (a trial's own, between its step reports while the GPU held that
// many, times as many) rise by more than a few percent and the memory the larger count would need (from NVML, per
// process) fits; otherwise it settles, at the smaller count when the larger one was not worth it. Trials shorter than
// a measurement are measured as they come and go: their start-ups, and a slot's moments empty, are in no interval.
// Start-ups barely use the GPU, so the next count's trials (twice as many, where their memory fits) start up while a
// count is measured, a start-up before the measurement is due to end: they start training about when it ends, not a
// start-up after it; one that starts training before it ends ends it with what it has. A
// packing measured before for the same training on the same kind of GPU (Know) starts the GPU there, settled. A
// trial that runs out of GPU memory while sharing a GPU lowers that GPU's capacity for good and is run again alone;
// alone, it is infeasible. The pool never blocks: the caller passes `now` (seconds, any steady origin) and calls Update
// from its loop. Not thread-safe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/gpu_inventory.h"
#include "gpu/nvml.h"

namespace dltune {

struct GpuPoolOptions {
  int trials_per_gpu = 0;       // trials at once on a GPU; 0: auto, measured
  int max_trials_per_gpu = 16;  // auto never packs more
  double min_gain = 0.05;       // more trials at once must add more than this share of steps per second
  // Where the last count kept each trial at this share of its steps per second at the count before (the GPU far from
  // busy), the next count is four times the last, not twice: a short study spends less of itself ramping up.
  double near_linear = 0.9;
  double memory_margin = 0.9;  // and the memory they would need must stay under this share of the GPU's
  // A measurement of steps per second takes at least this many intervals between step reports per trial at once,
  // from at least as many trials as the GPU takes at once…
  int measure_reports = 3;
  double measure_seconds = 0.5;  // …over at least this long with every slot of the GPU taken
  double sample_interval = 0.5;  // seconds between readings of NVML
  double drain_interval = 0.05;  // and of a GPU an ended trial's memory is not free on yet: the next trial waits
  double release_timeout = 60;   // seconds an ended trial's memory may take to be freed before its GPU is left out
  std::function<void(const std::string&)> notice;  // told of a GPU left out; may be empty
};

// The GPUs leased to one trial.
struct GpuLease {
  int id = 0;
  std::vector<std::string> uuids;  // one per rank: the trial's CUDA_VISIBLE_DEVICES
};

// What to do with a trial that ran out of GPU memory.
enum class OutOfMemoryVerdict {
  kRescheduleAlone,  // it shared a GPU: run it again with Acquire(…, alone = true)
  kInfeasible,       // it ran alone: record it infeasible, "out of GPU memory"
};

// What a trial's GPUs were, for the store.
struct GpuTrialRecord {
  std::string model;                               // "NVIDIA H100 80GB HBM3"
  std::vector<std::string> uuids;                  // its GPUs, by rank
  std::string driver;                              // "550.54.15"
  std::optional<std::uint64_t> peak_memory_bytes;  // of its processes on all its GPUs; nullopt where NVML hid it
  std::optional<double> mean_utilization_percent;  // of its GPUs while it ran; nullopt where never read
  int trials_at_once = 1;                          // the most trials on one of its GPUs at once while it ran
  // {"model", "uuids", "driver", "peak_memory_bytes", "mean_utilization_percent", "trials_at_once"}, nulls where
  // unknown.
  nlohmann::json ToJson() const;
};

// Whether a trial's stderr tail or end reason says it ran out of GPU memory ("CUDA out of memory",
// "torch.OutOfMemoryError", "CUBLAS_STATUS_ALLOC_FAILED", "out of GPU memory", …).
bool IsOutOfGpuMemory(std::string_view stderr_tail, std::string_view reason = "");

class GpuPool {
 public:
  // Pools `inventory`'s GPUs, read through `nvml`, which must outlive the pool.
  GpuPool(const GpuInventory& inventory, Nvml& nvml, GpuPoolOptions options = {});

  // The GPUs of a new trial of `gpus_per_trial` ranks, or nullopt when not that many have a free slot. `alone`: only
  // GPUs no other trial holds, and none joins it there while it runs.
  std::optional<GpuLease> Acquire(int gpus_per_trial, double now, bool alone = false);
  // Whether Acquire(gpus_per_trial, …, alone) would lease GPUs now.
  bool CanAcquire(int gpus_per_trial, bool alone = false) const;
  // The trial's process: it, and the processes of its process group, are the trial's in NVML's lists.
  void AddTrialProcess(int lease, pid_t pid);
  // The trial trained `steps` more steps since its last report (its first report, after its start-up: 0).
  void ReportSteps(int lease, std::int64_t steps, double now);
  // The trial ran out of GPU memory. Call before Release.
  OutOfMemoryVerdict TrialRanOutOfMemory(int lease);
  // The trial's processes (`pids`, and those seen as its own) have ended; its slots free once their memory is free.
  void Release(int lease, const std::vector<pid_t>& pids, double now);
  // Reads NVML (at most every sample_interval), frees released slots, and measures the packing.
  void Update(double now);

  // The trial's GPUs, peak memory and utilization so far (after Release too).
  GpuTrialRecord Record(int lease) const;
  // One sentence per GPU on why it takes the trials at once it does: "GPU 0 (NVIDIA H100 80GB HBM3): 8 trials at
  // once — 16 gave 2% more steps per second than 8; memory 41% at 8".
  std::vector<std::string> Explain() const;
  // A packing measured before for the trials to come on GPUs of `model` (GpuPlacement::UsePackingsMeasuredBefore):
  // such a GPU that has taken no trial yet, in auto mode, takes `trials` at once from the start (no more than the most
  // it packs), settled, saying `why`.
  void Know(const std::string& model, int trials, const std::string& why);
  // Told of each GPU whose measurement settled its packing, or that an out-of-memory lowered: its model and the
  // trials it takes at once.
  void OnSettled(std::function<void(const std::string& model, int trials)> settled) { settled_ = std::move(settled); }

  // Trials at once the GPU takes now; 0 for a GPU left out or not in the pool.
  int capacity(const std::string& uuid) const;
  // GPUs not left out: a trial needing more never starts.
  int usable_gpus() const;

 private:
  struct Measurement {
    double steps_per_second = 0;
    double memory_share = 0;  // of the GPU's memory used at most while measured
  };
  // Steps per second at the GPU's capacity being measured: opened by the first report of the trial that filled the
  // GPU to that capacity (its start-up is over), it counts the steps reported and the seconds while every slot is
  // taken.
  struct Window {
    double opened = 0;
    double last_tick = 0;
    double full_seconds = 0;
    double steps = 0;             // reported by its trials over the intervals between their reports inside it…
    double trial_seconds = 0;     // …which, summed, last this long
    int reports = 0;              // such intervals
    std::set<int> reporters;      // the trials that reported them
    std::uint64_t peak_used = 0;  // the GPU's memory in use at most, at the readings since it opened
    int peak_trials = 0;          // its slots taken at that reading
    bool read = false;            // NVML was read since it opened
  };
  // A released trial whose memory is not free yet.
  struct Draining {
    int lease = 0;
    double since = 0;
    std::optional<std::int64_t> held;          // its processes' memory at the latest reading that listed them
    std::optional<std::int64_t> unattributed;  // used memory no other listed process accounted for, then
  };
  struct Gpu {
    GpuDevice device;
    int capacity = 1;
    int ceiling = 1;  // capacity never rises above
    bool settled = false;
    bool left_out = false;
    std::string why;
    std::map<int, Measurement> measured;  // by trials at once
    std::optional<Window> window;
    int filling_lease = 0;          // the trial that filled the GPU to its capacity; its first report opens
    std::set<int> ahead;            // trials started beyond the capacity being measured, while it is measured
    std::optional<double> startup;  // the shortest start-up of its trials: from their lease to their first report
    std::vector<int> running;       // leases
    std::vector<Draining> draining;
    int alone_lease = 0;
    std::optional<GpuSample> latest;
  };
  struct Lease {
    std::vector<std::size_t> gpus;
    std::set<pid_t> pids;
    std::set<pid_t> groups;
    std::map<std::size_t, int> most_at_once;  // by GPU: the most trials on it at once while this one ran
    std::map<std::size_t, std::optional<std::int64_t>> bytes;         // at the latest reading, by GPU
    std::map<std::size_t, std::optional<std::int64_t>> unattributed;  // at the latest reading, by GPU
    std::map<std::size_t, std::int64_t> peak_bytes_on;
    std::optional<std::int64_t> peak_bytes;  // over the readings that said what its processes held
    double utilization_sum = 0;
    int utilization_readings = 0;
    std::optional<double> last_report;  // when it last reported steps
    double acquired = 0;
  };

  static int Occupied(const Gpu& gpu);
  int Admits(std::size_t g) const;
  double MeasurementLeft(const Gpu& gpu) const;
  bool HasRoom(std::size_t g, bool alone) const;
  std::vector<std::size_t> WithRoom(bool alone) const;
  bool Owns(const Lease& lease, pid_t pid) const;
  void Read(std::size_t g, double now);
  void Attribute(std::size_t g, const GpuSample& sample);
  void UpdatePeaks();
  // Frees the slots of ended trials whose memory `sample` (a fresh reading, or none) shows free.
  void Drain(std::size_t g, double now, const std::optional<GpuSample>& sample);
  bool Freed(Draining& draining, const GpuSample& sample) const;
  void LeaveOut(Gpu& gpu);
  void Tick(Gpu& gpu, double now);
  void Measure(std::size_t g, bool cut_short = false);
  void Restart(Gpu& gpu);
  double ProjectedUse(std::size_t g, int trials) const;
  std::string MemoryAt(const Gpu& gpu, int trials) const;
  std::string Sentence(const Gpu& gpu) const;

  Nvml& nvml_;
  GpuPoolOptions options_;
  std::string driver_;
  std::vector<Gpu> gpus_;
  std::map<int, Lease> leases_;
  int next_lease_ = 1;
  std::optional<double> last_reading_, last_drain_reading_;
  std::function<void(const std::string&, int)> settled_;  // OnSettled's
};

}  // namespace dltune
