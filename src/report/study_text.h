// The store's records as text for a terminal: the tracking table of the studies and their lineage, a study's record
// with its trials, one trial's details, launches, decisions and two studies compared (what `dltune studies`, `show`,
// `launches`, `evaluate`, `launch`, `decide`, `compare` and the end of `dltune run` print). "Safe to print": what
// comes from specs and stores in the text cannot act on the terminal (TerminalSafe).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dltune/analyze/analysis.h"
#include "dltune/analyze/trial_variance.h"
#include "dltune/store/store.h"

namespace dltune {

// What a throughput sweep (a study planned by dltune plan throughput) found, in the words the tables that list
// studies give it instead of a best trial: a sweep measures speed, so its result is the batch size it recommends and
// that batch size's examples per second, never the validation error of a batch size.
struct StudyResult {
  std::string text;   // "batch size 256 (25600 examples/s; perfect scaling up to 128)", "no batch size recommended:
                      // ...", or "- (not measured yet)"
  std::string brief;  // "batch size 256", "no batch size", "-": for a narrow column
};
// The result of study `study` when it is a throughput sweep; nullopt for any other study (its best trial is its
// result) and for a spec this dltune cannot read. Reads the sweep's measurements (a few trials).
std::optional<StudyResult> ThroughputResultOf(Store& store, const StudyRecord& study);
// The same from a study's records, already read with their measurements.
std::optional<StudyResult> ThroughputResultOf(const StudyData& data);

// The tracking record of `studies`, one row each, every column (`dltune studies --wide`, the end of `dltune run`).
// Safe to print.
std::string TrackingTable(Store& store, const std::vector<StudyRecord>& studies);
// The same within 120 columns, with each study's latest note and its git tree's state, and a legend below. Safe to
// print.
std::string CompactTrackingTable(Store& store, const std::vector<StudyRecord>& studies);
// Every study of the store: the compact tracking table, or with `wide` the full one; a line when there is none.
std::string StudiesText(Store& store, bool wide);
// Every study of the store under the study it was planned from, one line each: kind, trials and best value. Safe to
// print.
std::string StudyTreeText(Store& store);

// A study's record (spec, objective, best trials, time, notes, launches) and its trials, one row each with the
// params that differ: every trial when `all` or when it has at most `limit`, else the running ones and the best
// `limit` completed. Safe to print.
std::string StudyText(Store& store, const StudyRecord& study, std::size_t limit, bool all);
// Trial `number` of `study`: its record, params, measurements, checkpoints and the end of its stderr. Throws Error
// when the study has no such trial. Safe to print.
std::string TrialText(Store& store, const StudyRecord& study, std::uint64_t number);

// "error_rate 0.1123, accuracy 0.8877, loss 0.31, ...": an evaluation's metrics, those three first, the per-class
// counts (correct_class_*) left out; "-" for none.
std::string MetricsText(const std::map<std::string, double>& metrics);
// Whether a checkpoint's file was checked against the checksum recorded when it was written.
const char* ChecksumText(bool verified);
// Every look at the test split as a table, oldest first: each launch of `launches` (when, who, trial, step, test
// metrics, commit, model and reason) and each test evaluation of `evaluations` (study name, evaluation) that was
// no launch's. Safe to print.
std::string LaunchesTable(const std::vector<LaunchRecord>& launches,
                          const std::vector<std::pair<std::string, CheckpointEvaluation>>& evaluations = {});

// What a decision adopts, as the decision log records it: "trial 12 (optimizer=adam)" or "configuration 3 (...)",
// from a trial (12, trial:12) or a configuration (configuration:3, config:3, c3). Throws Error when `choice` is
// neither or the study has no such trial or configuration.
std::string AdoptedChoice(const StudyData& data, const std::string& choice);

// Studies `a` and `b` compared (`dltune compare`): their best results, the best of an equal budget and the verdict.
// Safe to print.
std::string ComparisonText(const std::string& a, const std::string& b, const StudyComparison& comparison);

}  // namespace dltune
