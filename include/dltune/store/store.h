// The experiment store: the single source of truth of every study — its spec, its trials, their measurements and
// checkpoints, and the tracking record the playbook asks for ("Untracked experiments might as well not exist").
//
// Everything else reads and writes studies through this interface. Backends: SQLite (embedded, one machine, many
// processes) and PostgreSQL (workers on many machines); OpenStore picks one from a URL. docs/store-schema.md
// documents the tables.
//
// Contract shared by every backend:
// - Thread safety: a Store object is used by one thread at a time; open one per thread or process. Any number of
//   Store objects, in any number of processes, may use the same database at once.
// - Atomicity: every method is one transaction; it either happens whole or throws and changes nothing.
// - Leases: ClaimNext hands a trial to one worker. Writes about a running trial name the lease (trial id and worker);
//   once the trial was reclaimed or finished, they throw LeaseLostError instead of writing.
// - Finished trials (completed, infeasible, failed) are immutable: every write about them throws.
// - Times are seconds since the Unix epoch. Heartbeats and staleness use the database server's clock (SQLite: the
//   machine's clock), so workers' clocks need not agree.
// - Errors: a user's mistake or an unusable database (bad URL, unreachable server, schema too new) throws
//   dltune::Error with a message naming the database; a database that cannot be reached or written in the middle of
//   its use (a server restart, a lost connection, a full disk) throws StoreUnavailableError.
// - A study deleted while it is used: the calls that write about it as a whole (trials added, claimed, reclaimed,
//   resumed or retried; notes, evaluations) throw StudyDeletedError naming it; a write about one of its trials
//   throws LeaseLostError; reads find nothing.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dltune/core/error.h"
#include "dltune/core/objective.h"
#include "dltune/space/param.h"
#include "dltune/study/trial.h"

namespace dltune {

// The store cannot be reached or written right now (the database server is down or restarting, the connection was
// lost, its disk is full): the call changed nothing that is known of, and may succeed if tried again later.
class StoreUnavailableError : public Error {
 public:
  explicit StoreUnavailableError(const std::string& message) : Error(message, ErrorKind::kUnavailable) {}
};

// A write about a trial the worker no longer holds (reclaimed after a missed heartbeat, or finished).
class LeaseLostError : public Error {
 public:
  explicit LeaseLostError(const std::string& message) : Error(message, ErrorKind::kConflict) {}
};

// The study is no longer in the store: it was deleted (dltune delete) while the command was using it.
class StudyDeletedError : public Error {
 public:
  explicit StudyDeletedError(const std::string& message) : Error(message, ErrorKind::kConflict) {}
};

// A study as the store records it.
struct StudyRecord {
  std::int64_t id = 0;
  std::string name;
  std::string uid;  // random, set when the study is created: names its trial directories, so no two studies share one
  std::string description;
  std::string spec_text;          // the spec exactly as read
  std::string spec_hash;          // SHA-256 of spec_text, hex
  std::string spec_path;          // where the spec was read from
  std::string command_line;       // the command that created the study
  std::string dltune_version;     // the dltune that created it
  std::string git_commit;         // commit of the user's working directory, if it was a git checkout
  std::optional<bool> git_dirty;  // whether that checkout had uncommitted changes; unknown for older studies
  std::string parent;             // the study it was planned from (its spec's procedure: block), "" if none
  // How to reproduce it beyond spec and commit (core/reproduction.h): a JSON object of the versions, machine,
  // environment and uncommitted patch it was created with; "" for a study created before dltune kept one.
  std::string reproduction;
  double created_at = 0;
  double updated_at = 0;  // last change to the study or any of its trials
};

// What CreateStudy needs; id and times are set by the store.
struct NewStudy {
  std::string name;
  std::string description;
  std::string spec_text;
  std::string spec_hash;
  std::string spec_path;
  std::string command_line;
  std::string dltune_version;
  std::string git_commit;
  std::optional<bool> git_dirty;
  std::string parent;
  std::string reproduction;  // StudyRecord::reproduction
  std::string git_patch;     // the uncommitted changes' patch as stored (Store::StudyPatch); "" when none
};

// A trial to add as pending.
struct NewTrial {
  std::uint64_t number = 0;  // unique within the study
  std::size_t substudy = 0;
  std::string substudy_label;  // "optimizer=adam"
  Assignment params;
  std::uint64_t seed = 0;
  std::uint64_t configuration = 0;  // the params' number (StudyPlan): the trial number in a study without replicas
  std::uint64_t replica = 0;
};

// A trial as the store records it.
// Where a trial's time went: seconds by phase, summed over its attempts (docs/store-schema.md, "time_split"):
//   scheduling  from its worker's slot coming free to its process starting (claim, sampler, trial files)
//   startup     from the process starting to its start line (exec, libraries, trial.json, model, resume)
//   data_load   reading and decoding the data set        } reported by the trial program's timing line
//   train       training steps (data_wait: of which      } (the built-in trainer sends one; an external
//               waiting for the next batch)              }  program may)
//   evaluation  periodic evaluations (not checkpoints)   }
//   checkpoint  writing checkpoints                      }
//   other       the rest of the process's lifetime (exit, what the program did not report)
//   store       the worker's store writes for the trial, made while the trial process ran (not part of the sum)
using TimeSplit = std::map<std::string, double>;

struct TrialRecord {
  std::int64_t id = 0;
  std::int64_t study_id = 0;
  std::uint64_t number = 0;
  std::size_t substudy = 0;
  std::string substudy_label;
  Assignment params;
  std::uint64_t seed = 0;
  std::uint64_t configuration = 0;  // trials of one configuration share their params and differ by seed
  std::uint64_t replica = 0;
  TrialState state = TrialState::kPending;
  std::string worker;  // holder while running; last holder afterwards
  std::optional<double> heartbeat_at;
  std::optional<double> started_at;  // first claim
  std::optional<double> ended_at;
  std::string reason;                     // why infeasible, failed or reclaimed
  int retries = 0;                        // times reclaimed after a lost worker
  std::optional<std::int64_t> best_step;  // retrospective optimal checkpoint selection
  std::optional<double> best_value;       // objective at best_step
  std::optional<double> final_value;      // objective at the last evaluation
  std::optional<int> exit_status;         // of the trial process, when it ended abnormally
  std::string stderr_tail;                // last lines of the trial process's stderr, when it failed
  TimeSplit time_split;                   // where its time went, over every attempt recorded so far
  // The machine resources its latest attempt used, a JSON object (docs/store-schema.md, "resources"): its GPUs, their
  // driver, peak memory and mean utilization. "{}" when none were recorded (a trial on the CPU).
  std::string resources = "{}";
};

// Proof that a worker holds a running trial; returned by ClaimNext.
struct TrialLease {
  std::int64_t trial_id = 0;
  std::string worker;
};

// One training step's measurements. Absent values are stored as NULL.
struct TrainMeasurement {
  std::int64_t step = 0;
  std::optional<double> loss;
  std::optional<double> learning_rate;
  std::optional<double> grad_norm;  // before clipping
  std::optional<bool> clipped;
  std::optional<double> step_time;  // seconds
  std::optional<double> data_wait;  // seconds spent waiting for input
  std::optional<double> examples_per_second;
};

// One evaluation value: metric `metric` on split `split` at `step`, over `examples` examples.
struct EvalMeasurement {
  std::int64_t step = 0;
  std::string split;   // "train", "valid", "valid_sample", "test"
  std::string metric;  // "loss", "error_rate", ...
  double value = 0;
  std::int64_t examples = 0;
};

// An evaluation row of a whole study, for analyses.
struct StudyEvalRow {
  std::uint64_t trial_number = 0;
  EvalMeasurement eval;
};

// A training-step row of a whole study, for analyses.
struct StudyTrainRow {
  std::uint64_t trial_number = 0;
  TrainMeasurement train;
};

// Measurements written together in one transaction (a trial's eval interval), with the best so far.
struct MeasurementBatch {
  std::vector<TrainMeasurement> train;
  std::vector<EvalMeasurement> evals;
  std::optional<std::int64_t> best_step;  // set both or neither
  std::optional<double> best_value;
};

enum class CheckpointPool { kLatest, kBest };
std::string CheckpointPoolName(CheckpointPool pool);

struct CheckpointRecord {
  std::int64_t id = 0;  // set by the store
  std::int64_t step = 0;
  std::string path;
  std::optional<double> objective;
  std::string checksum;
  CheckpointPool pool = CheckpointPool::kLatest;
  bool deleted = false;
  double created_at = 0;  // set by the store
};

// How a trial ended.
struct TrialOutcome {
  TrialState state = TrialState::kCompleted;  // completed, infeasible, failed or stopped
  std::string reason;
  std::optional<double> final_value;
  std::optional<int> exit_status;
  std::string stderr_tail;
  TimeSplit time_split;   // this attempt's; added to what earlier attempts recorded
  std::string resources;  // this attempt's resources (TrialRecord::resources), replacing earlier ones; "": unchanged
};

// A running trial put back by ReclaimStale.
struct ReclaimedTrial {
  std::uint64_t number = 0;
  std::string worker;      // the worker that stopped heartbeating
  TrialState new_state{};  // pending (to be retried) or failed (too many retries)
  bool counted = false;    // it made no progress since it was claimed, so the reclaim counted as a retry
};

// A note about a study, or a decision taken from it (the playbook's decision log: what was adopted and why).
enum class NoteKind { kNote, kDecision };
std::string NoteKindName(NoteKind kind);  // "note", "decision"
struct StudyNote {
  std::int64_t id = 0;  // set by the store
  NoteKind kind = NoteKind::kNote;
  std::string adopt;  // a decision's choice: "trial 12", "configuration 3"; "" for a note
  std::string text;   // the note, or why the decision was taken
  std::string author;
  // A note that marks a finding handled: its id ("periodic_validation", dltune doctor's ids); dltune next and dltune
  // doctor then pass over that finding of the study. "" for any other note.
  std::string resolves;
  double created_at = 0;  // set by the store
};

// One evaluation of a stored checkpoint on a split (dltune evaluate, dltune launch): its own record, apart from the
// trial's measurements, which stay as training left them.
struct CheckpointEvaluation {
  std::int64_t id = 0;  // set by the store
  std::uint64_t trial = 0;
  std::int64_t step = 0;
  std::string checkpoint_path;
  std::string checksum;  // sha256: of the checkpoint's state file, verified before evaluating
  std::string split;     // "test", "valid", ...
  std::map<std::string, double> metrics;
  std::int64_t examples = 0;
  double created_at = 0;  // set by the store
};

// A launch: the chosen checkpoint, evaluated once on the test split, adopted for use.
struct LaunchRecord {
  std::int64_t id = 0;  // set by the store
  std::string study;    // set by the store on reads
  CheckpointEvaluation evaluation;
  std::string reason;
  std::string author;      // user@host
  std::string git_commit;  // of the working directory the launch was made from
  std::optional<bool> git_dirty;
  std::string export_path;               // the exported model (TorchScript, or the checkpoint of an external program)
  std::optional<std::int64_t> decision;  // the decision (StudyNote id) it carried out; none when it followed none
  double created_at = 0;                 // set by the store
};

// A study with every record of it, as `dltune copy` moves it from one store to another (Store::ReadStudyCopy and
// Store::WriteStudyCopy). Ids are the source store's: the target gives its own, and maps the references between them.
struct StudyCopyTrial {
  TrialRecord trial;
  std::optional<std::int64_t> furthest_step;  // kept for counting retries after reclaims (docs/store-schema.md)
  std::vector<TrainMeasurement> train;        // by step
  std::vector<EvalMeasurement> evals;         // by step, split, metric
  std::vector<CheckpointRecord> checkpoints;  // by step, id; with their created_at
};
struct StudyCopy {
  StudyRecord study;
  std::string git_patch;                          // as stored (Store::StudyPatch)
  std::vector<StudyCopyTrial> trials;             // by number
  std::vector<StudyNote> notes;                   // notes and decisions, in order of writing
  std::vector<CheckpointEvaluation> evaluations;  // in order of recording, the launches' own included
  std::vector<LaunchRecord> launches;  // in order of recording; evaluation.id and decision name the copy's own records
};

// What Store::WriteStudyCopy writes.
struct StudyCopyWrite {
  // Ancestors first (each planned from one before it or from a study the target has), the study copied last.
  std::vector<StudyCopy> studies;
  std::string name;      // the last study's name in the target; "" keeps its own
  bool replace = false;  // a study of that name in the target is deleted in the same transaction, records and all
  // Called inside the transaction after each trial is written, with how many were (a test kills the copy there).
  std::function<void(std::size_t)> on_trial_written;
};

// How many trials of a study are in each state, read without loading them.
struct TrialCounts {
  std::array<std::int64_t, 6> by_state{};   // indexed by TrialState
  std::int64_t made = 0;                    // trials in the store (a study makes its planned trials as it goes)
  std::optional<std::uint64_t> max_number;  // the highest trial number made

  std::int64_t Count(TrialState state) const { return by_state[static_cast<std::size_t>(state)]; }
};

// A lock a store holds for this process (Store::LockTestSplit); released when destroyed, or when the process ends.
class StoreLock {
 public:
  virtual ~StoreLock() = default;
};

// A lease the store keeps alive on its own (Store::KeepAlive) for as long as this object lives.
class KeptLease {
 public:
  virtual ~KeptLease() = default;
};

class Store {
 public:
  virtual ~Store() = default;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // The URL this store was opened with, without any password.
  virtual std::string url() const = 0;
  // The schema version of the open database (see docs/store-schema.md).
  virtual int SchemaVersion() = 0;

  // Studies. CreateStudy throws Error if the name is taken.
  virtual StudyRecord CreateStudy(const NewStudy& study) = 0;
  virtual std::optional<StudyRecord> FindStudy(const std::string& name) = 0;
  virtual std::vector<StudyRecord> ListStudies() = 0;  // by creation time
  // The patch of uncommitted changes the study was created with, as stored (core/reproduction.h's PatchBytes gives
  // its bytes); "" when none was kept. Throws Error for an unknown study.
  virtual std::string StudyPatch(std::int64_t study_id) = 0;
  // Deletes the study and every record of it (trials, measurements, checkpoint records, notes, evaluations, launches)
  // in one transaction; its files are the caller's (DeleteStudy in dltune/run/delete_study.h). Throws Error for an
  // unknown study.
  virtual void DeleteStudy(std::int64_t study_id) = 0;

  // Trials. AddTrials adds pending trials (throws if a number exists); reads are ordered by number.
  virtual void AddTrials(std::int64_t study_id, const std::vector<NewTrial>& trials) = 0;
  virtual std::vector<TrialRecord> ListTrials(std::int64_t study_id) = 0;
  virtual std::optional<TrialRecord> FindTrial(std::int64_t study_id, std::uint64_t number) = 0;
  // Reads that cost the same whatever the study's size (indexed), for runners and summaries of large studies.
  virtual TrialCounts CountTrials(std::int64_t study_id) = 0;
  // The study's trials in `state`, by number; at most `limit` of them (0: every one).
  virtual std::vector<TrialRecord> ListTrialsInState(std::int64_t study_id, TrialState state,
                                                     std::size_t limit = 0) = 0;
  // Completed trials with a best value, best first in `direction` (ties: lower number); at most
  // `limit`. With `per_substudy`, only the best trial of each sub-study, in sub-study order.
  virtual std::vector<TrialRecord> BestTrials(std::int64_t study_id, Direction direction, std::size_t limit,
                                              bool per_substudy) = 0;

  // Atomically moves the lowest-numbered pending trial (of sub-study `substudy` when given) to running for
  // `worker`; nullopt when none is pending. No trial is ever handed to two workers.
  virtual std::optional<std::pair<TrialRecord, TrialLease>> ClaimNext(
      std::int64_t study_id, const std::string& worker, std::optional<std::size_t> substudy = std::nullopt) = 0;
  // Stamps the trial's heartbeat. Throws LeaseLostError if the lease is gone.
  virtual void Heartbeat(const TrialLease& lease) = 0;
  // Keeps the lease alive while the returned object lives, whatever the calling thread is doing: a thread and a
  // connection of the store's own stamp the trial's heartbeat at once, then whenever `every_seconds` passed without a
  // stamp (Heartbeat, Record), as long as the trial is running for the lease's worker. So only a worker whose process
  // is gone (or whose machine or connection is) goes stale, never one busy starting a trial on a loaded machine. The
  // object may be destroyed on any thread, also after the store; the store stops keeping leases when destroyed. A
  // store opened read-only keeps none.
  virtual std::unique_ptr<KeptLease> KeepAlive(const TrialLease& lease, double every_seconds) = 0;
  // Writes a batch of measurements (and the best so far) and stamps the heartbeat, in one transaction.
  virtual void Record(const TrialLease& lease, const MeasurementBatch& batch) = 0;
  // Deletes the trial's measurements after `step` (a resumed trial restarts from its checkpoint at `step`), and the
  // records of its checkpoints after `step` with them: a future trained again is recorded again, so that no
  // checkpoint or evaluation stands ahead of the measurements before it (the newest of them is where a trial taken
  // over may resume).
  virtual void TruncateAfter(const TrialLease& lease, std::int64_t step) = 0;
  // Ends the lease with a final state: completed, infeasible, failed, or stopped (resumable).
  virtual void Finish(const TrialLease& lease, const TrialOutcome& outcome) = 0;

  // Running trials of the study whose heartbeat is older than `grace_seconds` go back to pending, keeping their
  // measurements and checkpoints. A trial that recorded no training step beyond the furthest it had reached before
  // (its worker died before it got anywhere, perhaps because of it) counts one retry; one that made progress does
  // not, so killing workers never uses up a trial's retries. Past `max_retries` counted retries it becomes failed.
  virtual std::vector<ReclaimedTrial> ReclaimStale(std::int64_t study_id, double grace_seconds, int max_retries) = 0;
  // The same for the running trials held by `worker`, whatever their heartbeat: for a worker known to have died while
  // the machine stayed up (a process of this machine that no longer exists, whose trials heartbeated since it
  // started), so its trials need not wait out the grace period. The trial did not bring the machine down, and a
  // worker is killed from outside (Ctrl-C twice, kill, a scheduler), so these reclaims never count as retries.
  virtual std::vector<ReclaimedTrial> ReclaimWorker(std::int64_t study_id, const std::string& worker) = 0;
  // Stopped trials of the study go back to pending; returns how many.
  virtual int ResumeStopped(std::int64_t study_id) = 0;
  // Failed trials of the study go back to pending, to be tried again (they resume from their latest checkpoint);
  // the one way out of `failed`, asked for explicitly (`dltune run --retry-failed`). Returns how many.
  virtual int RetryFailed(std::int64_t study_id) = 0;
  // Records a new spec and its description for the study whose trials it keeps (the caller checked that the new spec
  // only appends trials: `dltune run --extend`); the trials it adds are made as workers ask, like the study's others.
  virtual void ExtendStudy(std::int64_t study_id, const std::string& spec_text, const std::string& spec_hash,
                           const std::string& description) = 0;

  // Measurements, ordered by step (evals by step, split, metric).
  virtual std::vector<TrainMeasurement> TrainSeries(std::int64_t trial_id) = 0;
  virtual std::vector<EvalMeasurement> EvalSeries(std::int64_t trial_id) = 0;
  // Every evaluation of every trial of the study, ordered by trial number, step, split, metric.
  virtual std::vector<StudyEvalRow> StudyEvaluations(std::int64_t study_id) = 0;
  // Every training step of every trial of the study, ordered by trial number, step (one query, not one per trial).
  virtual std::vector<StudyTrainRow> StudyTraining(std::int64_t study_id) = 0;

  // Checkpoints. AddCheckpoint returns the new id; MarkCheckpointDeleted records that its files are gone.
  virtual std::int64_t AddCheckpoint(const TrialLease& lease, const CheckpointRecord& checkpoint) = 0;
  virtual void MarkCheckpointDeleted(const TrialLease& lease, std::int64_t checkpoint_id) = 0;
  virtual std::vector<CheckpointRecord> ListCheckpoints(std::int64_t trial_id) = 0;  // ordered by step, id

  // The decision log. AddNote returns the note as stored; ListNotes orders by time of writing.
  virtual StudyNote AddNote(std::int64_t study_id, const StudyNote& note) = 0;
  virtual std::vector<StudyNote> ListNotes(std::int64_t study_id) = 0;
  // Evaluations of chosen checkpoints (of trial `evaluation.trial` of the study), in order of recording; throws
  // Error for a trial the study does not have.
  virtual CheckpointEvaluation AddEvaluation(std::int64_t study_id, const CheckpointEvaluation& evaluation) = 0;
  virtual std::vector<CheckpointEvaluation> ListEvaluations(std::int64_t study_id) = 0;
  // Records the launch and its evaluation together (one transaction). ListLaunches: of the study, or of every study
  // when study_id is 0, in order of recording.
  virtual LaunchRecord AddLaunch(std::int64_t study_id, const LaunchRecord& launch) = 0;
  virtual std::vector<LaunchRecord> ListLaunches(std::int64_t study_id) = 0;
  // Copying a study between stores (dltune copy). ReadStudyCopy reads every record of the study in one consistent
  // read. WriteStudyCopy writes the copies, every record as it was (times, uid, states and leases included: a running
  // trial stays running for its worker, reclaimed after its grace period), in one transaction: interrupted, it leaves
  // none of them. A name the target already has throws Error (conflict) unless `replace` allows it for the last
  // study. Returns the last study as written.
  virtual StudyCopy ReadStudyCopy(std::int64_t study_id) = 0;
  virtual StudyRecord WriteStudyCopy(const StudyCopyWrite& write) = 0;

  // Holds the study's test split for this process until the returned lock is destroyed: every evaluation of the test
  // split takes it, so that counting the earlier ones, evaluating and recording never interleave with another
  // process's, on this machine or another. A killed holder never keeps it. Throws Error (conflict) at once when another
  // process holds it.
  virtual std::unique_ptr<StoreLock> LockTestSplit(std::int64_t study_id) = 0;

 protected:
  Store() = default;
};

// Opens (creating or upgrading its schema if needed) the store at `url`:
//   sqlite:///absolute/path/file.db, sqlite://relative/path.db, or a plain file path (SQLite);
//   postgresql://user[:password]@host[:port]/dbname[?params] (also postgres://; libpq's URI syntax).
// Throws Error for an unknown scheme, an unreachable database or a schema newer than this dltune knows, and, when
// `create_if_missing` is false, for a SQLite file that does not exist yet.
std::unique_ptr<Store> OpenStore(const std::string& url, bool create_if_missing = true);

// Opens an existing store at `url` for reading only: nothing is written to it, so a mode-444 file, a read-only mount
// or a read-only PostgreSQL role serve (writes through it throw). A SQLite store of an older schema is read through an
// upgraded copy in memory; a PostgreSQL one is refused (Error) until a writing command upgrades it.
std::unique_ptr<Store> OpenStoreReadOnly(const std::string& url);
// Whether a store may be there to open: a SQLite URL's file exists; a PostgreSQL URL is assumed to (its server says).
bool StoreMayExist(const std::string& url);

// The URL used when none is given: $DLTUNE_STORAGE if set, else sqlite:///<cwd>/dltune.db.
std::string DefaultStoreUrl();
// `url`, or DefaultStoreUrl() when it is empty (a --storage option not given).
std::string StoreUrlOrDefault(const std::string& url);

// The schema version this dltune writes; databases at a newer version are refused.
inline constexpr int kStoreSchemaVersion = 9;

}  // namespace dltune
