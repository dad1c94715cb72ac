// The store's records as text: the tracking tables, the lineage tree, a study's and a trial's records, launches and
// comparisons.
#include "report/study_text.h"

#include <algorithm>
#include <functional>
#include <regex>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "analyze/time_split.h"
#include "core/strings.h"
#include "dltune/analyze/throughput.h"
#include "dltune/core/error.h"
#include "dltune/report/study_data.h"
#include "dltune/study/study_spec.h"
#include "report/reproduce_text.h"
#include "report/text_table.h"
#include "store/recorded_spec.h"
#include "store/tracking.h"
#include "store/trial_resources.h"

namespace dltune {
namespace {

std::string FormatTime(std::optional<double> seconds) {
  return seconds ? FormatClockTime(*seconds, "%Y-%m-%d %H:%M:%S", TimeZone::kLocal) : "-";
}

std::string FormatNumber(std::optional<double> value) { return value ? fmt::format("{:.6g}", *value) : "-"; }

// ", user's commit abc…" (with uncommitted changes when they were); "" without a commit.
std::string CommitText(const std::string& commit, std::optional<bool> dirty) {
  if (commit.empty()) return "";
  return ", user's commit " + commit + (dirty.value_or(false) ? " with uncommitted changes" : "");
}

std::string NoteLabel(const StudyNote& note) {
  return NoteKindName(note.kind) + " " + FormatClockTime(note.created_at, "%Y-%m-%d %H:%M", TimeZone::kLocal);
}

// "adopt trial 12 (optimizer=adam): because ..." or the note's text, with its author.
std::string NoteText(const StudyNote& note) {
  const std::string text = note.kind == NoteKind::kDecision ? "adopt " + note.adopt + ": " + note.text : note.text;
  return note.author.empty() ? text : text + " (" + note.author + ")";
}

// The metric of an evaluation, e.g. "error_rate 0.1123"; "-" when it lacks it.
std::string FormatMetric(const std::map<std::string, double>& metrics, const std::string& metric) {
  const auto it = metrics.find(metric);
  return it == metrics.end() ? "-" : fmt::format("{} {:.6g}", metric, it->second);
}

std::string BestText(const std::optional<BestTrial>& best) {
  if (!best) return "-";
  return fmt::format("{} — trial {}{}{}", best->ValueText(), best->number, best->stats ? " (median replica)" : "",
                     best->step ? fmt::format(", step {}", *best->step) : std::string());
}

}  // namespace

std::optional<StudyResult> ThroughputResultOf(const StudyData& data) {
  if (data.spec.procedure.kind != "throughput") return std::nullopt;
  const Throughput throughput = AnalyzeThroughput(data);
  if (!throughput.untrustworthy.empty()) {
    return StudyResult{.text = "no batch size recommended: " + throughput.untrustworthy, .brief = "no batch size"};
  }
  const auto row = std::find_if(throughput.rows.begin(), throughput.rows.end(), [&](const ThroughputRow& r) {
    return throughput.worth_using && r.batch_size == *throughput.worth_using;
  });
  if (row == throughput.rows.end() || !row->examples_per_second) {
    return StudyResult{.text = "- (not measured yet)", .brief = "-"};
  }
  std::string text = fmt::format("batch size {} ({:.0f} examples/s", row->batch_size, *row->examples_per_second);
  if (throughput.perfect_until) text += fmt::format("; perfect scaling up to {}", *throughput.perfect_until);
  if (throughput.input_bound) text += "; input-bound";
  return StudyResult{.text = text + ")", .brief = fmt::format("batch size {}", row->batch_size)};
}

std::optional<StudyResult> ThroughputResultOf(Store& store, const StudyRecord& study) {
  // Most studies are not sweeps: their spec is not parsed for it (the dashboard lists every study every few seconds).
  if (study.spec_text.find("throughput") == std::string::npos) return std::nullopt;
  try {
    if (RecordedSpec(study).procedure.kind != "throughput") return std::nullopt;
    return ThroughputResultOf(LoadStudyData(store, study.name));
  } catch (const Error&) {
    return std::nullopt;  // a spec this dltune cannot read: the table shows what the store's summary gives
  }
}

std::string TrackingTable(Store& store, const std::vector<StudyRecord>& studies) {
  TextTable table({"study", "goal", "spec", "trials", "best", "decision", "reproduce with"});
  for (const auto& study : studies) {
    const StudySummary summary = SummarizeStudy(store, study);
    std::string decision = "-";
    for (const StudyNote& note : store.ListNotes(study.id)) {
      if (note.kind == NoteKind::kDecision) decision = NoteText(note);
    }
    const std::optional<StudyResult> result = ThroughputResultOf(store, study);
    table.AddRow({study.name, summary.goal.empty() ? study.description : summary.goal, study.spec_path,
                  summary.StateText(),
                  result         ? result->text
                  : summary.best ? fmt::format("{} {}", summary.objective.Name(), BestText(summary.best))
                                 : "-",
                  decision, summary.reproduce});
  }
  return table.Render();
}

namespace {

// `text` cut to `width` characters (code points), ending in "…" when cut.
std::string Fit(const std::string& text, std::size_t width) {
  std::size_t points = 0, at = 0;
  for (; at < text.size(); ++at) {
    if ((static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) continue;  // a continuation byte
    if (++points > width) break;
  }
  if (at >= text.size()) return text;
  // Back to the start of the code point before the one that did not fit, to make room for "…".
  std::size_t cut = at;
  do {
    --cut;
  } while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80);
  return text.substr(0, cut) + "…";
}

// "7 done, 2 run, 1 inf": the trials by state in a few characters.
std::string ShortStates(const StudySummary& summary) {
  static const std::pair<TrialState, const char*> kShort[] = {
      {TrialState::kCompleted, "done"}, {TrialState::kRunning, "run"},    {TrialState::kPending, "pend"},
      {TrialState::kStopped, "stop"},   {TrialState::kInfeasible, "inf"}, {TrialState::kFailed, "fail"}};
  std::string text;
  for (const auto& [state, name] : kShort) {
    if (summary.Count(state) > 0) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", summary.Count(state), name);
  }
  return text.empty() ? "none" : text;
}

}  // namespace

std::string CompactTrackingTable(Store& store, const std::vector<StudyRecord>& studies) {
  // At most these widths for the first columns; the note takes what is left of 120 columns.
  constexpr std::size_t kStudy = 30, kTrials = 24, kBest = 20, kWidth = 120;
  const std::vector<std::string> header = {"study", "trials", "best", "tree", "latest note or decision"};
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> notes;
  std::vector<std::size_t> widths(4);
  for (std::size_t c = 0; c < 4; ++c) widths[c] = header[c].size();
  for (const auto& study : studies) {
    const StudySummary summary = SummarizeStudy(store, study, 0);
    std::string best = "-";
    if (const std::optional<StudyResult> result = ThroughputResultOf(store, study)) {
      best = result->brief;
    } else if (summary.best) {
      best = summary.best->stats && summary.best->stats->HalfWidth()
                 ? fmt::format("{:.4g} ±{:.2g} t{}", summary.best->value, *summary.best->stats->HalfWidth(),
                               summary.best->number)
                 : fmt::format("{:.4g} t{}", summary.best->value, summary.best->number);
    }
    std::string note = "-";
    if (const std::vector<StudyNote> all = store.ListNotes(study.id); !all.empty()) {
      const StudyNote& latest = all.back();
      note = latest.kind == NoteKind::kDecision ? "decided: adopt " + latest.adopt + ": " + latest.text
             : latest.resolves.empty()          ? latest.text
                                                : latest.resolves + " handled: " + latest.text;
    }
    const char* tree = !study.git_dirty ? "-" : *study.git_dirty ? "dirty" : "clean";
    rows.push_back(
        {Fit(TerminalSafe(study.name, false), kStudy), Fit(ShortStates(summary), kTrials), Fit(best, kBest), tree});
    notes.push_back(TerminalSafe(note, false));
    for (std::size_t c = 0; c < 4; ++c) widths[c] = std::max(widths[c], Columns(rows.back()[c]));
  }
  std::size_t used = 0;
  for (const std::size_t width : widths) used += width + 2;
  const std::size_t note_width = used + 20 <= kWidth ? kWidth - used : 20;
  TextTable table(header);
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].push_back(Fit(notes[i], note_width));
    table.AddRow(rows[i]);
  }
  return table.Render() +
         "best: the objective and its trial (± the 95% interval with replicas); a throughput sweep's batch size.\n"
         "tree: the git working tree the study was created from. dltune studies --wide: goals, specs, decisions and\n"
         "the command that reproduces each.\n";
}

std::string StudyTreeText(Store& store) {
  const auto studies = store.ListStudies();
  std::map<std::int64_t, std::vector<const StudyRecord*>> children;
  std::set<std::string> names;
  for (const auto& study : studies) names.insert(study.name);
  std::vector<const StudyRecord*> roots;
  for (const auto& study : studies) {
    // A parent no longer in this store leaves its children as roots.
    if (const StudyRecord* parent = ParentAmong(studies, study)) {
      children[parent->id].push_back(&study);
    } else {
      roots.push_back(&study);
    }
  }
  std::string out;
  std::set<std::int64_t> drawn;
  const std::function<void(const StudyRecord&, const std::string&, bool, bool)> draw =
      [&](const StudyRecord& study, const std::string& prefix, bool last, bool root) {
        drawn.insert(study.id);
        const StudySummary summary = SummarizeStudy(store, study, 0);
        std::string line = root ? "" : prefix + (last ? "└─ " : "├─ ");
        line += study.name;
        std::string kind;
        try {
          kind = RecordedSpec(study).procedure.kind;
        } catch (const Error&) {
        }
        if (!kind.empty()) line += " (" + kind + ")";
        if (const std::optional<StudyResult> result = ThroughputResultOf(store, study)) {
          line += fmt::format("  {}; {}", summary.StateText(), result->text);
        } else {
          line += fmt::format("  {}; best {}", summary.StateText(),
                              summary.best ? summary.best->ValueText() : std::string("-"));
        }
        if (!study.parent.empty() && ParentAmong(studies, study) == nullptr) {
          line += " [parent " + study.parent + " not here" +
                  (names.count(study.parent) == 0 ? "]"
                   : study.parent == study.name   ? ": it names itself]"
                                                  : ": the study named " + study.parent + " now is a later one]");
        }
        out += TerminalSafe(line, false) + "\n";
        const auto& kids = children[study.id];
        for (std::size_t i = 0; i < kids.size(); ++i) {
          if (drawn.count(kids[i]->id) != 0) continue;
          draw(*kids[i], root ? "" : prefix + (last ? "   " : "│  "), i + 1 == kids.size(), false);
        }
      };
  for (const StudyRecord* root : roots) draw(*root, "", true, true);
  // Parents form no cycle in creation order; should a store's records say otherwise, every study is still listed.
  for (const auto& study : studies) {
    if (drawn.count(study.id) == 0) draw(study, "", true, true);
  }
  return out;
}

std::string StudiesText(Store& store, bool wide) {
  const auto studies = store.ListStudies();
  if (studies.empty()) return fmt::format("{} has no studies yet\n", store.url());
  return wide ? TrackingTable(store, studies) : CompactTrackingTable(store, studies);
}

namespace {

// The trials `dltune show` lists: every one, or for a large study the best ones and the running ones.
std::vector<TrialRecord> TrialsToShow(Store& store, const StudySummary& summary, std::size_t limit, bool all,
                                      std::string& note) {
  const std::int64_t made = store.CountTrials(summary.study.id).made;
  if (all || made <= static_cast<std::int64_t>(limit)) return store.ListTrials(summary.study.id);
  std::vector<TrialRecord> shown = store.ListTrialsInState(summary.study.id, TrialState::kRunning, limit);
  const std::size_t running = shown.size();
  for (auto& trial : store.BestTrials(summary.study.id, summary.objective.direction, limit, false)) {
    shown.push_back(std::move(trial));
  }
  note = fmt::format(
      "  showing {} running and the {} best completed of {} trials; --all lists every one (or "
      "dltune export)\n",
      running, shown.size() - running, summary.trial_count);
  return shown;
}

}  // namespace

std::string StudyText(Store& store, const StudyRecord& study, std::size_t limit, bool all) {
  const StudySummary summary = SummarizeStudy(store, study);
  std::string note;
  const auto trials = TrialsToShow(store, summary, limit, all, note);
  std::string out = fmt::format("study {}", study.name);
  if (!study.description.empty()) out += ": " + study.description;
  out += "\n\n";
  TextTable facts({"", ""});
  if (!summary.goal.empty()) facts.AddRow({"goal", summary.goal});
  facts.AddRow({"spec", fmt::format("{} (sha256 {})", study.spec_path, study.spec_hash.substr(0, 12))});
  facts.AddRow({"created", fmt::format("{} by dltune {}{}", FormatTime(study.created_at), study.dltune_version,
                                       CommitText(study.git_commit, study.git_dirty))});
  if (!study.parent.empty()) facts.AddRow({"planned from", "study " + study.parent});
  facts.AddRow({"updated", FormatTime(study.updated_at)});
  facts.AddRow({"objective", summary.objective.Describe()});
  facts.AddRow({"trials", summary.StateText()});
  if (const std::optional<StudyResult> result = ThroughputResultOf(store, study)) {
    facts.AddRow({"batch size", result->text});  // a sweep measures speed: no batch size is best by the objective
  } else {
    facts.AddRow({"best", BestText(summary.best)});
    for (const auto& best : summary.best_per_substudy) facts.AddRow({"  " + best.substudy_label, BestText(best)});
    if (summary.more_substudies) facts.AddRow({"  ...", "more sub-studies (dltune export lists every trial)"});
  }
  facts.AddRow({"reproduce with", summary.reproduce});
  for (const auto& [name, text] : ReproductionFacts(study)) facts.AddRow({name, text});
  // Summing every trial's record costs a read of all of them: done up to a size that reads in a moment.
  constexpr std::int64_t kMaxTrialsTimed = 20000;
  facts.AddRow({"time of all trials", summary.trial_count <= kMaxTrialsTimed
                                          ? DescribeTimeSplit(SumTimeSplits(store.ListTrials(study.id)))
                                          : fmt::format("not summed over {} trials", summary.trial_count)});
  if (summary.trial_count <= kMaxTrialsTimed) {
    if (const std::string gpus = DescribeGpuUsage(store.ListTrials(study.id)); !gpus.empty()) {
      facts.AddRow({"GPUs of all trials", TerminalSafe(gpus)});
    }
    if (const std::string runtimes = TrialRuntimesText(store.ListTrials(study.id)); !runtimes.empty()) {
      facts.AddRow({"trial runtimes", runtimes});
    }
  }
  for (const StudyNote& logged : store.ListNotes(study.id)) facts.AddRow({NoteLabel(logged), NoteText(logged)});
  std::set<std::int64_t> launched;  // the evaluations that were launches
  for (const LaunchRecord& launch : store.ListLaunches(study.id)) {
    launched.insert(launch.evaluation.id);
    facts.AddRow({fmt::format("launch {}", launch.id),
                  fmt::format("{} by {}: trial {} step {}, test {}; {} ({})", FormatTime(launch.created_at),
                              launch.author, launch.evaluation.trial, launch.evaluation.step,
                              FormatMetric(launch.evaluation.metrics, summary.objective.metric), launch.reason,
                              launch.export_path)});
  }
  for (const CheckpointEvaluation& e : store.ListEvaluations(study.id)) {  // every look at the test set is listed
    if (e.split != "test" || launched.count(e.id) != 0) continue;
    facts.AddRow({fmt::format("test evaluation {}", e.id),
                  fmt::format("{}: trial {} step {}, test {} (dltune evaluate --split test)", FormatTime(e.created_at),
                              e.trial, e.step, FormatMetric(e.metrics, summary.objective.metric))});
  }
  const std::string rendered = facts.Render(2);
  out += rendered.substr(rendered.find('\n') + 1);

  // One row per trial; params that differ between trials as columns (ids), absent ones as "-"; the others once.
  struct Seen {
    Value first;
    bool varies = false;
    std::size_t count = 0;
  };
  std::map<std::string, Seen> seen_by_id;
  std::vector<std::string> param_ids;
  bool replicated = false;
  for (const auto& trial : trials) {
    replicated = replicated || trial.replica > 0;
    for (const auto& [id, value] : trial.params) {
      const auto [it, added] = seen_by_id.try_emplace(id, Seen{value});
      ++it->second.count;
      if (added) {
        param_ids.push_back(id);
      } else if (!it->second.varies && !SameValue(it->second.first, value)) {
        it->second.varies = true;
      }
    }
  }
  std::string constant;
  std::erase_if(param_ids, [&](const std::string& id) {
    const Seen& seen = seen_by_id.at(id);
    if (seen.varies || seen.count < trials.size()) return false;  // a conditional param is absent from some
    constant += (constant.empty() ? "" : ", ") + id + "=" + FormatValue(seen.first);
    return true;
  });
  std::vector<std::string> header = {"trial", "sub-study", "state", "best", "best step", "final"};
  if (replicated) header.insert(header.begin() + 1, {"config", "replica"});
  header.insert(header.end(), param_ids.begin(), param_ids.end());
  TextTable table(header);
  for (const auto& trial : trials) {
    std::vector<std::string> row = {fmt::format("{}", trial.number),
                                    trial.substudy_label,
                                    TrialStateName(trial.state),
                                    FormatNumber(trial.best_value),
                                    trial.best_step ? fmt::format("{}", *trial.best_step) : "-",
                                    FormatNumber(trial.final_value)};
    if (replicated) row.insert(row.begin() + 1, {std::to_string(trial.configuration), std::to_string(trial.replica)});
    for (const auto& id : param_ids) {
      const auto it = trial.params.find(id);
      if (it == trial.params.end()) {
        row.emplace_back("-");
      } else if (const auto* real = std::get_if<double>(&it->second)) {
        row.push_back(fmt::format("{:.4g}", *real));
      } else {
        row.push_back(FormatValue(it->second));
      }
    }
    table.AddRow(std::move(row));
  }
  out += "\n" + table.Render(2) + note;
  if (!constant.empty()) out += "\n  the same in every trial shown: " + constant + "\n";
  return TerminalSafe(out);
}

std::string TrialText(Store& store, const StudyRecord& study, std::uint64_t number) {
  const auto trial = store.FindTrial(study.id, number);
  if (!trial) {
    const StudySummary summary = SummarizeStudy(store, study, 0);
    throw Error(
        fmt::format("{}: study '{}' has no trial {} (its trials are numbered 0 to {}{})", store.url(), study.name,
                    number, summary.trial_count - 1,
                    number < static_cast<std::uint64_t>(summary.trial_count) ? "; that one is not made yet" : ""));
  }
  std::string out = fmt::format("trial {} of study {} ({})\n\n", trial->number, study.name, trial->substudy_label);
  TextTable facts({"", ""});
  facts.AddRow({"state", TrialStateName(trial->state) + (trial->reason.empty() ? "" : ": " + trial->reason)});
  facts.AddRow({"worker", trial->worker.empty() ? "-" : trial->worker});
  facts.AddRow({"started", FormatTime(trial->started_at)});
  facts.AddRow({"ended", FormatTime(trial->ended_at)});
  facts.AddRow({"last heartbeat", FormatTime(trial->heartbeat_at)});
  facts.AddRow({"retries", fmt::format("{}", trial->retries)});
  facts.AddRow({"seed", fmt::format("{}", trial->seed)});
  if (trial->configuration != trial->number || trial->replica != 0) {
    facts.AddRow({"replica", fmt::format("{} of configuration {}", trial->replica, trial->configuration)});
  }
  facts.AddRow({"best", trial->best_value
                            ? fmt::format("{:.6g} at step {}", *trial->best_value, trial->best_step.value_or(-1))
                            : "-"});
  facts.AddRow({"final", FormatNumber(trial->final_value)});
  if (trial->exit_status) facts.AddRow({"exit status", fmt::format("{}", *trial->exit_status)});
  facts.AddRow({"time", DescribeTimeSplit(trial->time_split)});
  if (const auto gpus = ParseGpuUsage(trial->resources)) facts.AddRow({"gpu", TerminalSafe(DescribeGpuUsage(*gpus))});
  if (const std::string group = DescribeFusedGroup(FusedGroupOf(trial->resources), trial->number); !group.empty()) {
    facts.AddRow({"fused", group});
  }
  for (const auto& [name, text] : TrialRuntimeFacts(study, *trial)) facts.AddRow({name, text});
  for (const auto& [id, value] : trial->params) facts.AddRow({"param " + id, FormatValue(value)});
  const std::string rendered = facts.Render(2);
  out += rendered.substr(rendered.find('\n') + 1);

  const auto train = store.TrainSeries(trial->id);
  const auto evals = store.EvalSeries(trial->id);
  out += fmt::format("\nmeasurements: {} training step{} recorded{}, {} evaluation values\n", train.size(),
                     train.size() == 1 ? "" : "s",
                     train.empty() ? "" : fmt::format(" (steps {}-{})", train.front().step, train.back().step),
                     evals.size());
  if (!evals.empty()) {
    const std::int64_t last_step = evals.back().step;
    TextTable last({"split", "metric", "value", "examples"});
    for (const auto& e : evals) {
      if (e.step == last_step)
        last.AddRow({e.split, e.metric, fmt::format("{:.6g}", e.value), fmt::format("{}", e.examples)});
    }
    out += fmt::format("last evaluation, at step {}:\n", last_step) + last.Render(2);
  }
  const auto checkpoints = store.ListCheckpoints(trial->id);
  if (!checkpoints.empty()) {
    TextTable table({"step", "pool", "objective", "path", "state"});
    for (const auto& c : checkpoints) {
      table.AddRow({fmt::format("{}", c.step), CheckpointPoolName(c.pool), FormatNumber(c.objective), c.path,
                    c.deleted ? "deleted" : "kept"});
    }
    out += "\ncheckpoints:\n" + table.Render(2);
  }
  if (!trial->stderr_tail.empty()) out += "\nend of stderr:\n" + TerminalSafe(trial->stderr_tail) + "\n";
  return TerminalSafe(out);
}

std::string AdoptedChoice(const StudyData& data, const std::string& choice) {
  static const std::regex kTrial(R"((?:trial[: ]?)?([0-9]+))");
  static const std::regex kConfiguration(R"((?:configuration|config|c)[: ]?([0-9]+))");
  std::smatch match;
  if (std::regex_match(choice, match, kConfiguration)) {
    const std::uint64_t configuration = std::stoull(match[1].str());
    for (const TrialRecord& trial : data.trials) {
      if (trial.configuration == configuration) {
        return fmt::format("configuration {} ({})", configuration, trial.substudy_label);
      }
    }
    throw Error(fmt::format("study '{}' has no configuration {}", data.study.name, configuration));
  }
  if (std::regex_match(choice, match, kTrial) && match[1].length() <= 18) {
    const std::uint64_t number = std::stoull(match[1].str());
    for (const TrialRecord& trial : data.trials) {
      if (trial.number == number) return fmt::format("trial {} ({})", number, trial.substudy_label);
    }
    throw Error(fmt::format("study '{}' has no trial {}", data.study.name, number));
  }
  throw Error(
      fmt::format("--adopt takes a trial (12, trial:12) or a configuration (configuration:3), not '{}'", choice));
}

std::string MetricsText(const std::map<std::string, double>& metrics) {
  std::string text;
  for (const char* name : {"error_rate", "accuracy", "loss"}) {
    if (const auto it = metrics.find(name); it != metrics.end()) {
      text += fmt::format("{}{} {:.6g}", text.empty() ? "" : ", ", name, it->second);
    }
  }
  for (const auto& [name, value] : metrics) {
    if (name == "error_rate" || name == "accuracy" || name == "loss" || name.rfind("correct_class_", 0) == 0) continue;
    text += fmt::format("{}{} {:.6g}", text.empty() ? "" : ", ", name, value);
  }
  return text.empty() ? "-" : text;
}

const char* ChecksumText(bool verified) {
  return verified ? "checksum verified" : "no SHA-256 checksum recorded: the file was not verified";
}

std::string LaunchesTable(const std::vector<LaunchRecord>& launches,
                          const std::vector<std::pair<std::string, CheckpointEvaluation>>& evaluations) {
  std::vector<std::pair<double, std::vector<std::string>>> rows;
  rows.reserve(launches.size() + evaluations.size());
  for (const LaunchRecord& l : launches) {
    rows.push_back(
        {l.created_at,
         {fmt::format("launch {}", l.id), FormatClockTime(l.created_at, "%Y-%m-%d %H:%M", TimeZone::kLocal), l.author,
          l.study, std::to_string(l.evaluation.trial), std::to_string(l.evaluation.step),
          MetricsText(l.evaluation.metrics),
          l.git_commit.empty() ? "-" : l.git_commit.substr(0, 12) + (l.git_dirty.value_or(false) ? "+dirty" : ""),
          l.export_path, l.reason}});
  }
  for (const auto& [study, e] : evaluations) {
    rows.push_back(
        {e.created_at,
         {fmt::format("evaluation {}", e.id), FormatClockTime(e.created_at, "%Y-%m-%d %H:%M", TimeZone::kLocal), "-",
          study, std::to_string(e.trial), std::to_string(e.step), MetricsText(e.metrics), "-", "-",
          "dltune evaluate --split test"}});
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  TextTable table({"look", "when", "who", "study", "trial", "step", "test", "commit", "model", "reason"});
  for (auto& row : rows) table.AddRow(std::move(row.second));
  return table.Render();
}

std::string ComparisonText(const std::string& a, const std::string& b, const StudyComparison& comparison) {
  std::string out = fmt::format("{} vs {}: {}\n\n", a, b, comparison.objective.Describe());
  TextTable table({"", a, b});
  const auto best = [](const ComparedStudy& c) {
    std::string text = c.best ? fmt::format("{:.6g} (trial {}, single run)", *c.best, *c.best_trial) : "-";
    if (c.best_mean) text = c.best_mean_label + ": " + ReplicaValueText(*c.best_mean);
    return text;
  };
  table.AddRow({"completed trials", std::to_string(comparison.a.completed), std::to_string(comparison.b.completed)});
  table.AddRow({"best", best(comparison.a), best(comparison.b)});
  const auto box = [](const ComparedStudy& c) {
    return c.completed == 0 ? std::string("-")
                            : fmt::format("median {:.6g}, middle half {:.6g} to {:.6g}", c.at_equal_budget.median,
                                          c.at_equal_budget.q1, c.at_equal_budget.q3);
  };
  table.AddRow({fmt::format("best of {} trials", comparison.budget), box(comparison.a), box(comparison.b)});
  out += table.Render(2);
  if (!comparison.no_verdict.empty()) {
    out += fmt::format("\nno verdict: {}\n", comparison.no_verdict);
  } else if (comparison.by_means) {
    out += fmt::format("\n{}'s best configuration has the better mean{}\n", comparison.better,
                       comparison.overlap ? ", but the 95% intervals of the means overlap: within the noise"
                                          : ", beyond the noise (the 95% intervals of the means do not overlap)");
  } else {
    out += fmt::format("\nat equal budget {} finds the better result{}\n", comparison.better,
                       comparison.overlap ? ", but their middle halves overlap: study variance could explain it"
                                          : ", beyond the overlap of their middle halves");
  }
  return TerminalSafe(out);
}

}  // namespace dltune
