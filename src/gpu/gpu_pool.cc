#include "gpu/gpu_pool.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <limits>

namespace dltune {
namespace {

// Memory a released trial may leave taken without its GPU counting as not freed (the driver's own bookkeeping).
constexpr std::int64_t kFreedTolerance = 64LL << 20;
// The next count's trials start up when the measurement is due to end within this share of a start-up: a trial
// that starts training before it ends cuts it short, and reports come slower than their pace so far as trials end.
constexpr double kAheadShare = 0.5;

bool ContainsIgnoringCase(std::string_view text, std::string_view needle) {
  const auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const auto found = std::search(text.begin(), text.end(), needle.begin(), needle.end(),
                                 [&](char a, char b) { return lower(a) == lower(b); });
  return found != text.end();
}

std::string Trials(int count) { return fmt::format("{} trial{}", count, count == 1 ? "" : "s"); }

// "12% more", "3% fewer".
std::string Change(double gain) {
  return fmt::format("{:.0f}% {}", std::abs(gain) * 100, gain >= 0 ? "more" : "fewer");
}

void Add(std::optional<std::int64_t>& sum, const std::optional<std::uint64_t>& bytes, bool subtract = false) {
  if (!sum || !bytes) {
    sum.reset();
    return;
  }
  *sum += subtract ? -static_cast<std::int64_t>(*bytes) : static_cast<std::int64_t>(*bytes);
}

}  // namespace

nlohmann::json GpuTrialRecord::ToJson() const {
  nlohmann::json json = {{"model", model}, {"uuids", uuids}, {"driver", driver}};
  json["peak_memory_bytes"] = peak_memory_bytes ? nlohmann::json(*peak_memory_bytes) : nlohmann::json();
  json["mean_utilization_percent"] =
      mean_utilization_percent ? nlohmann::json(*mean_utilization_percent) : nlohmann::json();
  json["trials_at_once"] = trials_at_once;
  return json;
}

bool IsOutOfGpuMemory(std::string_view stderr_tail, std::string_view reason) {
  constexpr std::array<std::string_view, 8> kSigns = {
      "CUDA out of memory",         "OutOfMemoryError",
      "CUBLAS_STATUS_ALLOC_FAILED", "CUDNN_STATUS_ALLOC_FAILED",
      "CUDA_ERROR_OUT_OF_MEMORY",   "cudaErrorMemoryAllocation",
      "out of GPU memory",          "RESOURCE_EXHAUSTED: Out of memory",
  };
  return std::any_of(kSigns.begin(), kSigns.end(), [&](std::string_view sign) {
    return ContainsIgnoringCase(stderr_tail, sign) || ContainsIgnoringCase(reason, sign);
  });
}

GpuPool::GpuPool(const GpuInventory& inventory, Nvml& nvml, GpuPoolOptions options)
    : nvml_(nvml), options_(std::move(options)), driver_(inventory.driver_version) {
  const bool fixed = options_.trials_per_gpu > 0;
  for (const GpuDevice& device : inventory.gpus) {
    Gpu gpu{.device = device};
    gpu.capacity = fixed ? options_.trials_per_gpu : 1;
    gpu.ceiling = fixed ? options_.trials_per_gpu : std::max(1, options_.max_trials_per_gpu);
    gpu.settled = fixed;
    gpu.why = fixed ? fmt::format("trials per GPU: {}", options_.trials_per_gpu) : "measuring";
    gpus_.push_back(std::move(gpu));
  }
}

// Its slots taken: by running trials and by ended ones whose memory is not free yet.
int GpuPool::Occupied(const Gpu& gpu) { return static_cast<int>(gpu.running.size() + gpu.draining.size()); }

// The trials the GPU takes at once now: its capacity; within a start-up of its measurement's end, also the next
// count's trials, which start up meanwhile (twice as many, or as many as the memory the trials hold leaves room for).
int GpuPool::Admits(std::size_t g) const {
  const Gpu& gpu = gpus_[g];
  if (options_.trials_per_gpu > 0 || gpu.settled || !gpu.window || !gpu.window->read || !gpu.startup ||
      MeasurementLeft(gpu) > kAheadShare * *gpu.startup) {
    return gpu.capacity;
  }
  int next = std::min(2 * gpu.capacity, gpu.ceiling);
  const double total = static_cast<double>(gpu.device.total_memory_bytes);
  while (next > gpu.capacity && ProjectedUse(g, next) > options_.memory_margin * total) --next;
  return next;
}

// Seconds until the measurement at the GPU's capacity has its time and its reports, at the pace of its reports so far.
double GpuPool::MeasurementLeft(const Gpu& gpu) const {
  const Window& window = *gpu.window;
  const int reports = options_.measure_reports * gpu.capacity;
  double left = std::max(0.0, options_.measure_seconds - window.full_seconds);
  if (window.reports < reports) {
    if (window.reports == 0) return std::numeric_limits<double>::infinity();
    left = std::max(left, (window.last_tick - window.opened) / window.reports * (reports - window.reports));
  }
  return left;
}

bool GpuPool::HasRoom(std::size_t g, bool alone) const {
  const Gpu& gpu = gpus_[g];
  if (gpu.left_out || gpu.alone_lease != 0) return false;
  return alone ? Occupied(gpu) == 0 : Occupied(gpu) < Admits(g);
}

std::vector<std::size_t> GpuPool::WithRoom(bool alone) const {
  std::vector<std::size_t> free;
  for (std::size_t g = 0; g < gpus_.size(); ++g) {
    if (HasRoom(g, alone)) free.push_back(g);
  }
  return free;
}

bool GpuPool::CanAcquire(int gpus_per_trial, bool alone) const {
  return WithRoom(alone).size() >= static_cast<std::size_t>(std::max(1, gpus_per_trial));
}

std::optional<GpuLease> GpuPool::Acquire(int gpus_per_trial, double now, bool alone) {
  std::vector<std::size_t> free = WithRoom(alone);
  const auto wanted = static_cast<std::size_t>(std::max(1, gpus_per_trial));
  if (free.size() < wanted) return std::nullopt;
  // The least busy first, so that trials spread over the GPUs before they share one.
  std::stable_sort(free.begin(), free.end(),
                   [&](std::size_t a, std::size_t b) { return Occupied(gpus_[a]) < Occupied(gpus_[b]); });
  free.resize(wanted);
  const int id = next_lease_++;
  GpuLease lease{.id = id};
  leases_[id].gpus = free;
  leases_[id].acquired = now;
  for (const std::size_t g : free) {
    Gpu& gpu = gpus_[g];
    Tick(gpu, now);  // the time until now, at the trials before this one
    if (!alone && gpu.window && Occupied(gpu) >= gpu.capacity) gpu.ahead.insert(id);
    gpu.running.push_back(id);
    if (alone) gpu.alone_lease = id;
    if (!gpu.window && gpu.filling_lease == 0 && Occupied(gpu) >= gpu.capacity) gpu.filling_lease = id;
    for (const int other : gpu.running) {
      int& most = leases_.at(other).most_at_once[g];
      most = std::max(most, static_cast<int>(gpu.running.size()));
    }
    lease.uuids.push_back(gpu.device.uuid);
  }
  return lease;
}

void GpuPool::AddTrialProcess(int lease, pid_t pid) {
  Lease& state = leases_.at(lease);
  state.pids.insert(pid);
  state.groups.insert(pid);  // a trial leads a process group of its own (TrialProcess)
}

void GpuPool::ReportSteps(int lease, std::int64_t steps, double now) {
  Lease& state = leases_.at(lease);
  for (const std::size_t g : state.gpus) {
    Gpu& gpu = gpus_[g];
    if (options_.trials_per_gpu > 0 || gpu.settled || gpu.left_out) continue;
    if (!state.last_report) gpu.startup = std::min(gpu.startup.value_or(now - state.acquired), now - state.acquired);
    // A trial started ahead begins training: the GPU no longer holds the count being measured.
    if (gpu.window && gpu.ahead.contains(lease) && !state.last_report) {
      Tick(gpu, now);
      Measure(g, /*cut_short=*/true);
      if (gpu.settled) continue;
    }
    if (!gpu.window) {
      if (gpu.filling_lease == lease) {
        gpu.window = Window{.opened = now, .last_tick = now};
        Read(g, now);  // what the trials hold once started up: how many more fit, to start them up meanwhile
      }
    } else if (state.last_report && *state.last_report >= gpu.window->opened && steps > 0) {
      // The trial's own rate over the interval since its last report: its start-up, and the moments a slot stands
      // empty between one trial and the next, are in no interval.
      gpu.window->steps += static_cast<double>(steps);
      gpu.window->trial_seconds += now - *state.last_report;
      ++gpu.window->reports;
      gpu.window->reporters.insert(lease);
    }
  }
  state.last_report = now;
}

OutOfMemoryVerdict GpuPool::TrialRanOutOfMemory(int lease) {
  bool shared = false;
  for (const auto& [g, most] : leases_.at(lease).most_at_once) {
    if (most < 2) continue;
    shared = true;
    Gpu& gpu = gpus_[g];
    gpu.ceiling = std::min(gpu.ceiling, most - 1);
    gpu.capacity = std::min(gpu.capacity, gpu.ceiling);
    gpu.settled = true;
    Restart(gpu);
    gpu.why = fmt::format("a trial ran out of GPU memory with {} at once", most);
    if (settled_ && options_.trials_per_gpu <= 0) settled_(gpu.device.name, gpu.capacity);
  }
  return shared ? OutOfMemoryVerdict::kRescheduleAlone : OutOfMemoryVerdict::kInfeasible;
}

void GpuPool::Release(int lease, const std::vector<pid_t>& pids, double now) {
  Lease& state = leases_.at(lease);
  state.pids.insert(pids.begin(), pids.end());
  for (const std::size_t g : state.gpus) {
    Gpu& gpu = gpus_[g];
    Tick(gpu, now);
    std::erase(gpu.running, lease);
    gpu.ahead.erase(lease);
    if (gpu.alone_lease == lease) gpu.alone_lease = 0;
    if (gpu.filling_lease == lease && !gpu.window) gpu.filling_lease = 0;  // it ended before it reported
    gpu.draining.push_back(
        {.lease = lease, .since = now, .held = state.bytes[g], .unattributed = state.unattributed[g]});
    Read(g, now);  // most trials' memory is free by the time their processes have ended
  }
}

void GpuPool::Update(double now) {
  for (Gpu& gpu : gpus_) Tick(gpu, now);
  if (!last_reading_ || now - *last_reading_ >= options_.sample_interval) {
    last_reading_ = last_drain_reading_ = now;
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      if (!gpus_[g].running.empty() || !gpus_[g].draining.empty()) Read(g, now);
    }
    UpdatePeaks();
  } else if (!last_drain_reading_ || now - *last_drain_reading_ >= options_.drain_interval) {
    last_drain_reading_ = now;
    for (std::size_t g = 0; g < gpus_.size(); ++g) {
      if (!gpus_[g].draining.empty()) Drain(g, now, nvml_.Sample(gpus_[g].device.uuid));
    }
  }
  // At every call, not only at a reading: a measurement ends as soon as it is long enough.
  for (std::size_t g = 0; g < gpus_.size(); ++g) Measure(g);
}

bool GpuPool::Owns(const Lease& lease, pid_t pid) const {
  if (lease.pids.contains(pid)) return true;
  const pid_t group = ::getpgid(pid);
  return group > 0 && lease.groups.contains(group);
}

void GpuPool::Read(std::size_t g, double now) {
  Gpu& gpu = gpus_[g];
  auto sample = nvml_.Sample(gpu.device.uuid);
  if (sample) {
    if (gpu.window) {
      if (sample->used_bytes >= gpu.window->peak_used) {
        gpu.window->peak_used = sample->used_bytes;
        gpu.window->peak_trials = Occupied(gpu);
      }
      gpu.window->read = true;
    }
    Attribute(g, *sample);
  }
  Drain(g, now, sample);
  if (sample) gpu.latest = std::move(sample);
}

// Which listed processes are which running trial's: their memory, the rest's, and the GPU's utilization.
void GpuPool::Attribute(std::size_t g, const GpuSample& sample) {
  for (const int id : gpus_[g].running) {
    Lease& lease = leases_.at(id);
    std::optional<std::int64_t> own, others = static_cast<std::int64_t>(sample.used_bytes);
    if (sample.processes_known) own = 0;
    for (const GpuProcess& process : sample.processes) {
      if (Owns(lease, process.pid)) {
        lease.pids.insert(process.pid);
        Add(own, process.used_bytes);
      } else {
        Add(others, process.used_bytes, /*subtract=*/true);
      }
    }
    lease.bytes[g] = own;
    lease.unattributed[g] = sample.processes_known ? others : std::nullopt;
    if (own) lease.peak_bytes_on[g] = std::max(lease.peak_bytes_on[g], *own);
    if (sample.utilization_percent) {
      lease.utilization_sum += *sample.utilization_percent;
      ++lease.utilization_readings;
    }
  }
}

// A running trial's peak memory: the most its processes held on all its GPUs at one reading.
void GpuPool::UpdatePeaks() {
  for (Gpu& gpu : gpus_) {
    for (const int id : gpu.running) {
      Lease& lease = leases_.at(id);
      std::optional<std::int64_t> total = 0;
      for (const std::size_t g : lease.gpus) {
        const auto bytes = lease.bytes.find(g);
        if (bytes == lease.bytes.end() || !bytes->second) {
          total.reset();
          break;
        }
        *total += *bytes->second;
      }
      if (total && (!lease.peak_bytes || *total > *lease.peak_bytes)) lease.peak_bytes = total;
    }
  }
}

void GpuPool::Drain(std::size_t g, double now, const std::optional<GpuSample>& sample) {
  Gpu& gpu = gpus_[g];
  std::vector<Draining> waiting;
  for (Draining& draining : gpu.draining) {
    if (sample && Freed(draining, *sample)) continue;
    if (now - draining.since < options_.release_timeout) {
      waiting.push_back(draining);
    } else {
      LeaveOut(gpu);
    }
  }
  gpu.draining = std::move(waiting);
}

// Whether a released trial's memory is free at `sample`: none of its processes is listed, and the memory no listed
// process accounts for fell by what they held. Without per-process figures, that they are gone is all one can tell.
bool GpuPool::Freed(Draining& draining, const GpuSample& sample) const {
  const Lease& lease = leases_.at(draining.lease);
  bool listed = false;
  std::optional<std::int64_t> held = 0, unattributed = static_cast<std::int64_t>(sample.used_bytes);
  for (const GpuProcess& process : sample.processes) {
    const bool own = Owns(lease, process.pid);
    listed = listed || own;
    Add(own ? held : unattributed, process.used_bytes, /*subtract=*/!own);
  }
  if (listed) {
    draining.held = held;
    draining.unattributed = unattributed;
    return false;
  }
  if (!sample.processes_known || !draining.held || !draining.unattributed || !unattributed) return true;
  return *unattributed <= *draining.unattributed - *draining.held + kFreedTolerance;
}

void GpuPool::LeaveOut(Gpu& gpu) {
  if (gpu.left_out) return;
  gpu.left_out = true;
  gpu.why = fmt::format("the memory of an ended trial was not freed within {:g} s", options_.release_timeout);
  if (options_.notice) options_.notice(fmt::format("{}: {}; no more trials run on it", gpu.device.Label(), gpu.why));
}

// The memory `trials` at once would use: the largest trial's peak times `trials`, plus what is not the trials'; or,
// where NVML does not say what each process holds, the peak used so far scaled up.
double GpuPool::ProjectedUse(std::size_t g, int trials) const {
  const Gpu& gpu = gpus_[g];
  std::int64_t per_trial = 0;
  auto others = static_cast<std::int64_t>(gpu.latest ? gpu.latest->used_bytes : 0);
  bool known = gpu.latest.has_value();
  for (const int id : gpu.running) {
    const Lease& lease = leases_.at(id);
    const auto peak = lease.peak_bytes_on.find(g);
    if (peak != lease.peak_bytes_on.end()) per_trial = std::max(per_trial, peak->second);
    const auto bytes = lease.bytes.find(g);
    known = known && bytes != lease.bytes.end() && bytes->second.has_value();
    if (known) others -= bytes->second.value_or(0);
  }
  if (known && per_trial > 0) return static_cast<double>(per_trial) * trials + static_cast<double>(others);
  // The peak so far, at the slots then taken; or the latest reading, at the slots taken now.
  const std::uint64_t used = gpu.window ? gpu.window->peak_used : (gpu.latest ? gpu.latest->used_bytes : 0);
  const int then = gpu.window ? gpu.window->peak_trials : Occupied(gpu);
  return static_cast<double>(used) * trials / std::max(1, then);
}

// The measurement's clock: the seconds since its last tick count when every slot of the GPU was taken.
void GpuPool::Tick(Gpu& gpu, double now) {
  if (!gpu.window) return;
  if (Occupied(gpu) >= gpu.capacity) gpu.window->full_seconds += std::max(0.0, now - gpu.window->last_tick);
  gpu.window->last_tick = now;
}

// A new measurement, at the GPU's capacity now: opened by the first report of the trial that next fills the GPU, or
// of the latest one where trials started ahead fill it already.
void GpuPool::Restart(Gpu& gpu) {
  gpu.window.reset();
  gpu.filling_lease = 0;
  gpu.ahead.clear();
  if (gpu.settled || gpu.running.empty() || Occupied(gpu) < gpu.capacity) return;
  gpu.filling_lease = gpu.running.back();
  const std::optional<double> reported = leases_.at(gpu.filling_lease).last_report;
  if (reported) gpu.window = Window{.opened = *reported, .last_tick = *reported};
}

// Once an auto GPU has been measured long enough at its capacity: twice as many trials at once (or as many as fit in
// its memory), or settle. `cut_short`: a trial started ahead begins training, and the measurement ends now, with
// what it has where that is a report from each trial, else unmeasured, at the trials it has now.
void GpuPool::Measure(std::size_t g, bool cut_short) {
  Gpu& gpu = gpus_[g];
  if (options_.trials_per_gpu > 0 || gpu.settled || gpu.left_out || !gpu.window) return;
  const Window& window = *gpu.window;
  const bool some = window.read && std::ssize(window.reporters) >= gpu.capacity && window.trial_seconds > 0;
  if (cut_short && !some) {
    gpu.capacity = std::clamp(Occupied(gpu), gpu.capacity, gpu.ceiling);
    Restart(gpu);
    return;
  }
  if (!cut_short && (!some || window.reports < options_.measure_reports * gpu.capacity ||
                     window.full_seconds < options_.measure_seconds)) {
    return;
  }
  const int trials = gpu.capacity;
  // A trial's steps per second while the GPU held this many, times as many.
  const double steps_per_second = trials * window.steps / window.trial_seconds;
  const double total = static_cast<double>(gpu.device.total_memory_bytes);
  gpu.measured[trials] = {.steps_per_second = steps_per_second,
                          .memory_share = total > 0 ? static_cast<double>(window.peak_used) / total : 0};
  const auto settle = [&](int capacity, std::string why) {
    gpu.capacity = capacity;
    gpu.settled = true;
    gpu.why = std::move(why);
    Restart(gpu);
    if (settled_) settled_(gpu.device.name, capacity);
  };
  double gain = 0;
  int fewer = 0;
  if (auto below = gpu.measured.lower_bound(trials); below != gpu.measured.begin()) {
    --below;
    fewer = below->first;
    const double before = below->second.steps_per_second;
    gain = before > 0 ? steps_per_second / before - 1 : (steps_per_second > 0 ? 1 : 0);
    if (gain <= options_.min_gain) {
      settle(fewer,
             fmt::format("{} gave {} steps per second than {}{}", trials, Change(gain), fewer, MemoryAt(gpu, fewer)));
      return;
    }
  }
  if (trials >= gpu.ceiling) {
    settle(trials, fmt::format("the most it packs{}", MemoryAt(gpu, trials)));
    return;
  }
  const bool near_linear =
      fewer > 0 && 1 + gain > options_.near_linear * static_cast<double>(trials) / static_cast<double>(fewer);
  int more = std::min((near_linear ? 4 : 2) * trials, gpu.ceiling);
  while (more > trials && ProjectedUse(g, more) > options_.memory_margin * total) --more;
  if (more == trials) {
    settle(trials, fmt::format("{} would need about {:.0f}% of its memory{}", trials + 1,
                               100 * ProjectedUse(g, trials + 1) / total, MemoryAt(gpu, trials)));
    return;
  }
  gpu.capacity = more;
  gpu.why = fewer == 0 ? "measuring"
                       : fmt::format("measuring: {} gave {} steps per second than {}", trials, Change(gain), fewer);
  Restart(gpu);
}

std::string GpuPool::MemoryAt(const Gpu& gpu, int trials) const {
  const auto measured = gpu.measured.find(trials);
  if (measured == gpu.measured.end()) return "";
  return fmt::format("; memory {:.0f}% at {}", measured->second.memory_share * 100, trials);
}

GpuTrialRecord GpuPool::Record(int lease) const {
  const Lease& state = leases_.at(lease);
  GpuTrialRecord record{.driver = driver_};
  for (const std::size_t g : state.gpus) record.uuids.push_back(gpus_[g].device.uuid);
  if (!state.gpus.empty()) record.model = gpus_[state.gpus.front()].device.name;
  if (state.peak_bytes) record.peak_memory_bytes = static_cast<std::uint64_t>(*state.peak_bytes);
  if (state.utilization_readings > 0) {
    record.mean_utilization_percent = state.utilization_sum / state.utilization_readings;
  }
  for (const auto& [gpu, most] : state.most_at_once) record.trials_at_once = std::max(record.trials_at_once, most);
  return record;
}

std::string GpuPool::Sentence(const Gpu& gpu) const {
  if (gpu.left_out) return fmt::format("{}: left out — {}", gpu.device.Label(), gpu.why);
  const bool so_far = options_.trials_per_gpu <= 0 && !gpu.settled;
  return fmt::format("{}: {} at once{} — {}", gpu.device.Label(), Trials(gpu.capacity), so_far ? " so far" : "",
                     gpu.why);
}

std::vector<std::string> GpuPool::Explain() const {
  std::vector<std::string> sentences;
  for (const Gpu& gpu : gpus_) sentences.push_back(Sentence(gpu));
  return sentences;
}

void GpuPool::Know(const std::string& model, int trials, const std::string& why) {
  if (options_.trials_per_gpu > 0) return;
  for (Gpu& gpu : gpus_) {
    if (gpu.device.name != model || gpu.settled || gpu.left_out || !gpu.running.empty() || !gpu.draining.empty() ||
        !gpu.measured.empty() || gpu.window) {
      continue;
    }
    gpu.capacity = std::clamp(trials, 1, gpu.ceiling);
    gpu.settled = true;
    gpu.why = why;
  }
}

int GpuPool::capacity(const std::string& uuid) const {
  for (const Gpu& gpu : gpus_) {
    if (gpu.device.uuid == uuid) return gpu.left_out ? 0 : gpu.capacity;
  }
  return 0;
}

int GpuPool::usable_gpus() const {
  return static_cast<int>(std::count_if(gpus_.begin(), gpus_.end(), [](const Gpu& gpu) { return !gpu.left_out; }));
}

}  // namespace dltune
