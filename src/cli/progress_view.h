// What `dltune run` and `dltune worker` show while trials run: on a terminal, a live block with one bar per running
// trial (step / max steps, latest objective), the study's trials by state and an ETA, redrawn in place under the
// event lines; otherwise plain, timestamped log lines.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "dltune/run/run_types.h"
#include "dltune/store/store.h"

namespace dltune::cli {

class ProgressView final : public RunObserver {
 public:
  // `live`: redraw in place (stdout is a terminal); `study_id` 0: totals over every study of the store.
  ProgressView(Store& store, std::int64_t study_id, int parallel, bool live, std::FILE* out = stdout);
  ~ProgressView() override;

  void TrialStarted(const TrialProgress& trial, bool resuming) override;
  void TrialFinished(const TrialEnded& ended) override;
  void Notice(const std::string& message) override;
  void Tick(const std::vector<TrialProgress>& running) override;
  // Removes the live block (before the final summary).
  void Close();

 private:
  void PrintEvent(const std::string& line);
  void Redraw();
  std::string TotalsLine();
  // The trials the study will have in all (its spec's plan), read once per study.
  int StudyTrialCount(const StudyRecord& study);

  Store& store_;
  std::int64_t study_id_;
  std::map<std::int64_t, int> trial_counts_;
  int parallel_;
  bool live_;
  std::FILE* out_;
  std::vector<TrialProgress> running_;
  std::size_t drawn_lines_ = 0;
  double started_ = 0;
  double last_plain_status_ = 0;
  double last_totals_ = 0;
  std::string totals_;
  std::vector<double> finished_seconds_;  // durations of trials completed here, for the ETA
  int remaining_ = 0;                     // pending + running, at the last totals query
};

// "1:05", "2:03:04".
std::string FormatDuration(double seconds);
// "[#######-------------]" of `width` characters for `fraction` in [0, 1].
std::string Bar(double fraction, int width);

}  // namespace dltune::cli
