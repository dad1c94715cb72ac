// Evaluating a chosen checkpoint on a split, and launching it: the playbook's last step of a study, checking the
// test set once, at the end, on the chosen checkpoint ("After exploration concludes": "we should also consider
// checking the performance on the test set").
//
// A built-in workload's checkpoint is evaluated by the trainer's own evaluation (the batches and metrics of an
// evaluation during training); an external program's by the spec's `evaluate_command:`, which reports `eval` lines
// like a trial (docs/trial-protocol.md, "Evaluating a checkpoint"). Each evaluation is a record of its own
// (Store::AddEvaluation), never a change to the trial, whose records stay as training left them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"
#include "dltune/store/store.h"

namespace dltune {

// The trial and checkpoint a launch or an evaluation takes.
struct ChosenCheckpoint {
  TrialRecord trial;
  CheckpointRecord checkpoint;
  std::string why;  // "the best trial", "configuration 3 (best mean of 5 replicas), its median replica"
  std::optional<std::int64_t> decision;  // the decision (StudyNote id) it carries out, when it follows one
};

// What a decision (`dltune decide`, a StudyNote of kind decision) adopts, read from its note.
struct Adoption {
  std::int64_t note = 0;       // the decision's StudyNote id
  bool configuration = false;  // a configuration (its median replica is launched), else one trial
  std::uint64_t number = 0;    // the configuration's or the trial's number
  std::string text;            // as recorded: "configuration 0 (num_layers=1)"
  double decided_at = 0;
};

// The latest decision recorded on the study, or nullopt when it has none. Throws Error for a decision whose adoption
// names neither a trial nor a configuration.
std::optional<Adoption> LatestDecision(const StudyData& data);

// The trial and checkpoint the study's test split is evaluated on (a launch, `evaluate --split test`): what the latest
// decision adopts (a trial, or a configuration's median replica), else the best as ChooseCheckpoint takes it, saying
// that no decision was recorded. `trial` against the decision is refused (Error) unless `overrule_decision`.
ChosenCheckpoint ChooseForTheTestSplit(Store& store, const StudyData& data, std::optional<std::uint64_t> trial,
                                       bool overrule_decision);

// The trial `trial` (any completed one), or the study's best: by best objective, or in a study with replicas the
// configuration with the best mean and its median replica (not a lucky seed); with its best step's checkpoint
// (BestCheckpoint). Throws Error (invalid input) when the trial does not exist or did not complete, or when none
// completed; IoError-free: the files are not read here.
ChosenCheckpoint ChooseCheckpoint(Store& store, const StudyData& data, std::optional<std::uint64_t> trial);

// Checks that the checkpoint's files are the ones recorded: its checksum (CanonicalChecksum) is compared with the
// SHA-256 of the file at its path (for a directory, the state.pt in it). Returns true when it was compared, false when
// none is recorded (an external program that reports none); throws CorruptError when it differs, IoError when it cannot
// be read.
bool VerifyCheckpoint(const CheckpointRecord& checkpoint);

// The studies of `study`'s lineage: every study linked to it through the parents recorded by `dltune plan`, either
// way (its ancestors, their descendants), it included; oldest first. They share the project's data, so they share
// its test set: the playbook's "check the test set once, at the end" holds for the lineage, not for each study.
std::vector<StudyRecord> LineageOf(Store& store, const StudyRecord& study);

// One look at a lineage's test split: a launch, or `dltune evaluate --split test`.
struct TestLook {
  std::string study;                   // the study whose trial was evaluated
  CheckpointEvaluation evaluation;     // split "test"
  std::optional<std::int64_t> launch;  // the launch it was part of; none for an evaluation alone
};

// Every look at the test split of `study`'s lineage (LineageOf), oldest first.
std::vector<TestLook> TestLooks(Store& store, const StudyRecord& study);

// A lineage's test split held by this process (Store::LockTestSplit on its oldest study) after checking that it was
// not evaluated before, or that a second look was asked for: what EvaluateChosen needs to evaluate the test split of
// one of its studies. Released when destroyed.
class TestSplitHold {
 public:
  std::int64_t study_id() const { return study_id_; }

 private:
  friend TestSplitHold HoldTestSplit(Store& store, const StudyRecord& study, bool again);
  TestSplitHold(std::unique_ptr<StoreLock> lock, std::int64_t study_id) : lock_(std::move(lock)), study_id_(study_id) {}

  std::unique_ptr<StoreLock> lock_;
  std::int64_t study_id_;
};

// Holds the test split of the study's lineage. Throws Error (invalid input) when any study of the lineage evaluated
// it before and not `again` (the playbook checks it once, at the end), naming each look; Error (conflict) while
// another process holds it.
TestSplitHold HoldTestSplit(Store& store, const StudyRecord& study, bool again);

// Evaluates the checkpoint on `split` (see the file comment) and, when `export_path` is given and the workload is
// built in, writes its model as TorchScript there. Returns the evaluation, not yet recorded. Built-in workloads are
// evaluated in this process; an evaluate_command runs with /bin/sh. The test split is evaluated only under a
// `test_split` hold of the study (HoldTestSplit): without one, throws Error and evaluates nothing.
CheckpointEvaluation EvaluateChosen(const StudyData& data, const ChosenCheckpoint& chosen, const std::string& split,
                                    const std::filesystem::path& export_path,
                                    const TestSplitHold* test_split = nullptr);

// What `dltune evaluate` is asked.
struct EvaluateRequest {
  std::string study;
  std::optional<std::uint64_t> trial;  // the study's best when absent
  std::string split = "valid";
  bool again = false;              // evaluate the test split although it was evaluated before
  bool overrule_decision = false;  // the test split: evaluate `trial` although the latest decision adopts another
};

// An evaluation recorded, with what it took.
struct EvaluationDone {
  ChosenCheckpoint chosen;
  bool checksum_verified = false;  // false: the checkpoint has no checksum recorded, so its file was not checked
  CheckpointEvaluation evaluation;
  int test_evaluations = 0;  // of the study's lineage, this one included
};

// Chooses and verifies the checkpoint, evaluates it on the split and records the evaluation. The test split is held
// (Store::LockTestSplit) from the count of earlier evaluations to the record, and a second look refused unless
// `again`: Error (invalid input), or (conflict) while another process evaluates it.
EvaluationDone Evaluate(Store& store, const EvaluateRequest& request);

// What `dltune launch` is asked.
struct LaunchRequest {
  std::string study;
  std::optional<std::uint64_t> trial;  // the study's best when absent
  std::string reason;                  // why this launch: required, non-empty
  bool again = false;                  // evaluate the test set although it was evaluated before
  std::filesystem::path export_path;   // "" = <study directory>/launches/launch_<n>/model.pt
  bool overrule_decision = false;      // launch `trial` although the latest decision adopts another
};

// How many times the test split of the study's lineage was evaluated through dltune (launches and evaluations).
int TestEvaluations(Store& store, const StudyRecord& study);

// A launch recorded, with what it took.
struct LaunchDone {
  LaunchRecord launch;
  ChosenCheckpoint chosen;
  bool checksum_verified = false;  // false: the checkpoint has no checksum recorded, so its file was not checked
  int test_evaluations = 0;        // of the study's lineage, this one included
};

// Chooses (ChooseForTheTestSplit: the decision's choice), verifies, evaluates on the test split once, exports and
// records a launch (its evaluation, the user's git
// commit and dirty flag, the reason, who, when), holding the test split (Store::LockTestSplit) throughout, so that
// two launches at once never both evaluate it or share a model file. Refuses (Error, invalid input) a study whose
// test split was evaluated before unless `again`, an empty reason, and everything ChooseCheckpoint refuses; (conflict)
// while another process evaluates the test split.
LaunchDone Launch(Store& store, const LaunchRequest& request);

// "user@host" of whoever runs this process.
std::string CurrentAuthor();

}  // namespace dltune
