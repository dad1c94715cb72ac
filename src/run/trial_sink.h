// One running trial's report, turned into store writes through its ActiveTrial: the protocol reader
// (docs/trial-protocol.md), its measurements, its checkpoints and their retention (for a trial that leaves them to
// dltune), its TensorBoard scalars, and the accounting of its process's time. The worker's loop feeds it what the
// trial's process writes and, once the process has ended, reads how it ended from it.
//
// What the sink cannot settle itself it hands to the loop through TrialSinkHooks: a lost lease (another worker has
// the trial), a broken protocol (the trial is to be killed, and failed), a failed write of the worker's own (a full
// disk: the trial is to be stopped, to resume). After a lost lease or a protocol error it reads nothing more.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/checkpoint_retention.h"
#include "dltune/run/run_types.h"
#include "dltune/run/study_session.h"
#include "dltune/store/store.h"
#include "report/tfevents.h"
#include "trial/trial_report.h"

namespace dltune {

// What a TrialSink asks of the loop running its trial.
struct TrialSinkHooks {
  // Another worker holds the trial now (`why`): this attempt is abandoned; its processes are to be killed.
  std::function<void(const std::string& why)> lease_lost;
  // The trial broke the report protocol (TrialSink::protocol_error): its processes are to be killed.
  std::function<void()> protocol_broken;
  // A write of the worker's for the trial failed (`why`: a full disk): it is to be asked to stop (it checkpoints).
  std::function<void(const std::string& why)> disk_fault;
};

class TrialSink {
 public:
  // `trial` is written to; `progress` (the loop's view of the trial) gets its step, objective and best as they are
  // reported. `trial_dir`: the trial's directory, the only place retention deletes in. `recorded`: the trial's
  // checkpoints the store holds (ListCheckpoints), from earlier attempts. Opens the TensorBoard events file in
  // `trial_dir` (throws IoError when it cannot). `trial` and `progress` must outlive the sink.
  TrialSink(ActiveTrial& trial, TrialProgress& progress, std::filesystem::path trial_dir,
            const CheckpointRetention& retention, const std::vector<CheckpointRecord>& recorded,
            std::int64_t recorded_evaluation_step, TrialSinkHooks hooks);

  // The newest step a resumed attempt may start from, 0 for none: that of the newest recorded checkpoint or
  // evaluation. Both are recorded only after the measurements before them, so a checkpoint at or before it leaves no
  // gap in the series — and one on disk newer than the newest recorded checkpoint is fine up to the newest recorded
  // evaluation: a program that manages its checkpoints may have deleted the older one before its worker died.
  std::int64_t ResumeLimit() const;

  // The trial's process started at `at` (seconds since the epoch).
  void ProcessStarted(double at) { spawned_at_ = at; }

  // Handles `bytes` the process wrote to its report: every complete line, and with `at_eof` (the report is closed)
  // a last line without its newline too. Throws StoreUnavailableError when the store cannot be reached: what was
  // read is kept, and written when it is called again.
  void Feed(std::string_view bytes, bool at_eof);

  // The process ended at `now`: its lifetime not accounted for by its start-up and the phases it reported is
  // "other"; a process that never sent its start line spent all of it starting up.
  void AccountProcessTime(double now);

  // Why the trial broke the protocol (a bad line, or a rule ActiveTrial enforces); "" while it did not.
  const std::string& protocol_error() const { return protocol_error_; }
  // A write of the worker's for the trial that failed; "" while none did.
  const std::string& disk_fault() const { return disk_fault_; }
  // Its end line, if it sent one.
  const std::optional<ReportEnd>& end() const { return end_; }
  // Whether the program answered the offer of warm trials ({"type": "warm"}): it can serve the study's next trials.
  bool warm_offered() const { return warm_offered_; }
  // The file the program that answered runs (its warm line's "program"); empty when it did not say.
  const std::string& warm_program() const { return warm_program_; }
  // Whether its server runs the trials in its own process (its warm line's "reuse").
  bool warm_reuse() const { return warm_reuse_; }
  // When the trial's measurements were last written to the store (at an evaluation); -infinity before.
  double last_written_at() const { return last_written_at_; }

 private:
  // A recorded checkpoint not deleted.
  struct KeptCheckpoint {
    std::int64_t id = 0;
    std::int64_t step = 0;
    std::optional<double> objective;
    std::filesystem::path path;
  };

  void Handle(const ReportLine& line);
  void HandleStart(const ReportStart& start);
  void HandleEval(const ReportEval& eval);
  void HandleCheckpoint(const ReportCheckpoint& reported);
  // Keeps the checkpoints the retention rule keeps; deletes the rest that lie inside the trial directory.
  void ApplyRetention();
  // Writes `step` to the trial's recorded_checkpoint file, for a trial that keeps its checkpoints itself.
  void TellRecorded(std::int64_t step);
  // Writes the trial's TensorBoard scalars; a write that fails is a disk fault, and ends them.
  void ToTensorBoard(const std::function<void(TfEventsWriter&)>& write);

  ActiveTrial& trial_;
  std::int64_t recorded_evaluation_step_ = 0;  // of the trial's newest evaluation in the store when it started
  TrialProgress& progress_;
  std::filesystem::path trial_dir_;
  CheckpointRetention retention_;
  TrialSinkHooks hooks_;
  ReportReader reader_;
  bool manages_checkpoints_ = false;           // the trial keeps its checkpoints itself: no retention here
  std::int64_t recorded_step_told_ = -1;       // the newest recorded checkpoint's step, told to such a trial
  std::vector<KeptCheckpoint> checkpoints_;    // by step
  std::optional<TfEventsWriter> tensorboard_;  // gone after a write fails
  std::optional<ReportEnd> end_;
  bool warm_offered_ = false;
  std::string warm_program_;
  bool warm_reuse_ = false;
  std::string protocol_error_;
  std::string disk_fault_;
  bool lease_lost_ = false;
  bool start_seen_ = false;
  double spawned_at_ = 0;
  double last_written_at_;
};

}  // namespace dltune
