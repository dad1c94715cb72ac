// `dltune copy`: a study and every record of it, from one store to another (a laptop's SQLite to the lab's
// PostgreSQL, and back).
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "commands.h"
#include "core/strings.h"
#include "store/tracking.h"

namespace dltune::cli {
namespace {

struct CopyArgs {
  std::string study, from, to, as;
  bool replace = false, with_lineage = false;
};

// DLTUNE_INJECT_FAULT="kill@copy:N" (tests only): the copy kills itself once N trials are written to the target,
// before its transaction commits.
std::function<void(std::size_t)> InjectedCopyFault() {
  const char* spec = std::getenv("DLTUNE_INJECT_FAULT");
  if (spec == nullptr) return {};
  std::istringstream items(spec);
  for (std::string item; std::getline(items, item, ',');) {
    const std::string prefix = "kill@copy:";
    if (item.rfind(prefix, 0) != 0) continue;
    const std::size_t after = std::stoull(item.substr(prefix.size()));
    return [after](std::size_t written) {
      if (written >= after) std::raise(SIGKILL);
    };
  }
  return {};
}

// The study's ancestors that the target lacks, the oldest first; throws where the lineage would break: an ancestor
// missing from the target without --with-lineage, or a study of an ancestor's name in the target that is another
// study (another uid).
std::vector<StudyRecord> AncestorsToCopy(Store& source, Store& target, const StudyRecord& study, bool with_lineage) {
  std::vector<StudyRecord> missing;
  StudyRecord child = study;
  while (!child.parent.empty()) {
    const std::optional<StudyRecord> parent = FindParentStudy(source, child);
    if (!parent) break;  // deleted from the source: the lineage ends here there too
    if (const auto there = target.FindStudy(parent->name)) {
      if (there->uid == parent->uid) break;
      throw Error(fmt::format("study '{}' was planned from '{}', and {} has another study of that name (uid {}, not "
                              "{}): the copy's lineage would name the wrong study; rename one of them first",
                              child.name, parent->name, target.url(), there->uid, parent->uid),
                  ErrorKind::kConflict);
    }
    if (!with_lineage) {
      throw Error(fmt::format("study '{}' was planned from '{}', which {} does not have: pass --with-lineage to copy "
                              "it along, or copy it first",
                              child.name, parent->name, target.url()),
                  ErrorKind::kConflict);
    }
    missing.insert(missing.begin(), *parent);
    child = *parent;
  }
  return missing;
}

std::string Counted(std::size_t count, const char* one, const char* many) {
  return fmt::format("{} {}", count, count == 1 ? one : many);
}

}  // namespace

void RegisterCopyCommand(CLI::App& app) {
  auto args = std::make_shared<CopyArgs>();
  auto* copy = app.add_subcommand(
      "copy",
      "Copy a study from one store to another (SQLite or PostgreSQL, either way) with every record of it: its "
      "trials, measurements, checkpoint records, notes, decisions, evaluations and launches, times and uid "
      "included, so that it reads the same there. The copy is one transaction on the target: interrupted, it "
      "leaves nothing there. A study planned from another needs its parent in the target (--with-lineage copies the "
      "missing ancestors along); a name the target has already is refused unless --as gives another or --replace "
      "replaces it. The trial directories (checkpoints) are not copied: they stay where the records say.\n\n"
      "Examples:\n"
      "  dltune copy quickstart --to postgresql://me@lab-db/dltune\n"
      "  dltune copy quickstart-retrain --with-lineage --from sqlite:///home/me/dltune.db --to "
      "postgresql://me@lab-db/dltune\n"
      "  dltune copy quickstart --from postgresql://me@lab-db/dltune --to sqlite://back.db --as quickstart-lab");
  copy->add_option("STUDY", args->study, "The study's name in the source store")->required();
  copy->add_option("--to", args->to, "The target store's URL (a SQLite file is created if missing)")->required();
  copy->add_option("--from", args->from,
                   "The source store's URL (default: $DLTUNE_STORAGE, else ./dltune.db); only read");
  copy->add_option("--as", args->as, "The study's name in the target (default: its own)");
  copy->add_flag("--replace", args->replace,
                 "Replace the target's study of that name, with every record of it, in the same transaction");
  copy->add_flag("--with-lineage", args->with_lineage,
                 "Copy along the studies it was planned from (dltune studies --tree) that the target lacks");
  copy->callback([args] {
    const auto source = OpenStoreReadOnly(StoreUrlOrDefault(args->from));
    const StudyRecord study = RequireStudy(*source, args->study);
    const auto target = OpenStore(args->to);
    const std::vector<StudyRecord> ancestors = AncestorsToCopy(*source, *target, study, args->with_lineage);
    StudyCopyWrite write{.name = args->as, .replace = args->replace, .on_trial_written = InjectedCopyFault()};
    for (const StudyRecord& ancestor : ancestors) write.studies.push_back(source->ReadStudyCopy(ancestor.id));
    write.studies.push_back(source->ReadStudyCopy(study.id));
    const StudyCopy& copied = write.studies.back();
    const StudyRecord written = target->WriteStudyCopy(write);

    std::size_t measurements = 0, checkpoints = 0, running = 0;
    for (const StudyCopyTrial& trial : copied.trials) {
      measurements += trial.train.size() + trial.evals.size();
      checkpoints += trial.checkpoints.size();
      running += trial.trial.state == TrialState::kRunning ? 1 : 0;
    }
    std::size_t decisions = 0;
    for (const StudyNote& note : copied.notes) decisions += note.kind == NoteKind::kDecision ? 1 : 0;
    std::printf("copied study %s%s from %s to %s: %s, %s, %s, %s, %s, %s\n", TerminalSafe(study.name).c_str(),
                written.name != study.name ? (" as " + TerminalSafe(written.name)).c_str() : "",
                TerminalSafe(source->url()).c_str(), TerminalSafe(target->url()).c_str(),
                Counted(copied.trials.size(), "trial", "trials").c_str(),
                Counted(measurements, "measurement", "measurements").c_str(),
                Counted(checkpoints, "checkpoint record", "checkpoint records").c_str(),
                Counted(copied.notes.size() - decisions, "note", "notes").c_str(),
                Counted(decisions, "decision", "decisions").c_str(),
                Counted(copied.launches.size(), "launch", "launches").c_str());
    for (const StudyRecord& ancestor : ancestors) {
      std::printf("copied along study %s, which it was planned from\n", TerminalSafe(ancestor.name).c_str());
    }
    if (running > 0) {
      std::fprintf(stderr,
                   "dltune: %zu trial%s %s running in the source: %s workers write there, not to the copy, which "
                   "puts %s back to pending once %s heartbeat is stale (dltune run)\n",
                   running, running == 1 ? "" : "s", running == 1 ? "was" : "were", running == 1 ? "its" : "their",
                   running == 1 ? "it" : "them", running == 1 ? "its" : "their");
    }
  });
}

}  // namespace dltune::cli
