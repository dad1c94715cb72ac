// `dltune studies`, `dltune show` and `dltune export`: the store's tracking record, for people and spreadsheets.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "analyze/time_split.h"
#include "commands.h"
#include "core/files.h"
#include "core/strings.h"
#include "run/delete_study.h"
#include "store/export.h"
#include "store/tracking.h"
#include "text_table.h"

namespace dltune::cli {
namespace {

constexpr long long kMaxTrialNumber = 1000000000000000000LL;

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

std::string TrackingTable(Store& store, const std::vector<StudyRecord>& studies) {
  TextTable table({"study", "goal", "spec", "trials", "best", "decision", "reproduce with"});
  for (const auto& study : studies) {
    const StudySummary summary = SummarizeStudy(store, study);
    std::string decision = "-";
    for (const StudyNote& note : store.ListNotes(study.id)) {
      if (note.kind == NoteKind::kDecision) decision = NoteText(note);
    }
    table.AddRow({study.name, summary.goal.empty() ? study.description : summary.goal, study.spec_path,
                  summary.StateText(),
                  summary.best ? fmt::format("{} {}", summary.objective.Name(), BestText(summary.best)) : "-", decision,
                  summary.reproduce});
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
    if (summary.best) {
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
         "best: the objective and its trial (± the 95% interval with replicas); tree: the git working tree the study "
         "was\ncreated from. dltune studies --wide: goals, specs, decisions and the command that reproduces each.\n";
}

std::string StudyTree(Store& store) {
  const auto studies = store.ListStudies();
  std::map<std::string, std::vector<const StudyRecord*>> children;
  std::set<std::string> names;
  for (const auto& study : studies) names.insert(study.name);
  std::vector<const StudyRecord*> roots;
  for (const auto& study : studies) {
    // A parent no longer in this store leaves its children as roots.
    if (study.parent.empty() || names.count(study.parent) == 0) {
      roots.push_back(&study);
    } else {
      children[study.parent].push_back(&study);
    }
  }
  std::string out;
  const std::function<void(const StudyRecord&, const std::string&, bool, bool)> draw =
      [&](const StudyRecord& study, const std::string& prefix, bool last, bool root) {
        const StudySummary summary = SummarizeStudy(store, study, 0);
        std::string line = root ? "" : prefix + (last ? "└─ " : "├─ ");
        line += study.name;
        std::string kind;
        try {
          kind = ParseStudySpec(study.spec_text, study.name).procedure.kind;
        } catch (const Error&) {
        }
        if (!kind.empty()) line += " (" + kind + ")";
        line += fmt::format("  {}; best {}", summary.StateText(),
                            summary.best ? summary.best->ValueText() : std::string("-"));
        if (!study.parent.empty() && names.count(study.parent) == 0) line += " [parent " + study.parent + " not here]";
        out += TerminalSafe(line, false) + "\n";
        const auto& kids = children[study.name];
        for (std::size_t i = 0; i < kids.size(); ++i) {
          draw(*kids[i], root ? "" : prefix + (last ? "   " : "│  "), i + 1 == kids.size(), false);
        }
      };
  for (const StudyRecord* root : roots) draw(*root, "", true, true);
  return out;
}

void AddStorageOption(CLI::App* command, std::string& storage) {
  command->add_option("--storage", storage,
                      "Store URL: sqlite:///path/file.db or postgresql://user@host:port/db "
                      "(default: $DLTUNE_STORAGE, else ./dltune.db)");
}

namespace {

std::unique_ptr<Store> OpenForReading(const std::string& storage) {
  return OpenStoreReadOnly(StoreUrlOrDefault(storage));
}

void PrintStudies(Store& store, bool wide) {
  const auto studies = store.ListStudies();
  if (studies.empty()) {
    std::printf("%s has no studies yet\n", store.url().c_str());
    return;
  }
  std::fputs((wide ? TrackingTable(store, studies) : CompactTrackingTable(store, studies)).c_str(), stdout);
}

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

void PrintStudy(Store& store, const StudyRecord& study, std::size_t limit, bool all) {
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
  facts.AddRow({"best", BestText(summary.best)});
  for (const auto& best : summary.best_per_substudy) facts.AddRow({"  " + best.substudy_label, BestText(best)});
  if (summary.more_substudies) facts.AddRow({"  ...", "more sub-studies (dltune export lists every trial)"});
  facts.AddRow({"reproduce with", summary.reproduce});
  // Summing every trial's record costs a read of all of them: done up to a size that reads in a moment.
  constexpr std::int64_t kMaxTrialsTimed = 20000;
  facts.AddRow({"time of all trials", summary.trial_count <= kMaxTrialsTimed
                                          ? DescribeTimeSplit(SumTimeSplits(store.ListTrials(study.id)))
                                          : fmt::format("not summed over {} trials", summary.trial_count)});
  for (const StudyNote& logged : store.ListNotes(study.id)) facts.AddRow({NoteLabel(logged), NoteText(logged)});
  for (const LaunchRecord& launch : store.ListLaunches(study.id)) {
    facts.AddRow({fmt::format("launch {}", launch.id),
                  fmt::format("{} by {}: trial {} step {}, test {}; {} ({})", FormatTime(launch.created_at),
                              launch.author, launch.evaluation.trial, launch.evaluation.step,
                              FormatMetric(launch.evaluation.metrics, summary.objective.metric), launch.reason,
                              launch.export_path)});
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
  std::fputs(TerminalSafe(out).c_str(), stdout);
}

void PrintTrial(Store& store, const StudyRecord& study, std::uint64_t number) {
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
  std::fputs(TerminalSafe(out).c_str(), stdout);
}

// `dltune studies`.
void RegisterStudies(CLI::App& app) {
  auto storage = std::make_shared<std::string>();
  auto* studies = app.add_subcommand(
      "studies",
      "The tracking table of every study in the store, one line each within 120 columns: trials by state, the "
      "best objective and its trial (with its interval when replicas exist), whether the git working tree it was "
      "created from had uncommitted changes, and its latest note or decision. --wide adds the goal (or "
      "description), the spec, the best trial's step and the command that reproduces the study; --tree shows which "
      "study was planned from which.\n\nExamples:\n  dltune studies --storage sqlite:///runs/dltune.db\n"
      "  dltune studies --wide\n  dltune studies --tree");
  AddStorageOption(studies, *storage);
  auto tree = std::make_shared<bool>(false);
  auto wide = std::make_shared<bool>(false);
  studies->add_flag("--tree", *tree,
                    "Studies as a tree of lineage: each study planned from another (dltune plan) under its parent");
  studies->add_flag("--wide", *wide, "Every column: goals, specs, decisions and the commands that reproduce them");
  studies->callback([storage, tree, wide] {
    const auto store = OpenForReading(*storage);
    if (*tree) {
      std::fputs(StudyTree(*store).c_str(), stdout);
    } else {
      PrintStudies(*store, *wide);
    }
  });
}

// `dltune delete`.
void RegisterDelete(CLI::App& app) {
  struct DeleteArgs {
    std::string study, storage;
    bool yes = false, force = false, keep_files = false;
  };
  auto delete_args = std::make_shared<DeleteArgs>();
  auto* remove = app.add_subcommand(
      "delete",
      "Delete a study from the store — its trials, measurements, checkpoint records, notes and launches — and its "
      "trial directories (<run_dir>/<uid>), so that its name can be used again, e.g. for a corrected spec. Says what "
      "goes and asks first (--yes does not ask). A study with results (completed or infeasible trials, launches) "
      "is deleted only with --force; one with running trials only with --force, when their workers are gone.\n\n"
      "Examples:\n  dltune delete typo-study\n  dltune delete old-study --force --yes");
  remove->add_option("STUDY", delete_args->study, "The study's name")->required();
  remove->add_flag("--yes", delete_args->yes,
                   "Do not ask: delete at once (needed when standard input is not a terminal)");
  remove->add_flag("--force", delete_args->force, "Delete a study with results, or with running trials, too");
  remove->add_flag("--keep-files", delete_args->keep_files, "Delete the records only; leave the trial directories");
  AddStorageOption(remove, delete_args->storage);
  remove->callback([delete_args] {
    const auto store = OpenStore(StoreUrlOrDefault(delete_args->storage), /*create_if_missing=*/false);
    const StudyDeletion deletion = PlanStudyDeletion(*store, delete_args->study);
    std::printf("%s", TerminalSafe(deletion.Describe()).c_str());
    if (deletion.HasResults() && !delete_args->force) {
      DeleteStudy(*store, deletion, false, false);  // refuses, saying why
    }
    if (!delete_args->yes) {
      if (::isatty(STDIN_FILENO) != 1) {
        throw Error("dltune delete asks before it deletes, and standard input is not a terminal: pass --yes");
      }
      std::printf("delete it%s? [y/N] ", delete_args->keep_files || deletion.directory.empty() ? "" : " and its files");
      std::fflush(stdout);
      std::string answer;
      std::getline(std::cin, answer);
      if (answer != "y" && answer != "Y" && answer != "yes") {
        std::printf("nothing deleted\n");
        return;
      }
    }
    DeleteStudy(*store, deletion, delete_args->force, !delete_args->keep_files);
    std::printf("deleted study %s%s\n", deletion.study.name.c_str(),
                delete_args->keep_files || deletion.directory.empty() ? "" : " and its files");
  });
}

// `dltune show`.
void RegisterShow(CLI::App& app) {
  auto storage = std::make_shared<std::string>();
  struct ShowArgs {
    std::string study;
    std::optional<std::uint64_t> trial;
    std::size_t limit = 100;
    bool all = false;
    bool spec = false;
  };
  auto show_args = std::make_shared<ShowArgs>();
  auto* show =
      app.add_subcommand("show",
                         "A study's record and its trials, or one trial's details, measurements and checkpoints.\n\n"
                         "Examples:\n  dltune show quickstart\n  dltune show quickstart 3\n"
                         "  dltune show quickstart --spec > quickstart.yaml   # the spec the study was made from");
  show->add_option("STUDY", show_args->study, "Study name")->required();
  show->add_option("TRIAL", show_args->trial, "Trial number")->check(WholeNumberIn(0, kMaxTrialNumber));
  show->add_option("--limit", show_args->limit,
                   "List every trial of a study of at most this many; of a larger one, its running trials and the "
                   "best this many (default 100)")
      ->check(WholeNumberIn(1, 1000000));
  show->add_flag("--all", show_args->all, "List every trial, however many");
  show->add_flag("--spec", show_args->spec,
                 "Print the study's recorded spec, as it was written, and nothing else (to restore or compare it)");
  AddStorageOption(show, *storage);
  show->callback([storage, show_args] {
    auto store = OpenForReading(*storage);
    const StudyRecord study = RequireStudy(*store, show_args->study);
    if (show_args->spec) {
      if (show_args->trial) throw Error("--spec shows a study's spec, not a trial's: leave out TRIAL");
      std::fputs(TerminalSafe(study.spec_text).c_str(), stdout);
      if (!study.spec_text.empty() && study.spec_text.back() != '\n') std::fputs("\n", stdout);
    } else if (show_args->trial) {
      PrintTrial(*store, study, *show_args->trial);
    } else {
      PrintStudy(*store, study, show_args->limit, show_args->all);
    }
  });
}

// `dltune export`.
void RegisterExport(CLI::App& app) {
  auto storage = std::make_shared<std::string>();
  struct ExportArgs {
    std::string study;
    std::string format = "csv";
    std::string what = "trials";
    std::string output;
  };
  auto export_args = std::make_shared<ExportArgs>();
  auto* exporter = app.add_subcommand(
      "export",
      "A study's records for a spreadsheet or pandas: one row per trial with params as columns (--what trials), or "
      "every measurement in tidy form (--what measurements).\n\n"
      "Example:\n  dltune export quickstart --format csv -o quickstart.csv");
  exporter->add_option("STUDY", export_args->study, "Study name")->required();
  exporter->add_option("--format", export_args->format, "csv, json or jsonl (default: csv)")
      ->check(CLI::IsMember({"csv", "json", "jsonl"}));
  exporter->add_option("--what", export_args->what, "trials or measurements (default: trials)")
      ->check(CLI::IsMember({"trials", "measurements"}));
  exporter->add_option("-o,--output", export_args->output, "Write to this file instead of standard output");
  AddStorageOption(exporter, *storage);
  exporter->callback([storage, export_args] {
    auto store = OpenForReading(*storage);
    const StudyRecord study = RequireStudy(*store, export_args->study);
    const ExportedTable table =
        export_args->what == "trials" ? ExportTrials(*store, study) : ExportMeasurements(*store, study);
    if (export_args->output.empty()) {
      std::cout << table.Render(ParseExportFormat(export_args->format));
      return;
    }
    WriteFileAtomically(export_args->output, table.Render(ParseExportFormat(export_args->format)));
    std::fprintf(stderr, "wrote %zu %s of study %s to %s\n", table.rows.size(), export_args->what.c_str(),
                 study.name.c_str(), export_args->output.c_str());
  });
}

}  // namespace

void RegisterStoreCommands(CLI::App& app) {
  RegisterStudies(app);
  RegisterDelete(app);
  RegisterShow(app);
  RegisterExport(app);
}

}  // namespace dltune::cli
