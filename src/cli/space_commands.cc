// `dltune space check` and `dltune space sample`: look at a study's space before spending compute.
#include <cstdio>

#include "analyze/search_budget.h"
#include "commands.h"
#include "dltune/study/study_spec.h"
#include "dltune/workloads/train.h"
#include "report/spec_text.h"
#include "run/trial_setup.h"
#include "train/split_overlap.h"

namespace dltune::cli {

void RegisterSpaceCommands(CLI::App& app) {
  auto* space = app.add_subcommand("space",
                                   "Check a study's search space and look at the trials it would run.\n\n"
                                   "Examples:\n  dltune space check examples/quickstart.yaml\n"
                                   "  dltune space sample examples/quickstart.yaml -n 4\n"
                                   "  dltune space suggest --optimizer adam --trials 16");
  space->require_subcommand(1);

  struct CheckArgs {
    std::string spec_path;
  };
  auto check_args = std::make_shared<CheckArgs>();
  auto* check = space->add_subcommand(
      "check",
      "Validate a study spec and print its params (role, kind, scale, domain, condition) and trial counts.\n\n"
      "Example:\n  dltune space check examples/quickstart.yaml");
  check->add_option("STUDY", check_args->spec_path, "Study spec (YAML)")->required();
  check->callback([check_args] {
    const StudySpec spec = LoadStudySpec(check_args->spec_path);
    CheckWorkloadKnown(spec);
    const StudyPlan plan(spec);
    CheckWorkloadReadsParams(spec, plan);
    const std::string data_check =
        spec.workload.name.empty() ? "" : SplitOverlapText(CheckWorkloadSplits(spec.workload.name, spec.workload.args));
    std::fputs(SpecCheckText(spec, plan, data_check).c_str(), stdout);
  });

  struct SuggestArgs {
    std::string optimizer;
    std::uint64_t trials = 0;
  };
  auto suggest_args = std::make_shared<SuggestArgs>();
  auto* suggest = space->add_subcommand(
      "suggest",
      "Print the playbook's search space for an optimizer at a budget of trials, to paste under a spec's space: "
      "(\"How should Adam's hyperparameters be tuned?\": below 10 trials only the learning rate, beta1 from 10, "
      "epsilon above 25, beta2 with substantially more).\n\n"
      "Example:\n  dltune space suggest --optimizer adam --trials 16");
  suggest->add_option("--optimizer", suggest_args->optimizer, "adam, nadam, nesterov, momentum or sgd")->required();
  suggest->add_option("--trials", suggest_args->trials, "Trials per sub-study")
      ->required()
      ->check(WholeNumberIn(1, 1000000));
  suggest->callback(
      [suggest_args] { std::fputs(SuggestedSpace(suggest_args->optimizer, suggest_args->trials).c_str(), stdout); });

  struct SampleArgs {
    std::string spec_path;
    std::int64_t limit = 0;
    std::string format = "table";
  };
  auto sample_args = std::make_shared<SampleArgs>();
  auto* sample =
      space->add_subcommand("sample",
                            "Print the trials a study would run, per sub-study, without running anything.\n\n"
                            "Example:\n  dltune space sample examples/quickstart.yaml -n 5 --format table");
  sample->add_option("STUDY", sample_args->spec_path, "Study spec (YAML)")->required();
  sample->add_option("-n,--trials", sample_args->limit, "Show the first N trials of each sub-study (default: all)")
      ->check(WholeNumberIn(1, 1000000));
  sample->add_option("--format", sample_args->format, "Output format: table, json or csv (default: table)")
      ->check(CLI::IsMember({"table", "json", "csv"}));
  sample->callback([sample_args] {
    const StudySpec spec = LoadStudySpec(sample_args->spec_path);
    const StudyPlan plan(spec);
    const auto groups = PlannedTrialsToShow(plan, static_cast<std::uint64_t>(sample_args->limit));
    const std::string text = sample_args->format == "json"  ? PlannedTrialsJson(spec, plan, groups)
                             : sample_args->format == "csv" ? PlannedTrialsCsv(spec, plan, groups)
                                                            : PlannedTrialsTable(spec, plan, groups);
    std::fputs(text.c_str(), stdout);
  });
}

}  // namespace dltune::cli
