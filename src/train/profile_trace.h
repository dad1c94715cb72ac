// A profile trace of a window of training steps (training.profile_steps): LibTorch's operator events, recorded by its
// legacy autograd profiler (torch::autograd::profiler: Debian's LibTorch 1.13 has no Kineto, nor had the pip
// LibTorch 2.11 of the GPU machine), and the trainer's own spans; training on CUDA, each operator's time on the GPU as
// well (the legacy profiler's CUDA events around it: the kernels an operator launched, on a track of their own, not
// each kernel by name, which takes Kineto), written as one Chrome trace-event JSON file that ui.perfetto.dev and
// chrome://tracing open (docs/training.md, "DIR/profile.trace.json"). Nothing here runs outside the window: the trainer
// holds no ProfileTrace then, and a TraceSpan of no trace reads no clock.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dltune/core/training_settings.h"

namespace dltune {

class ProfileTrace {
 public:
  // Records nothing until Start. `metadata` goes into the file's otherData.dltune, with the steps it holds.
  ProfileTrace(std::filesystem::path path, nlohmann::json metadata);
  // A trace still recording (an exception leaving the training loop) is stopped and written as it is; errors are
  // ignored there.
  ~ProfileTrace();
  ProfileTrace(const ProfileTrace&) = delete;
  ProfileTrace& operator=(const ProfileTrace&) = delete;

  // Starts LibTorch's profiler on the calling thread, the training thread; Finish must be called on it too. With
  // `cuda`, it also times each operator on the GPU (CUDA events; the LibTorch must have CUDA).
  void Start(bool cuda = false);
  bool recording() const { return recording_; }

  // Now on the clock of LibTorch's events (nanoseconds, CLOCK_REALTIME), so the trainer's spans and the operators
  // they contain line up.
  static std::int64_t Now();
  // One span of the trainer, on the training thread. `name` is a literal; a span with a step is named "step N".
  void AddSpan(const char* name, std::int64_t begin, std::int64_t end, std::int64_t step = -1) noexcept;

  // Stops the profiler and writes the file whole (never a torn one). `ended` says why the recording ended:
  // "window" (its last step done), "stopped", "diverged", "error". Throws IoError when the file cannot be written.
  void Finish(const std::string& ended);

  const std::filesystem::path& path() const { return path_; }

 private:
  struct Span {
    const char* name;
    std::int64_t begin, end, step;
  };

  std::filesystem::path path_;
  nlohmann::json metadata_;
  bool recording_ = false;
  bool cuda_ = false;            // operators timed on the GPU too
  std::int64_t origin_ = 0;      // Now() when recording started: ts 0 of the file
  std::uint64_t thread_id_ = 0;  // the training thread, as LibTorch numbers threads in its events
  std::vector<Span> spans_;
};

// A run's profile window (training.profile_steps): planned before the first step, recording from the step the window
// starts at, written when it ends or the run does. The lone trainer and a fused group each hold one.
class ProfileRecorder {
 public:
  // Plans `window` (nullopt: none) for a run starting at step `step` (0, or the step it resumed from): a trace to
  // `path` with `metadata` (the window's text `profile_steps` and `step` added). Nothing is planned where the window
  // is behind the run, or where the run resumed inside it and the run before wrote the trace of its part.
  void Plan(std::optional<ProfileWindow> window, const std::string& profile_steps, std::int64_t step,
            const std::filesystem::path& path, nlohmann::json metadata);
  // A window is planned and not yet written.
  bool planned() const { return window_.has_value(); }
  // Before step `step` + 1: starts recording where the window starts after `step` (`cuda`: operators' GPU times too).
  void StartAt(std::int64_t step, bool cuda);
  // The trace while it records, else null: what every TraceSpan takes.
  ProfileTrace* tracing() const { return tracing_; }
  // Whether step `step`, just done, is the window's last while it records.
  bool EndsAt(std::int64_t step) const { return tracing_ != nullptr && step == window_->end; }
  // Stops recording and writes the trace: its path, or nullopt where it could not be written (a warning on stderr:
  // training goes on).
  std::optional<std::filesystem::path> Finish(const std::string& ended);

 private:
  std::optional<ProfileWindow> window_;  // the window still to record; nullopt: none (or done)
  std::int64_t start_ = 0;               // the step after which recording starts (the window's, or a resume's)
  std::unique_ptr<ProfileTrace> trace_;  // made before the window, started at its first step
  ProfileTrace* tracing_ = nullptr;      // trace_ while it records, else null
};

// Times the enclosing scope as a span of `trace`; does nothing (not even read the clock) when `trace` is null.
class TraceSpan {
 public:
  TraceSpan(ProfileTrace* trace, const char* name, std::int64_t step = -1)
      : trace_(trace), name_(name), step_(step), begin_(trace != nullptr ? ProfileTrace::Now() : 0) {}
  ~TraceSpan() { End(); }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;

  // Ends the span before the scope does.
  void End() {
    if (trace_ == nullptr) return;
    trace_->AddSpan(name_, begin_, ProfileTrace::Now(), step_);
    trace_ = nullptr;
  }

 private:
  ProfileTrace* trace_;
  const char* name_;
  std::int64_t step_;
  std::int64_t begin_;
};

}  // namespace dltune
