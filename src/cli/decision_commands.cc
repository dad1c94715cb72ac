// The decision log and the end of a study: `dltune note`, `dltune decide`, `dltune evaluate`, `dltune launch` and
// `dltune launches`.
#include <cstdio>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "commands.h"
#include "core/strings.h"
#include "dltune/report/study_data.h"
#include "dltune/run/launch.h"
#include "report/decision_log.h"
#include "report/study_text.h"
#include "store/json_output.h"
#include "store/tracking.h"

namespace dltune::cli {
namespace {

std::unique_ptr<Store> OpenForWriting(const std::string& storage) {
  return OpenStore(StoreUrlOrDefault(storage), /*create_if_missing=*/false);
}

// `dltune note`.
void RegisterNote(CLI::App& app) {
  struct Args {
    std::string study, text, resolves, storage;
  };
  auto args = std::make_shared<Args>();
  auto* note = app.add_subcommand(
      "note",
      "Add a note to a study's decision log (shown by dltune show, dltune studies, the report and the dashboard): "
      "what you saw, what you suspect, what to try next. With --resolves, the note marks one of the study's "
      "findings handled (its id, as dltune doctor prints it): dltune next and dltune doctor then pass over it.\n\n"
      "Examples:\n  dltune note quickstart \"Adam's best learning rate is at the top of its range\"\n"
      "  dltune note quickstart --resolves periodic_validation \"the validation set is shuffled once: no bug\"");
  note->add_option("STUDY", args->study, "The study's name")->required();
  note->add_option("TEXT", args->text, "The note")->required();
  note->add_option("--resolves", args->resolves,
                   "A finding of the study this note marks handled (its id: dltune doctor STUDY lists them)");
  AddStorageOption(note, args->storage);
  note->callback([args] {
    const auto store = OpenForWriting(args->storage);
    const RecordedNote noted = RecordNote(
        *store, {.study = args->study, .text = args->text, .resolves = args->resolves, .author = CurrentAuthor()});
    std::printf("%s\n", TerminalSafe(noted.summary).c_str());
  });
}

// `dltune decide`.
void RegisterDecide(CLI::App& app) {
  struct Args {
    std::string study, adopt, because, storage;
  };
  auto args = std::make_shared<Args>();
  auto* decide = app.add_subcommand(
      "decide",
      "Record a decision taken from a study: which trial or configuration is adopted as the new baseline, and why "
      "(the playbook's \"Determining whether to adopt a training pipeline change or hyperparameter "
      "configuration\"). Shown by dltune show, dltune studies, the report and the dashboard.\n\n"
      "Examples:\n  dltune decide quickstart-retrain --adopt configuration:0 --because 'Nesterov beats Adam beyond "
      "the noise'\n  dltune decide quickstart --adopt 12 --because 'best single run; retrained next'");
  decide->add_option("STUDY", args->study, "The study's name")->required();
  decide->add_option("--adopt", args->adopt, "A trial (12, trial:12) or a configuration (configuration:3)")->required();
  decide->add_option("--because", args->because, "Why it is adopted")->required();
  AddStorageOption(decide, args->storage);
  decide->callback([args] {
    const auto store = OpenForWriting(args->storage);
    const RecordedNote decided = RecordDecision(
        *store, {.study = args->study, .adopt = args->adopt, .because = args->because, .author = CurrentAuthor()});
    std::printf("%s\n", TerminalSafe(decided.summary).c_str());
    std::printf("next: dltune launch %s --reason '...' (evaluates the chosen checkpoint on the test set, once)\n",
                ShellQuote(decided.study.name).c_str());
  });
}

// `dltune evaluate`.
void RegisterEvaluate(CLI::App& app) {
  struct Args {
    std::string study, split = "valid", storage;
    std::optional<std::uint64_t> trial;
    bool again = false;
    bool overrule_decision = false;
  };
  auto args = std::make_shared<Args>();
  auto* evaluate = app.add_subcommand(
      "evaluate",
      "Evaluate a trial's best checkpoint (the study's best trial by default; in a study with replicas, the best "
      "configuration's median replica) on a split, and record the result apart from the trial's measurements. A "
      "built-in workload is evaluated by the trainer's own evaluation; a study with its own command: by its "
      "evaluate_command:. The test split counts as the study's test evaluation (see dltune launch).\n\n"
      "Examples:\n  dltune evaluate quickstart --split valid\n  dltune evaluate quickstart --trial 12 --split train");
  evaluate->add_option("STUDY", args->study, "The study's name")->required();
  evaluate->add_option("--trial", args->trial, "The trial (default: the study's best)");
  evaluate->add_option("--split", args->split, "train, valid, valid_sample or test (default valid)");
  evaluate->add_flag("--again", args->again, "Evaluate the test split although it was evaluated before");
  evaluate->add_flag("--overrule-decision", args->overrule_decision,
                     "With --split test and --trial: evaluate that trial although the study's latest decision "
                     "adopts another");
  AddStorageOption(evaluate, args->storage);
  evaluate->callback([args] {
    const auto store = OpenForWriting(args->storage);
    const EvaluationDone done = Evaluate(*store, {.study = args->study,
                                                  .trial = args->trial,
                                                  .split = args->split,
                                                  .again = args->again,
                                                  .overrule_decision = args->overrule_decision});
    std::printf("%s\n", TerminalSafe(done.chosen.why).c_str());
    std::printf("checkpoint: %s (step %lld, %s)\n", done.chosen.checkpoint.path.c_str(),
                static_cast<long long>(done.chosen.checkpoint.step), ChecksumText(done.checksum_verified));
    std::printf("%s: %s over %lld examples\n", args->split.c_str(), MetricsText(done.evaluation.metrics).c_str(),
                static_cast<long long>(done.evaluation.examples));
    if (args->split == "test") {
      std::printf("test evaluations of this lineage: %d%s\n", done.test_evaluations,
                  done.test_evaluations > 1 ? " (the test set was seen before)" : "");
    }
  });
}

// `dltune launch`.
void RegisterLaunch(CLI::App& app) {
  struct Args {
    std::string study, reason, storage, export_path;
    std::optional<std::uint64_t> trial;
    bool again = false;
    bool overrule_decision = false;
  };
  auto args = std::make_shared<Args>();
  auto* launch = app.add_subcommand(
      "launch",
      "Launch a study's chosen model: what the study's latest decision (dltune decide) adopts — a trial, or a "
      "configuration's median replica — else its best trial (in a study with replicas, the configuration with the "
      "best mean and its median replica, not a lucky seed), saying that no decision was recorded; --trial against "
      "the decision only with --overrule-decision. The launch records the decision it carried out. Verifies the best "
      "checkpoint's checksum, "
      "evaluates it on the test split once, records the launch (test metrics, your git commit and whether the "
      "checkout had uncommitted changes, the reason, who, when) and exports the model: a TorchScript file for a "
      "built-in workload (torch.jit.load reads it), the checkpoint itself for a program of your own. A second test "
      "evaluation of a study is refused unless --again, and counted.\n\n"
      "Example:\n  dltune launch quickstart-retrain --reason 'Nesterov beats Adam beyond the noise'");
  launch->add_option("STUDY", args->study, "The study's name")->required();
  launch->add_option("--trial", args->trial,
                     "The trial to launch (default: what the latest decision adopts, else the study's best)");
  launch->add_option("--reason", args->reason, "Why this model is launched, for the decision log")->required();
  launch->add_option("--export", args->export_path,
                     "Where to write the TorchScript model (default: <run_dir>/<uid>/launches/launch_<n>/model.pt)");
  launch->add_flag("--again", args->again, "Evaluate the test split although it was evaluated before");
  launch->add_flag("--overrule-decision", args->overrule_decision,
                   "Launch --trial although the study's latest decision adopts another (recorded as overruling it)");
  AddStorageOption(launch, args->storage);
  launch->callback([args] {
    const auto store = OpenForWriting(args->storage);
    const LaunchDone done = Launch(*store, {.study = args->study,
                                            .trial = args->trial,
                                            .reason = args->reason,
                                            .again = args->again,
                                            .export_path = args->export_path,
                                            .overrule_decision = args->overrule_decision});
    const LaunchRecord& launched = done.launch;
    const CheckpointEvaluation& e = launched.evaluation;
    std::printf("launched study %s, trial %llu, checkpoint of step %lld (%s)\n", launched.study.c_str(),
                static_cast<unsigned long long>(e.trial), static_cast<long long>(e.step),
                ChecksumText(done.checksum_verified));
    std::printf("  chosen:   %s\n", TerminalSafe(done.chosen.why).c_str());
    std::printf("  test:     %s over %lld examples\n", MetricsText(e.metrics).c_str(),
                static_cast<long long>(e.examples));
    std::printf("  model:    %s\n", launched.export_path.c_str());
    std::printf("  commit:   %s%s\n",
                launched.git_commit.empty() ? "- (not a git checkout)" : launched.git_commit.c_str(),
                launched.git_dirty.value_or(false) ? " with uncommitted changes" : "");
    std::printf("  test evaluations of this lineage: %d%s\n", done.test_evaluations,
                done.test_evaluations > 1 ? " (the test set was seen before)" : "");
  });
}

// `dltune launches`.
void RegisterLaunches(CLI::App& app) {
  struct Args {
    std::string study, storage, format = "text";
  };
  auto args = std::make_shared<Args>();
  auto* launches = app.add_subcommand(
      "launches",
      "Every look at the test set, of every study or of one study's lineage (the studies planned from the same first "
      "one, which share its test set): each launch — when, who, which trial and checkpoint, the test metrics, the "
      "model file, the commit and the reason — and each dltune evaluate --split test.\n\nExamples:\n  dltune "
      "launches\n  dltune launches quickstart-retrain\n  dltune launches --format csv   # for scripts: "
      "docs/json-output.md");
  launches->add_option("STUDY", args->study, "Only the looks of this study's lineage");
  AddStorageOption(launches, args->storage);
  AddFormatOption(launches, args->format, true);
  launches->callback([args] {
    const OutputFormat output = ParseOutputFormat(args->format, "dltune launches", true);
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    std::vector<StudyRecord> studies =
        args->study.empty() ? store->ListStudies() : LineageOf(*store, RequireStudy(*store, args->study));
    std::vector<LaunchRecord> list;
    std::vector<std::pair<std::string, CheckpointEvaluation>> evaluations;
    for (const StudyRecord& study : studies) {
      std::set<std::int64_t> launched;
      for (LaunchRecord& launch : store->ListLaunches(study.id)) {
        launched.insert(launch.evaluation.id);
        list.push_back(std::move(launch));
      }
      for (CheckpointEvaluation& e : store->ListEvaluations(study.id)) {
        if (e.split == "test" && launched.count(e.id) == 0) evaluations.emplace_back(study.name, std::move(e));
      }
    }
    if (output != OutputFormat::kText) {
      std::cout << LaunchesExport(list, evaluations)
                       .Render(output == OutputFormat::kJson ? ExportFormat::kJson : ExportFormat::kCsv);
      return;
    }
    if (list.empty() && evaluations.empty()) {
      std::printf("no look at the test set yet%s\n",
                  args->study.empty() ? "" : (" in the lineage of study " + args->study).c_str());
      return;
    }
    std::fputs(LaunchesTable(list, evaluations).c_str(), stdout);
  });
}

}  // namespace

void RegisterDecisionCommands(CLI::App& app) {
  RegisterNote(app);
  RegisterDecide(app);
  RegisterEvaluate(app);
  RegisterLaunch(app);
  RegisterLaunches(app);
}

}  // namespace dltune::cli
