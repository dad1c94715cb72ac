#include "run/parallel_layout.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/files.h"
#include "core/machine.h"
#include "dltune/core/error.h"
#include "dltune/run/study_session.h"
#include "dltune/workloads/train.h"
#include "gpu/machine_cache.h"
#include "run/trial_setup.h"
#include "train/blas_kernels.h"
#include "trial/trial_process.h"

namespace dltune {
namespace {

constexpr double kEqualWithin = 0.03;         // layouts this close in estimated time count as equal
constexpr double kProbeTimeoutSeconds = 120;  // a probe process past this is killed and the measurement abandoned
constexpr int kProbeRounds = 2;               // each candidate is measured this many times, its fastest kept

// parallel-layouts.json (`file`): the measurements of each machine and workload.
MachineCache LayoutCache(const std::filesystem::path& file) {
  return {.file = file, .version = 1, .section = "layouts"};
}

std::string Plural(int count, const char* one, const char* many) {
  return fmt::format("{} {}", count, count == 1 ? one : many);
}

std::string Describe(int trials, int threads) {
  return fmt::format("{} at once, {} each", Plural(trials, "trial", "trials"), Plural(threads, "thread", "threads"));
}

// The settings a probe process trains with: a built-in trial's (its BLAS kernels, ...: one trial server forks both),
// and the library's own thread count.
std::map<std::string, std::string> ProbeEnvironment(int threads, double seconds, const std::filesystem::path& trial) {
  std::map<std::string, std::string> environment =
      TrialEnvironment({.builtin = true, .trial_json = trial, .threads = threads});
  environment["DLTUNE_PROBE_SECONDS"] = fmt::format("{}", seconds);
  return environment;
}

// What makes one measurement valid for another study: the machine (CPU, cores, BLAS kernels) and the training that
// was timed (TrainingIdentity, as the GPU packings key it).
nlohmann::json CacheKey(const nlohmann::json& probe_trial, int cores) {
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  const auto faster = FasterBlasEnvironment();
  nlohmann::json key = TrainingIdentity(probe_trial, /*command=*/"");
  // Layouts are measured for trials on the CPU, where training.fuse's default trains as off does: one entry for both.
  if (key["training"].value("fuse", "") == "chosen") key["training"]["fuse"] = "off";
  key["cpu"] = CpuModelName();
  key["cores"] = cores;
  key["blas"] = faster ? faster->second : (coretype ? coretype : "auto");
  return key;
}

std::optional<std::vector<LayoutMeasurement>> CachedMeasurements(const std::filesystem::path& file,
                                                                 const std::string& key) {
  const std::optional<nlohmann::json> cached = LayoutCache(file).Entry(key);
  if (!cached) return std::nullopt;
  std::vector<LayoutMeasurement> measured;
  try {
    for (const auto& entry : cached->at("measurements")) {
      measured.push_back(
          {entry.at("trials").get<int>(), entry.at("threads").get<int>(), entry.at("steps_per_second").get<double>()});
      if (!(measured.back().steps_per_second > 0)) return std::nullopt;
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  if (measured.empty()) return std::nullopt;
  return measured;
}

void StoreMeasurements(const std::filesystem::path& file, const std::string& key, const nlohmann::json& key_json,
                       const std::vector<LayoutMeasurement>& measured) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& m : measured) {
    entries.push_back({{"trials", m.trials}, {"threads", m.threads}, {"steps_per_second", m.steps_per_second}});
  }
  LayoutCache(file).Store(key, {{"machine_and_workload", key_json}, {"measurements", entries}});
}

// Runs `trials` probe processes at once with `threads` threads each, each training for `seconds` (a fused group of
// `members` when more than 1); their mean steps/s (per member).
double MeasureLayout(const LayoutRequest& request, const std::filesystem::path& probe_dir, int trials, int threads,
                     double seconds, std::size_t members = 1) {
  TrialCommand command;
  command.argv = {request.dltune_executable.string(), "probe-speed"};
  command.environment = ProbeEnvironment(threads, seconds, probe_dir / "trial.json");
  if (members > 1) command.environment["DLTUNE_PROBE_MEMBERS"] = std::to_string(members);
  command.stdout_path = probe_dir / "probe.log";
  command.stderr_path = probe_dir / "probe.log";
  command.warm_start = true;  // a built-in trial's training: a trial server may fork it
  std::vector<std::unique_ptr<TrialProcess>> processes;
  processes.reserve(static_cast<std::size_t>(trials));
  std::vector<std::string> reports(static_cast<std::size_t>(trials));
  for (int i = 0; i < trials; ++i) processes.push_back(std::make_unique<TrialProcess>(command, request.trial_server));
  const auto start = std::chrono::steady_clock::now();
  std::size_t running = processes.size();
  std::vector<bool> ended(processes.size(), false);
  while (running > 0) {
    for (std::size_t i = 0; i < processes.size(); ++i) {
      if (ended[i]) continue;
      if (processes[i]->report_fd() >= 0) processes[i]->ReadReport(reports[i]);
      if (const auto status = processes[i]->TryWait()) {
        while (processes[i]->report_fd() >= 0 && processes[i]->ReadReport(reports[i])) {
        }
        if (!status->ok()) {
          throw Error(fmt::format("the probe process ended with {}: {}", status->Describe(),
                                  TailOfFile(command.stderr_path, 5)));
        }
        ended[i] = true;
        --running;
      }
    }
    if (Seconds(std::chrono::steady_clock::now() - start) > kProbeTimeoutSeconds) {
      throw Error(fmt::format("the probe took longer than {:.0f} s", kProbeTimeoutSeconds));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double total = 0;
  for (const std::string& report : reports) {
    const nlohmann::json line = nlohmann::json::parse(report, nullptr, false);
    if (!line.is_object() || !line.contains("steps_per_second") || !line["steps_per_second"].is_number()) {
      throw Error(fmt::format("the probe process reported no speed: '{}'", report));
    }
    total += line["steps_per_second"].get<double>();
  }
  return total / trials;
}

// The training the probe times: the study's first trial, as its trial.json describes it to a built-in trial (its
// training.threads set per candidate layout). The probe keeps no checkpoints: its study needs no uid.
nlohmann::json ProbeTrial(const StudySpec& spec) {
  const StudyPlan plan(spec);
  if (plan.TrialCount() == 0 || !plan.IsPlanned(0)) throw Error("the study's first trial is not planned ahead");
  const PlannedTrial first = plan.Trial(0);
  StudyRecord study;
  study.name = spec.name;
  const TrialRecord trial{.number = first.number,
                          .substudy = first.substudy,
                          .substudy_label = plan.SubStudyAt(first.substudy).label,
                          .params = first.params,
                          .seed = first.seed,
                          .configuration = first.configuration,
                          .replica = first.replica};
  return TrialDescription(spec, study, trial, ParamsByName(*spec.space, first.params), spec.training.threads,
                          /*resuming=*/false);
}

// The probe's directory in the temporary directory, removed with this object.
struct ProbeDirectory {
  ProbeDirectory() { std::filesystem::create_directories(path); }
  ~ProbeDirectory() {
    std::error_code ignored;
    RemoveTree(path, ignored);
  }
  ProbeDirectory(const ProbeDirectory&) = delete;
  ProbeDirectory& operator=(const ProbeDirectory&) = delete;
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("dltune-layout-probe-{}", ::getpid());
};

std::vector<LayoutMeasurement> Probe(nlohmann::json probe_trial, const LayoutRequest& request, int cores) {
  const ProbeDirectory probe;
  const std::filesystem::path& probe_dir = probe.path;
  std::vector<LayoutMeasurement> measured = LayoutCandidates(cores);
  // The candidates in turn, twice, each time for half the probe's time; a candidate's faster measurement counts. A
  // slowdown shorter than a round (other load, a core the hypervisor took away) then reaches at most one of a
  // candidate's two measurements, instead of deciding the layout of the whole study.
  for (int round = 0; round < kProbeRounds; ++round) {
    for (LayoutMeasurement& candidate : measured) {
      probe_trial["training"]["threads"] = candidate.threads;
      WriteTrialDescription(probe_dir, probe_trial);
      if (request.progress) {
        request.progress(
            fmt::format("measuring {}{}", Describe(candidate.trials, candidate.threads), round > 0 ? " again" : ""));
      }
      candidate.steps_per_second = std::max(
          candidate.steps_per_second,
          MeasureLayout(request, probe_dir, candidate.trials, candidate.threads, request.probe_seconds / kProbeRounds));
    }
  }
  return measured;
}

// The group sizes ChooseFusion measures with `trials_to_run` trials left: 1 (alone), 2, 4, 8 and 16, no more than the
// trials left.
std::vector<FusionMeasurement> FusionCandidates(std::uint64_t trials_to_run) {
  std::vector<FusionMeasurement> candidates;
  for (std::size_t members = 1; members <= 16 && members <= trials_to_run; members *= 2) {
    candidates.push_back({members, 0});
  }
  return candidates;
}

std::string MeasuredText(const std::vector<LayoutMeasurement>& measured) {
  std::string text;
  for (const auto& m : measured) {
    text += fmt::format("{}{}×{}: {:.0f} steps/s per trial", text.empty() ? "" : "; ", m.trials, m.threads,
                        m.steps_per_second);
  }
  return text;
}

}  // namespace

std::vector<LayoutMeasurement> LayoutCandidates(int cores) {
  cores = std::max(1, cores);
  std::vector<LayoutMeasurement> candidates;
  for (int threads = 1; threads < cores; threads *= 2) candidates.push_back({cores / threads, threads, 0});
  candidates.push_back({1, cores, 0});
  return candidates;
}

ParallelLayout PickMeasuredLayout(const std::vector<LayoutMeasurement>& measurements, std::uint64_t trials_to_run) {
  if (measurements.empty()) throw Error("no layout was measured");
  const auto estimate = [&](const LayoutMeasurement& m) {
    const auto rounds = (std::max<std::uint64_t>(1, trials_to_run) + static_cast<std::uint64_t>(m.trials) - 1) /
                        static_cast<std::uint64_t>(m.trials);
    return static_cast<double>(rounds) / m.steps_per_second;  // in units of one trial's steps
  };
  double soonest = INFINITY;
  for (const auto& m : measurements) {
    if (!(m.steps_per_second > 0)) throw Error("a measured layout has no speed");
    soonest = std::min(soonest, estimate(m));
  }
  const LayoutMeasurement* chosen = nullptr;
  for (const auto& m : measurements) {
    if (estimate(m) <= soonest * (1 + kEqualWithin) && (!chosen || m.threads < chosen->threads)) chosen = &m;
  }
  return {chosen->trials, chosen->threads, "measured"};
}

std::filesystem::path LayoutCacheFile() { return MachineCacheDirectory() / "parallel-layouts.json"; }

ParallelLayout ChooseParallelLayout(const StudySpec& spec, const LayoutRequest& request) {
  const int cores = request.cores > 0 ? request.cores : AvailableCores();
  const int threads = spec.training.threads;
  if (const int processes = spec.training.processes; processes > 1) {
    // --parallel counts processes; a gang runs whole, even alone on fewer cores than it has ranks.
    const int rank_threads = std::max(1, threads);
    const int slots = request.parallel > 0 ? request.parallel : cores / rank_threads;
    return {std::max(1, slots / processes), rank_threads,
            fmt::format("{} ranks per trial (training.processes) in {}, {}; not measured", processes,
                        request.parallel > 0 ? "--parallel " + std::to_string(request.parallel) + " processes"
                                             : std::to_string(cores) + " cores",
                        threads > 0 ? "training.threads each" : "one thread each"),
            processes};
  }
  if (threads > 0 && request.parallel > 0) {
    return {request.parallel, threads, "--parallel and training.threads"};
  }
  if (threads > 0) return {std::max(1, cores / threads), threads, "training.threads, and the cores available"};
  if (request.parallel > 0) {
    return {request.parallel, std::max(1, cores / request.parallel), "--parallel, and the cores available"};
  }
  const ParallelLayout one_each{cores, 1, ""};
  if (spec.workload.name.empty()) {
    return {one_each.trials, 1, "one thread per trial: the trials are a program of yours, not measured"};
  }
  if (request.trials_on_gpus) {
    return {one_each.trials, 1, "one thread per trial: the trials train on GPUs, packed there by measurement"};
  }
  const std::uint64_t steps =
      request.trials_to_run * static_cast<std::uint64_t>(std::max<std::int64_t>(1, spec.max_train_steps));
  if (steps < kLayoutProbeMinSteps) {
    return {one_each.trials, 1,
            fmt::format("one thread per trial: {} training steps left in all, too few to be worth measuring", steps)};
  }
  try {
    const nlohmann::json probe_trial = ProbeTrial(spec);
    const nlohmann::json key_json = CacheKey(probe_trial, cores);
    const std::string key = MachineCache::EntryName(key_json);
    const std::filesystem::path cache = request.cache_file.empty() ? LayoutCacheFile() : request.cache_file;
    std::vector<LayoutMeasurement> measured;
    std::string basis;
    if (auto cached = CachedMeasurements(cache, key)) {
      measured = std::move(*cached);
      basis = fmt::format("measured before on this machine ({}; cached in {})", MeasuredText(measured), cache.string());
    } else {
      measured = Probe(probe_trial, request, cores);
      basis = fmt::format("measured ({})", MeasuredText(measured));
      try {
        StoreMeasurements(cache, key, key_json, measured);
      } catch (const Error& e) {
        basis += fmt::format("; not cached: {}", e.what());
      }
    }
    // Measured with as many trials at once as fit; a study with fewer trials left runs fewer.
    for (LayoutMeasurement& m : measured) {
      m.trials =
          static_cast<int>(std::clamp<std::uint64_t>(request.trials_to_run, 1, static_cast<std::uint64_t>(m.trials)));
    }
    ParallelLayout layout = PickMeasuredLayout(measured, request.trials_to_run);
    layout.basis = basis;
    return layout;
  } catch (const std::exception& e) {
    return {one_each.trials, 1, fmt::format("one thread per trial: the layout could not be measured ({})", e.what())};
  }
}

std::size_t PickFusion(const std::vector<FusionMeasurement>& measured) {
  const auto alone = std::find_if(measured.begin(), measured.end(), [](const auto& m) { return m.members == 1; });
  if (alone == measured.end()) throw Error("the fusion probe measured no trial alone");
  const FusionMeasurement* best = &*alone;
  for (const FusionMeasurement& m : measured) {
    if (m.steps_per_second > best->steps_per_second) best = &m;
  }
  return best->members > 1 && best->steps_per_second >= kFusionMargin * alone->steps_per_second ? best->members : 0;
}

int FusionProbeProcesses(const LayoutRequest& request, const ParallelLayout& layout) {
  return request.trials_on_gpus ? 1 : std::max(1, layout.trials);
}

namespace {

// Fusion measurements are kept beside the layouts, in a file of their own (same format), keyed as the layout is plus
// the GPUs, the layout they were measured in and the group sizes tried.
MachineCache FusionCache(const LayoutRequest& request) {
  const std::filesystem::path layouts = request.cache_file.empty() ? LayoutCacheFile() : request.cache_file;
  return {.file = layouts.parent_path() / "fusion-probes.json", .version = 1, .section = "probes"};
}

nlohmann::json FusionKey(const nlohmann::json& probe_trial, const LayoutRequest& request, const ParallelLayout& layout,
                         const std::vector<FusionMeasurement>& candidates) {
  nlohmann::json key = CacheKey(probe_trial, request.cores > 0 ? request.cores : AvailableCores());
  key["training"].erase("fuse");  // auto and the default measure the same
  key["gpus"] = request.gpu_models;
  key["layout"] = {{"trials", FusionProbeProcesses(request, layout)}, {"threads", layout.threads}};
  key["members"] = nlohmann::json::array();
  for (const auto& candidate : candidates) key["members"].push_back(candidate.members);
  return key;
}

std::optional<std::vector<FusionMeasurement>> CachedFusion(const MachineCache& cache, const std::string& name,
                                                           std::vector<FusionMeasurement> candidates) {
  const auto entry = cache.Entry(name);
  if (!entry) return std::nullopt;
  try {
    const auto& measured = entry->at("measurements");
    if (measured.size() != candidates.size()) return std::nullopt;
    for (std::size_t i = 0; i < candidates.size(); ++i) {
      if (measured[i].at("members").get<std::size_t>() != candidates[i].members) return std::nullopt;
      candidates[i].steps_per_second = measured[i].at("steps_per_second").get<double>();
      if (!(candidates[i].steps_per_second > 0)) return std::nullopt;
    }
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
  return candidates;
}

// Measures each candidate (kProbeRounds times, keeping the fastest), FusionProbeProcesses at once.
void MeasureFusion(const LayoutRequest& request, const nlohmann::json& probe_trial, const ParallelLayout& layout,
                   std::vector<FusionMeasurement>& candidates) {
  const int at_once = FusionProbeProcesses(request, layout);
  const ProbeDirectory probe;
  WriteTrialDescription(probe.path, probe_trial);
  for (int round = 0; round < kProbeRounds; ++round) {
    for (FusionMeasurement& candidate : candidates) {
      if (request.progress) {
        request.progress(candidate.members == 1 ? fmt::format("measuring trials alone{}", round > 0 ? " again" : "")
                                                : fmt::format("measuring fused groups of {}{}", candidate.members,
                                                              round > 0 ? " again" : ""));
      }
      candidate.steps_per_second =
          std::max(candidate.steps_per_second, MeasureLayout(request, probe.path, at_once, layout.threads,
                                                             request.probe_seconds / kProbeRounds, candidate.members));
    }
  }
}

}  // namespace

FusionChoice ChooseFusion(const StudySpec& spec, const LayoutRequest& request, const ParallelLayout& layout) {
  if (!FusibleWorkload(spec.workload.name) || spec.training.processes > 1) {
    return {0, "apart: these trials cannot train fused (the built-in MLP and CNN can, one process per trial)"};
  }
  const std::uint64_t steps =
      request.trials_to_run * static_cast<std::uint64_t>(std::max<std::int64_t>(1, spec.max_train_steps));
  if (request.trials_to_run < 2 || steps < kLayoutProbeMinSteps) {
    return {0, fmt::format("apart: {} trials of {} training steps left in all, too few to be worth measuring",
                           request.trials_to_run, steps)};
  }
  try {
    nlohmann::json probe_trial = ProbeTrial(spec);
    probe_trial["training"]["threads"] = layout.threads;
    std::vector<FusionMeasurement> measured = FusionCandidates(request.trials_to_run);
    const MachineCache cache = FusionCache(request);
    const nlohmann::json key = FusionKey(probe_trial, request, layout, measured);
    std::string cached_note;
    if (auto cached = CachedFusion(cache, MachineCache::EntryName(key), measured)) {
      measured = std::move(*cached);
      cached_note = fmt::format("measured before on this machine, cached in {}; ", cache.file.string());
    } else {
      MeasureFusion(request, probe_trial, layout, measured);
      nlohmann::json entries = nlohmann::json::array();
      for (const auto& m : measured) {
        entries.push_back({{"members", m.members}, {"steps_per_second", m.steps_per_second}});
      }
      try {
        cache.Store(MachineCache::EntryName(key), {{"key", key}, {"measurements", entries}});
      } catch (const Error& e) {
        cached_note = fmt::format("not cached: {}; ", e.what());
      }
    }
    std::string figures = cached_note + fmt::format("training steps per second of each trial: alone {:.0f}",
                                                    measured.front().steps_per_second);
    for (std::size_t i = 1; i < measured.size(); ++i) {
      figures += fmt::format(", in groups of {} {:.0f}", measured[i].members, measured[i].steps_per_second);
    }
    const std::size_t members = PickFusion(measured);
    if (members == 0) {
      return {0, fmt::format("apart: no fused group measured at least {:.1f}x faster per trial ({})", kFusionMargin,
                             figures)};
    }
    const auto chosen =
        std::find_if(measured.begin(), measured.end(), [&](const auto& m) { return m.members == members; });
    return {members, fmt::format("groups of up to {}: measured {:.2f}x a trial alone per trial ({})", members,
                                 chosen->steps_per_second / measured.front().steps_per_second, figures)};
  } catch (const std::exception& e) {
    return {0, fmt::format("apart: fused groups could not be measured ({})", e.what())};
  }
}

std::uint64_t FusionProbeSteps(std::uint64_t trials_to_run) {
  return FusionCandidates(trials_to_run).size() * static_cast<std::uint64_t>(kProbeRounds) *
         kFusionProbeStepsPerMeasurement;
}

bool FusibleStudy(const StudySpec& spec) {
  return spec.command.empty() && spec.training.processes == 1 && FusibleWorkload(spec.workload.name);
}

FusionPlan PlanFusion(const StudySpec& spec, bool on_cuda, std::uint64_t trials_to_run,
                      const std::function<bool(const StudySpec&)>& fusible) {
  const std::string& fuse = spec.training.fuse;
  if (fuse == "auto") return {.probe = true, .why = "training.fuse auto"};
  if (fuse != "chosen") return {.why = fmt::format("training.fuse {}: not measured", fuse)};
  if (!on_cuda) {
    return {.why =
                "apart: the trials train on the CPU, where a fused group does the same arithmetic and gains "
                "nothing; not measured"};
  }
  const std::uint64_t steps =
      trials_to_run * static_cast<std::uint64_t>(std::max<std::int64_t>(1, spec.max_train_steps));
  const std::uint64_t probe = FusionProbeSteps(trials_to_run);
  if (trials_to_run < 2 || static_cast<double>(probe) > kFusionProbeShare * static_cast<double>(steps)) {
    return {.why = fmt::format("apart: a probe of about {} training steps is more than {:.0f}% of the {} left in all "
                               "({} trials); not measured",
                               probe, 100 * kFusionProbeShare, steps, trials_to_run)};
  }
  if (!fusible(spec)) return {.why = "apart: these trials cannot train fused; not measured"};
  return {.probe = true,
          .why = fmt::format("measured, the trials training on CUDA: a probe of about {} training steps, {:.1f}% of "
                             "the {} left",
                             probe, 100.0 * static_cast<double>(probe) / static_cast<double>(steps), steps)};
}

nlohmann::json FirstTrialDescription(const StudySpec& spec) { return ProbeTrial(spec); }

}  // namespace dltune
