// Internal: the Store implementation shared by every SQL backend.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "dltune/store/store.h"
#include "lease_keeper.h"
#include "sql_connection.h"

namespace dltune::internal {

// A store read without writing whose schema is older than this dltune's.
class StaleSchemaError : public Error {
 public:
  explicit StaleSchemaError(const std::string& message) : Error(message, ErrorKind::kConflict) {}
};

class SqlStore final : public Store {
 public:
  // Takes the connection and brings its schema up to date — or, `read_only`, checks that it is up to date (throwing
  // StaleSchemaError when it is older). `url` is what url() reports.
  SqlStore(std::unique_ptr<SqlConnection> connection, std::string url, bool read_only = false);

  std::string url() const override;
  int SchemaVersion() override;
  StudyRecord CreateStudy(const NewStudy& study) override;
  std::optional<StudyRecord> FindStudy(const std::string& name) override;
  std::vector<StudyRecord> ListStudies() override;
  std::string StudyPatch(std::int64_t study_id) override;
  void DeleteStudy(std::int64_t study_id) override;
  void AddTrials(std::int64_t study_id, const std::vector<NewTrial>& trials) override;
  std::vector<TrialRecord> ListTrials(std::int64_t study_id) override;
  std::optional<TrialRecord> FindTrial(std::int64_t study_id, std::uint64_t number) override;
  TrialCounts CountTrials(std::int64_t study_id) override;
  std::vector<TrialRecord> ListTrialsInState(std::int64_t study_id, TrialState state, std::size_t limit) override;
  std::vector<TrialRecord> BestTrials(std::int64_t study_id, Direction direction, std::size_t limit,
                                      bool per_substudy) override;
  std::optional<std::pair<TrialRecord, TrialLease>> ClaimNext(std::int64_t study_id, const std::string& worker,
                                                              std::optional<std::size_t> substudy) override;
  void Heartbeat(const TrialLease& lease) override;
  std::unique_ptr<KeptLease> KeepAlive(const TrialLease& lease, double every_seconds) override;
  void Record(const TrialLease& lease, const MeasurementBatch& batch) override;
  void TruncateAfter(const TrialLease& lease, std::int64_t step) override;
  void Finish(const TrialLease& lease, const TrialOutcome& outcome) override;
  std::vector<ReclaimedTrial> ReclaimStale(std::int64_t study_id, double grace_seconds, int max_retries) override;
  std::vector<ReclaimedTrial> ReclaimWorker(std::int64_t study_id, const std::string& worker) override;
  int ResumeStopped(std::int64_t study_id) override;
  int RetryFailed(std::int64_t study_id) override;
  void ExtendStudy(std::int64_t study_id, const std::string& spec_text, const std::string& spec_hash,
                   const std::string& description) override;
  std::vector<TrainMeasurement> TrainSeries(std::int64_t trial_id) override;
  std::vector<EvalMeasurement> EvalSeries(std::int64_t trial_id) override;
  std::vector<StudyEvalRow> StudyEvaluations(std::int64_t study_id) override;
  std::vector<StudyTrainRow> StudyTraining(std::int64_t study_id) override;
  std::int64_t AddCheckpoint(const TrialLease& lease, const CheckpointRecord& checkpoint) override;
  void MarkCheckpointDeleted(const TrialLease& lease, std::int64_t checkpoint_id) override;
  std::vector<CheckpointRecord> ListCheckpoints(std::int64_t trial_id) override;
  StudyNote AddNote(std::int64_t study_id, const StudyNote& note) override;
  std::vector<StudyNote> ListNotes(std::int64_t study_id) override;
  CheckpointEvaluation AddEvaluation(std::int64_t study_id, const CheckpointEvaluation& evaluation) override;
  std::vector<CheckpointEvaluation> ListEvaluations(std::int64_t study_id) override;
  LaunchRecord AddLaunch(std::int64_t study_id, const LaunchRecord& launch) override;
  std::vector<LaunchRecord> ListLaunches(std::int64_t study_id) override;
  std::unique_ptr<StoreLock> LockTestSplit(std::int64_t study_id) override;
  StudyCopy ReadStudyCopy(std::int64_t study_id) override;
  StudyRecord WriteStudyCopy(const StudyCopyWrite& write) override;

 private:
  // Runs `body` in a transaction, retrying it when it loses a race with another writer.
  template <typename F>
  auto Transaction(bool write, F&& body) -> decltype(body());
  // Fills in the dialect's `{now}` and `{skip_locked}`.
  std::string Sql(const std::string& text) const;
  // Puts back the running trials of the study that `condition` (SQL over trials, with one `?` bound to
  // `condition_arg`) selects; see ReclaimStale. `why` says what happened to their worker. With max_retries unset, no
  // reclaim counts as a retry.
  std::vector<ReclaimedTrial> Reclaim(std::int64_t study_id, const std::string& condition,
                                      const SqlValue& condition_arg, const std::string& why,
                                      std::optional<int> max_retries);
  std::int64_t CheckLease(const TrialLease& lease);
  // Inside a transaction: throws StudyDeletedError unless the study is in the store.
  void RequireStudy(std::int64_t study_id);
  void TouchStudy(std::int64_t study_id);
  // Inside a write transaction: inserts the evaluation and returns its id; ReadEvaluation reads one back.
  std::int64_t InsertEvaluation(std::int64_t study_id, const CheckpointEvaluation& evaluation);
  CheckpointEvaluation ReadEvaluation(std::int64_t evaluation_id);
  // Counts `count` trials of the study moved by `transition` (from its one source state, or none for new trials) to
  // `to` in trial_counts. Throws Error when the transition does not reach `to`.
  void CountMove(std::int64_t study_id, TrialTransition transition, TrialState to, std::int64_t count = 1);

  // Inside a write transaction: writes one study of a copy under `name` (deleting the store's study of that name
  // first with `replace`) and returns its id; counts the trials written in `trials_written`.
  std::int64_t InsertStudyCopy(const StudyCopy& copy, const std::string& name, bool replace,
                               const std::function<void(std::size_t)>& on_trial_written, std::size_t& trials_written);

  std::unique_ptr<SqlConnection> connection_;
  std::string url_;
  std::string now_;
  std::string skip_locked_;
  std::unique_ptr<LeaseKeeper> keeper_;  // after connection_, which it opens another of; null when read-only
  std::map<std::int64_t, std::string> study_names_;  // of the studies read through this store, for messages
};

}  // namespace dltune::internal
