#include "profile_trace.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_legacy.h>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#include <c10/util/ApproximateClock.h>
#endif

#include "core/files.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

namespace legacy = torch::autograd::profiler;
using nlohmann::json;

// Microseconds since the trace's origin: the unit of the trace-event format, to the nanosecond.
double Micros(std::int64_t nanoseconds, std::int64_t origin) { return static_cast<double>(nanoseconds - origin) / 1e3; }

}  // namespace

ProfileTrace::ProfileTrace(std::filesystem::path path, json metadata)
    : path_(std::move(path)), metadata_(std::move(metadata)) {}

ProfileTrace::~ProfileTrace() {
  if (!recording_) return;
  try {
    Finish("error");
  } catch (...) {
    // Already leaving the loop with an error; a trace that cannot be written is not a second one.
  }
}

// The profiler's clock: torch::profiler::impl::getTime in LibTorch 1.x, c10::getTime from 2.1 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
std::int64_t ProfileTrace::Now() { return static_cast<std::int64_t>(c10::getTime()); }
#else
std::int64_t ProfileTrace::Now() { return static_cast<std::int64_t>(torch::profiler::impl::getTime()); }
#endif

void ProfileTrace::Start(bool cuda) {
  thread_id_ = at::RecordFunction::currentThreadId();
  origin_ = Now();
  cuda_ = cuda;
  // CPU events with the operators' input shapes, and on CUDA a CUDA event at each operator's start and end.
  legacy::enableProfilerLegacy(torch::profiler::impl::ProfilerConfig(
      cuda ? torch::profiler::impl::ProfilerState::CUDA : torch::profiler::impl::ProfilerState::CPU,
      /*report_input_shapes=*/true));
  recording_ = true;
}

void ProfileTrace::AddSpan(const char* name, std::int64_t begin, std::int64_t end, std::int64_t step) noexcept {
  try {
    spans_.push_back({name, begin, end, step});
  } catch (const std::bad_alloc&) {
    // Spans end in destructors, also while an exception leaves the loop: a span lost is better than a terminate.
  }
}

void ProfileTrace::Finish(const std::string& ended) {
  if (!recording_) return;
  recording_ = false;
  const std::int64_t stopped = Now();
  const legacy::thread_event_lists lists = legacy::disableProfilerLegacy();
  const auto pid = static_cast<std::int64_t>(::getpid());

  json events = json::array();
  std::map<std::uint64_t, bool> threads = {{thread_id_, true}};
  // On CUDA, the earliest event with a CUDA event (LibTorch 2.x records none at its start mark, only at operators):
  // GPU times are taken from it.
  const legacy::LegacyEvent* gpu_origin = nullptr;
  for (const auto& list : lists) {
    for (const legacy::LegacyEvent& event : list) {
      if (cuda_ && event.hasCuda() && (!gpu_origin || event.cpuUs() < gpu_origin->cpuUs())) gpu_origin = &event;
    }
  }
  constexpr std::int64_t kGpuTrack = -1;  // the track of the operators' GPU times
  // LibTorch's operators: each a push and a pop of one handle, on the thread it ran on.
  for (const auto& list : lists) {
    std::map<std::pair<at::RecordFunctionHandle, int>, const legacy::LegacyEvent*> open;
    for (const legacy::LegacyEvent& event : list) {
      const auto key = std::make_pair(event.handle(), event.nodeId());
      if (event.kind() == legacy::EventKind::PushRange) {
        open[key] = &event;
      } else if (event.kind() == legacy::EventKind::PopRange) {
        const auto start = open.find(key);
        if (start == open.end()) continue;
        const legacy::LegacyEvent& begin = *start->second;
        json args = json::object();
        if (const auto shapes = begin.shapes(); !shapes.empty()) args["Input Dims"] = shapes;
        if (begin.sequenceNr() >= 0) args["Sequence number"] = begin.sequenceNr();
        const auto begin_ns = static_cast<std::int64_t>(begin.cpuUs() * 1e3);
        const auto end_ns = static_cast<std::int64_t>(event.cpuUs() * 1e3);
        events.push_back({{"name", begin.name()},
                          {"cat", "torch"},
                          {"ph", "X"},
                          {"ts", Micros(begin_ns, origin_)},
                          {"dur", Micros(end_ns, begin_ns)},
                          {"pid", pid},
                          {"tid", begin.threadId()},
                          {"args", std::move(args)}});
        threads.emplace(begin.threadId(), false);
        if (gpu_origin && begin.hasCuda() && event.hasCuda()) {
          // Between the CUDA events recorded at the operator's start and end: its kernels on the stream.
          const double gpu_begin_ns = gpu_origin->cpuUs() * 1e3 + gpu_origin->cudaElapsedUs(begin) * 1e3;
          const double gpu_us = begin.cudaElapsedUs(event);
          if (gpu_us > 0) {
            events.push_back({{"name", begin.name()},
                              {"cat", "gpu"},
                              {"ph", "X"},
                              {"ts", Micros(static_cast<std::int64_t>(gpu_begin_ns), origin_)},
                              {"dur", gpu_us},
                              {"pid", pid},
                              {"tid", kGpuTrack},
                              {"args", {{"device", begin.device()}}}});
          }
        }
        open.erase(start);
      }
    }
  }
  // The trainer's spans, on the training thread.
  std::int64_t first_step = -1;
  std::int64_t last_step = -1;
  for (const Span& span : spans_) {
    const bool step = span.step >= 0;
    if (step) {
      first_step = first_step < 0 ? span.step : std::min(first_step, span.step);
      last_step = std::max(last_step, span.step);
    }
    events.push_back({{"name", step ? fmt::format("{} {}", span.name, span.step) : std::string(span.name)},
                      {"cat", "dltune"},
                      {"ph", "X"},
                      {"ts", Micros(span.begin, origin_)},
                      {"dur", Micros(span.end, span.begin)},
                      {"pid", pid},
                      {"tid", thread_id_},
                      {"args", step ? json{{"step", span.step}} : json::object()}});
  }
  // In time order, a span before those it contains (the longer of two that start together).
  std::stable_sort(events.begin(), events.end(), [](const json& a, const json& b) {
    const double ta = a["ts"].get<double>();
    const double tb = b["ts"].get<double>();
    return ta != tb ? ta < tb : a["dur"].get<double>() > b["dur"].get<double>();
  });
  // Names of the process and threads, for the viewer's track labels.
  json named = json::array();
  named.push_back({{"name", "process_name"},
                   {"ph", "M"},
                   {"pid", pid},
                   {"tid", thread_id_},
                   {"args", {{"name", fmt::format("dltune training (pid {})", pid)}}}});
  for (const auto& [thread, training] : threads) {
    named.push_back(
        {{"name", "thread_name"},
         {"ph", "M"},
         {"pid", pid},
         {"tid", thread},
         {"args", {{"name", training ? std::string("training") : fmt::format("torch thread {}", thread)}}}});
  }
  if (gpu_origin) {
    named.push_back({{"name", "thread_name"},
                     {"ph", "M"},
                     {"pid", pid},
                     {"tid", kGpuTrack},
                     {"args", {{"name", "GPU (each operator's kernels, CUDA events)"}}}});
  }
  for (auto& event : events) named.push_back(std::move(event));

  json about = metadata_.is_object() ? metadata_ : json::object();
  about["first_step"] = first_step < 0 ? json(nullptr) : json(first_step);
  about["last_step"] = last_step < 0 ? json(nullptr) : json(last_step);
  about["ended"] = ended;
  about["start_unix_ns"] = origin_;
  about["seconds"] = static_cast<double>(stopped - origin_) / 1e9;
  about["profiler"] =
      std::string("LibTorch legacy autograd profiler (") +
      (gpu_origin ? "CPU, and each operator's GPU time from CUDA events" : "CPU") + "), LibTorch " TORCH_VERSION +
      (cuda_ ? "; the GPU's kernels are not traced one by one: that takes Kineto, which dltune does not use" : "");
  const json trace = {{"traceEvents", std::move(named)}, {"displayTimeUnit", "ms"}, {"otherData", {{"dltune", about}}}};
  spans_.clear();
  WriteFileAtomically(path_, trace.dump(-1, ' ', false, json::error_handler_t::replace) + "\n", /*sync=*/false);
}

void ProfileRecorder::Plan(std::optional<ProfileWindow> window, const std::string& profile_steps, std::int64_t step,
                           const std::filesystem::path& path, nlohmann::json metadata) {
  window_.reset();
  if (!window) return;
  start_ = std::max(step, window->begin);
  if (start_ >= window->end || (step > window->begin && std::filesystem::exists(path))) return;
  metadata["profile_steps"] = profile_steps;
  metadata["resumed_from_step"] = step;
  window_ = window;
  trace_ = std::make_unique<ProfileTrace>(path, std::move(metadata));
}

void ProfileRecorder::StartAt(std::int64_t step, bool cuda) {
  if (!window_ || tracing_ != nullptr || step != start_) return;
  trace_->Start(cuda);
  tracing_ = trace_.get();
}

std::optional<std::filesystem::path> ProfileRecorder::Finish(const std::string& ended) {
  tracing_ = nullptr;
  window_.reset();
  std::optional<std::filesystem::path> written;
  try {
    trace_->Finish(ended);
    written = trace_->path();
  } catch (const std::exception& e) {
    const std::string what = e.what();
    std::fprintf(stderr, "dltune: warning: no profile trace: %s\n", what.substr(0, what.find('\n')).c_str());
  }
  trace_.reset();
  return written;
}

}  // namespace dltune
