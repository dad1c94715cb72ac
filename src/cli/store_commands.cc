// `dltune studies`, `dltune show` and `dltune export`: the store's tracking record, for people and spreadsheets.
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include <fmt/format.h>

#include "commands.h"
#include "core/files.h"
#include "core/reproduction.h"
#include "core/strings.h"
#include "dltune/report/study_data.h"
#include "report/importance_text.h"
#include "report/pareto_text.h"
#include "report/reproduce_text.h"
#include "report/study_text.h"
#include "run/delete_study.h"
#include "store/export.h"
#include "store/json_output.h"
#include "store/tracking.h"

namespace dltune::cli {

void AddStorageOption(CLI::App* command, std::string& storage) {
  command->add_option("--storage", storage,
                      "Store URL: sqlite:///path/file.db or postgresql://user@host:port/db "
                      "(default: $DLTUNE_STORAGE, else ./dltune.db)");
}

void AddFormatOption(CLI::App* command, std::string& format, bool tabular) {
  command
      ->add_option("--format", format,
                   tabular
                       ? "text (for people, the default), json or csv: stable fields for scripts (docs/json-output.md)"
                       : "text (for people, the default) or json: stable fields for scripts (docs/json-output.md)")
      ->check(tabular ? CLI::IsMember({"text", "json", "csv"}) : CLI::IsMember({"text", "json"}));
}

namespace {

constexpr long long kMaxTrialNumber = 1000000000000000000LL;

std::unique_ptr<Store> OpenForReading(const std::string& storage) {
  return OpenStoreReadOnly(StoreUrlOrDefault(storage));
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
      "  dltune studies --wide\n  dltune studies --tree\n  dltune studies --format json   # for scripts: "
      "docs/json-output.md");
  AddStorageOption(studies, *storage);
  auto tree = std::make_shared<bool>(false);
  auto wide = std::make_shared<bool>(false);
  studies->add_flag("--tree", *tree,
                    "Studies as a tree of lineage: each study planned from another (dltune plan) under its parent");
  studies->add_flag("--wide", *wide, "Every column: goals, specs, decisions and the commands that reproduce them");
  auto format = std::make_shared<std::string>("text");
  AddFormatOption(studies, *format, true);
  studies->callback([storage, tree, wide, format] {
    const OutputFormat output = ParseOutputFormat(*format, "dltune studies", true);
    const auto store = OpenForReading(*storage);
    if (output != OutputFormat::kText) {
      std::cout << StudiesTable(*store).Render(output == OutputFormat::kJson ? ExportFormat::kJson
                                                                             : ExportFormat::kCsv);
      return;
    }
    std::fputs((*tree ? StudyTreeText(*store) : StudiesText(*store, *wide)).c_str(), stdout);
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

// `dltune show --patch` and `--reproduce`.
void ShowReproduction(Store& store, const StudyRecord& study, std::optional<std::uint64_t> number, bool patch,
                      OutputFormat output) {
  if (patch) {
    if (number) throw Error("--patch prints the study's patch, not a trial's: leave out TRIAL");
    if (output != OutputFormat::kText)
      throw Error("--patch prints the patch as git apply reads it: leave out --format");
    const std::string bytes = PatchBytes(study.reproduction, store.StudyPatch(study.id));
    if (bytes.empty()) {
      throw Error(fmt::format(
          "study '{}' has no stored patch of uncommitted changes{}", study.name,
          study.git_dirty.value_or(false) ? " (dltune show " + study.name + " says why)" : ": its checkout had none"));
    }
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    return;
  }
  std::optional<TrialRecord> trial;
  if (number) {
    trial = store.FindTrial(study.id, *number);
    if (!trial) throw Error(fmt::format("{}: study '{}' has no trial {}", store.url(), study.name, *number));
  }
  if (output == OutputFormat::kCsv) throw Error("--reproduce is no table: use --format json or text");
  if (output == OutputFormat::kJson) {
    std::cout << ReproduceJson(study, trial, store.url()).dump(2) << "\n";
  } else {
    std::fputs(ReproduceText(study, trial, store.url()).c_str(), stdout);
  }
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
    bool patch = false;
    bool reproduce = false;
    bool importance = false;
    std::string pareto;
    std::string format = "text";
  };
  auto show_args = std::make_shared<ShowArgs>();
  auto* show =
      app.add_subcommand("show",
                         "A study's record and its trials, or one trial's details, measurements and checkpoints.\n\n"
                         "Examples:\n  dltune show quickstart\n  dltune show quickstart 3\n"
                         "  dltune show quickstart --spec > quickstart.yaml   # the spec the study was made from\n"
                         "  dltune show quickstart 3 --format json             # for scripts: docs/json-output.md");
  show->add_option("STUDY", show_args->study, "Study name")->required();
  show->add_option("TRIAL", show_args->trial, "Trial number")->check(WholeNumberIn(0, kMaxTrialNumber));
  show->add_option("--limit", show_args->limit,
                   "List every trial of a study of at most this many; of a larger one, its running trials and the "
                   "best this many (default 100)")
      ->check(WholeNumberIn(1, 1000000));
  show->add_flag("--all", show_args->all, "List every trial, however many");
  show->add_flag("--spec", show_args->spec,
                 "Print the study's recorded spec, as it was written, and nothing else (to restore or compare it)");
  show->add_flag("--patch", show_args->patch,
                 "Print the patch of uncommitted changes the study was created with, byte for byte, and nothing else "
                 "(for git apply)");
  show->add_flag("--reproduce", show_args->reproduce,
                 "Print the commands that rebuild the study's code, versions and environment and run it (with TRIAL: "
                 "that trial alone) again");
  show->add_flag("--importance", show_args->importance,
                 "Print each nuisance hyperparameter's importance per sub-study (PED-ANOVA) with its bootstrap "
                 "interval and noise floor, and which are indistinguishable from no effect (candidates to fix)");
  show->add_option("--pareto", show_args->pareto,
                   "Print each sub-study's Pareto front of the objective against COST: training_seconds, "
                   "seconds_per_step, examples_per_second, parameters or peak_gpu_memory (those the trials recorded)")
      ->type_name("COST");
  AddStorageOption(show, *storage);
  AddFormatOption(show, show_args->format, true);
  show->callback([storage, show_args] {
    const OutputFormat output = ParseOutputFormat(show_args->format, "dltune show", true);
    auto store = OpenForReading(*storage);
    const StudyRecord study = RequireStudy(*store, show_args->study);
    if (!show_args->pareto.empty()) {
      if (show_args->trial || show_args->spec) throw Error("--pareto is a study's: leave out TRIAL and --spec");
      if (output == OutputFormat::kCsv) throw Error("--pareto prints text or --format json, not csv");
      std::fputs(ShowPareto(*store, study.name, show_args->pareto, output == OutputFormat::kJson).c_str(), stdout);
      return;
    }
    if (show_args->importance) {
      if (show_args->trial || show_args->spec) throw Error("--importance is a study's: leave out TRIAL and --spec");
      if (output == OutputFormat::kCsv) throw Error("--importance prints text or --format json, not csv");
      const StudyData data = LoadStudyData(*store, study.name, /*with_measurements=*/false);
      const HyperparameterImportance importance = AnalyzeImportance(data);
      if (output == OutputFormat::kJson) {
        std::cout << ImportanceJson(data, importance).dump(2) << "\n";
      } else {
        std::fputs(TerminalSafe(ImportanceText(data, importance)).c_str(), stdout);
      }
      return;
    }
    if (show_args->patch || show_args->reproduce) {
      ShowReproduction(*store, study, show_args->trial, show_args->patch, output);
      return;
    }
    if (output != OutputFormat::kText) {
      if (show_args->spec) throw Error("--spec prints the spec as it was written: leave out --format");
      if (output == OutputFormat::kCsv) {
        if (show_args->trial) throw Error("a trial is not one table: use --format json, or dltune export for tables");
        std::cout << ExportTrials(*store, study).Render(ExportFormat::kCsv);
        return;
      }
      const nlohmann::json out =
          show_args->trial ? TrialJson(*store, study, *show_args->trial) : StudyJson(*store, study);
      std::cout << out.dump(2) << "\n";
      return;
    }
    if (show_args->spec) {
      if (show_args->trial) throw Error("--spec shows a study's spec, not a trial's: leave out TRIAL");
      std::fputs(TerminalSafe(study.spec_text).c_str(), stdout);
      if (!study.spec_text.empty() && study.spec_text.back() != '\n') std::fputs("\n", stdout);
    } else if (show_args->trial) {
      std::fputs(TrialText(*store, study, *show_args->trial).c_str(), stdout);
    } else {
      std::fputs(StudyText(*store, study, show_args->limit, show_args->all).c_str(), stdout);
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
