#include "progress_view.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>

#include <fmt/format.h>

#include "core/clock.h"
#include "core/strings.h"
#include "dltune/study/study_spec.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"

namespace dltune::cli {
namespace {

std::string Clock() { return FormatClockTime(WallSeconds(), "%H:%M:%S", TimeZone::kLocal); }

std::string TrialName(const TrialProgress& t) {
  return t.substudy.empty() || t.substudy == "all" ? fmt::format("trial {}", t.number)
                                                   : fmt::format("trial {} ({})", t.number, t.substudy);
}

}  // namespace

std::string FormatDuration(double seconds) {
  const auto total = static_cast<long long>(std::max(0.0, std::round(seconds)));
  if (total >= 3600) return fmt::format("{}:{:02d}:{:02d}", total / 3600, (total / 60) % 60, total % 60);
  return fmt::format("{}:{:02d}", total / 60, total % 60);
}

std::string Bar(double fraction, int width) {
  const int filled = static_cast<int>(std::clamp(fraction, 0.0, 1.0) * width);
  return "[" + std::string(static_cast<std::size_t>(filled), '#') +
         std::string(static_cast<std::size_t>(width - filled), '-') + "]";
}

ProgressView::ProgressView(Store& store, std::int64_t study_id, int parallel, bool live, std::FILE* out)
    : store_(store),
      study_id_(study_id),
      parallel_(std::max(1, parallel)),
      live_(live),
      out_(out),
      started_(WallSeconds()) {}

ProgressView::~ProgressView() { Close(); }

void ProgressView::Close() {
  if (live_ && drawn_lines_ > 0) {
    std::fprintf(out_, "\x1b[%zuA\x1b[J", drawn_lines_);
    drawn_lines_ = 0;
    std::fflush(out_);
  }
}

void ProgressView::PrintEvent(const std::string& line) {
  Close();
  std::fprintf(out_, "%s  %s\n", Clock().c_str(), TerminalSafe(line, false).c_str());
  if (live_) Redraw();
  std::fflush(out_);
}

void ProgressView::TrialStarted(const TrialProgress& trial, bool resuming) {
  PrintEvent(fmt::format("{} {}", TrialName(trial), resuming ? "resumes" : "starts"));
}

void ProgressView::TrialFinished(const TrialEnded& ended) {
  std::erase_if(running_, [&](const TrialProgress& t) { return t.number == ended.trial.number; });
  last_totals_ = 0;  // the totals changed
  std::string line =
      fmt::format("{} {} in {}", TrialName(ended.trial), TrialStateName(ended.state), FormatDuration(ended.seconds));
  if (ended.best_value) {
    line += fmt::format(": best {:.4f} at step {}", *ended.best_value, ended.best_step.value_or(0));
  }
  if (ended.state == TrialState::kCompleted) {
    finished_seconds_.push_back(ended.seconds);
  } else if (!ended.reason.empty()) {
    line += " — " + ended.reason;
  }
  if (ended.state == TrialState::kFailed) line += fmt::format(" (logs in {})", ended.trial_dir);
  PrintEvent(line);
}

void ProgressView::Notice(const std::string& message) { PrintEvent(message); }

int ProgressView::StudyTrialCount(const StudyRecord& study) {
  auto it = trial_counts_.find(study.id);
  if (it == trial_counts_.end()) {
    int count = 0;
    try {
      const StudySpec spec = RecordedSpec(study);
      count = static_cast<int>(StudyPlan(spec).TrialCount());
    } catch (const Error&) {
      // A spec this dltune cannot read: count the trials in the store only.
    }
    it = trial_counts_.emplace(study.id, count).first;
  }
  return it->second;
}

std::string ProgressView::TotalsLine() {
  const double now = WallSeconds();
  if (now - last_totals_ >= 2) {
    last_totals_ = now;
    std::array<int, 6> counts{};
    int total = 0;
    std::vector<StudyRecord> studies;
    if (study_id_ != 0) {
      for (const auto& s : store_.ListStudies()) {
        if (s.id == study_id_) studies.push_back(s);
      }
    } else {
      studies = store_.ListStudies();
    }
    for (const auto& study : studies) {
      const TrialCounts made = store_.CountTrials(study.id);
      for (std::size_t i = 0; i < counts.size(); ++i) counts[i] += static_cast<int>(made.by_state[i]);
      // A study makes its later trials when asked: count them as pending until then.
      const int unmade = std::max(0, StudyTrialCount(study) - static_cast<int>(made.made));
      counts[static_cast<std::size_t>(TrialState::kPending)] += unmade;
      total += static_cast<int>(made.made) + unmade;
    }
    const int done = total - counts[static_cast<std::size_t>(TrialState::kPending)] -
                     counts[static_cast<std::size_t>(TrialState::kRunning)];
    remaining_ = total - done;
    std::string states;
    for (TrialState state : {TrialState::kCompleted, TrialState::kRunning, TrialState::kPending,
                             TrialState::kInfeasible, TrialState::kFailed, TrialState::kStopped}) {
      const int n = counts[static_cast<std::size_t>(state)];
      if (n > 0) states += fmt::format("{}{} {}", states.empty() ? "" : ", ", n, TrialStateName(state));
    }
    totals_ = fmt::format("{}/{} trials done ({})", done, total, states.empty() ? "none" : states);
  }
  // ETA: the trials left, at the mean duration of those finished here (or the running ones' pace), `parallel` at once.
  double per_trial = 0;
  if (!finished_seconds_.empty()) {
    for (double s : finished_seconds_) per_trial += s;
    per_trial /= static_cast<double>(finished_seconds_.size());
  } else {
    for (const auto& t : running_) {
      if (t.step > 0 && t.max_steps > 0) {
        per_trial =
            std::max(per_trial, (now - t.started_at) * static_cast<double>(t.max_steps) / static_cast<double>(t.step));
      }
    }
  }
  std::string eta = "ETA -";
  if (per_trial > 0) {
    double left = 0;
    int running_left = 0;
    for (const auto& t : running_) {
      ++running_left;
      if (t.max_steps > 0) left += per_trial * (1 - static_cast<double>(t.step) / static_cast<double>(t.max_steps));
    }
    left += per_trial * std::max(0, remaining_ - running_left);
    eta = "ETA " + FormatDuration(left / parallel_);
  }
  return fmt::format("{}   elapsed {}   {}", totals_, FormatDuration(now - started_), eta);
}

void ProgressView::Redraw() {
  std::vector<std::string> lines;
  lines.push_back(TotalsLine());
  for (const auto& t : running_) {
    const double fraction = t.max_steps > 0 ? static_cast<double>(t.step) / static_cast<double>(t.max_steps) : 0;
    lines.push_back(fmt::format("  {:<32} {} {:>7}/{}  {}{}", TrialName(t), Bar(fraction, 24), t.step, t.max_steps,
                                t.objective ? fmt::format("objective {:.4f}", *t.objective) : "objective -",
                                t.stopping ? "  (stopping)" : ""));
  }
  for (const auto& line : lines) std::fprintf(out_, "\x1b[2K%s\n", TerminalSafe(line, false).c_str());
  drawn_lines_ = lines.size();
}

void ProgressView::Tick(const std::vector<TrialProgress>& running) {
  running_ = running;
  if (live_) {
    Close();
    Redraw();
    std::fflush(out_);
    return;
  }
  const double now = WallSeconds();
  if (now - last_plain_status_ < 30) return;  // a status line every half minute in logs
  last_plain_status_ = now;
  std::string line = TotalsLine();
  for (const auto& t : running_) line += fmt::format("; trial {} at step {}/{}", t.number, t.step, t.max_steps);
  std::fprintf(out_, "%s  %s\n", Clock().c_str(), TerminalSafe(line, false).c_str());
  std::fflush(out_);
}

}  // namespace dltune::cli
