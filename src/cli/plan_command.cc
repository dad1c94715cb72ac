// `dltune plan KIND --from PARENT`: a study planned from its parent, written as a spec to read, commit and run.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "commands.h"
#include "core/files.h"
#include "core/strings.h"
#include "dltune/plan/plan.h"
#include "dltune/study/study_spec.h"

namespace dltune::cli {
namespace {

struct OutputArgs {
  std::string from;
  std::string name;
  std::string output;
  bool force = false;
  std::string storage;
};

void AddOutputOptions(CLI::App* command, OutputArgs& args) {
  command
      ->add_option("--from", args.from,
                   "The parent study (see dltune studies); for throughput and fit-steps also a spec file")
      ->required();
  command->add_option("--name", args.name, "The new study's name (default: the parent's with a suffix)");
  command->add_option("-o,--output", args.output, "Where to write the spec (default: NAME.yaml; - for the terminal)");
  command->add_flag("--force", args.force, "Overwrite an existing spec file that differs from the planned one");
  AddStorageOption(command, args.storage);
}

// Writes the planned spec and says what it is and how to run it. The same plan twice writes the same bytes, so an
// unchanged file is left alone; a file that differs (edited since, or another plan) is kept unless --force.
void WritePlanned(const PlannedStudy& planned, const OutputArgs& args, const std::string& what) {
  if (args.output == "-") {
    std::fputs(planned.text.c_str(), stdout);
    return;
  }
  const std::filesystem::path path = args.output.empty() ? planned.name + ".yaml" : args.output;
  const bool wrote = WritePlannedSpec(planned, path, args.force);
  std::printf(wrote ? "wrote %s: %s\n" : "%s is up to date: %s\n", path.c_str(), what.c_str());
  std::printf("next: dltune run %s\n", ShellQuote(path.string()).c_str());
}

// A positive number of option `option`, or Error naming it and the text it is in.
double PositiveNumber(const std::string& part, const std::string& option, const std::string& text) {
  try {
    std::size_t used = 0;
    const double value = std::stod(part, &used);
    if (used == part.size() && std::isfinite(value) && value > 0) return value;
  } catch (const std::exception&) {
  }
  throw Error(fmt::format("{}: '{}' is not a positive number (in '{}')", option, part, text));
}

// The parts of `text` between `separator`s.
std::vector<std::string> SplitOn(const std::string& text, char separator) {
  std::vector<std::string> parts;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find(separator, start), text.size());
    parts.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

// "2,5,10": positive numbers; empty: none.
std::vector<double> ParseNumberList(const std::string& text, const std::string& option) {
  std::vector<double> numbers;
  if (text.empty()) return numbers;
  for (const std::string& part : SplitOn(text, ',')) numbers.push_back(PositiveNumber(part, option, text));
  return numbers;
}

// "10,100,1000": whole numbers of steps, at least 1.
std::vector<std::int64_t> ParseStepList(const std::string& text, const std::string& option) {
  std::vector<std::int64_t> steps;
  for (const double value : ParseNumberList(text, option)) {
    if (std::floor(value) != value || value > 1e12) {
      throw Error(fmt::format("{}: {} is not a whole number of steps (in '{}')", option, value, text));
    }
    steps.push_back(static_cast<std::int64_t>(value));
  }
  return steps;
}

// "0.001,0.01,0.1" or "1e-4:1:7" (7 values log-spaced from 1e-4 to 1); empty: none.
std::vector<double> ParseLearningRates(const std::string& text) {
  if (text.find(':') == std::string::npos) return ParseNumberList(text, "--learning-rates");
  const std::vector<std::string> parts = SplitOn(text, ':');
  if (parts.size() != 3) throw Error(fmt::format("--learning-rates LOW:HIGH:COUNT, not '{}'", text));
  const auto number = [&](const std::string& part) { return PositiveNumber(part, "--learning-rates", text); };
  std::vector<double> rates;
  const double low = number(parts[0]);
  const double high = number(parts[1]);
  const double count = number(parts[2]);
  if (count < 2 || count > 1000 || std::floor(count) != count || !(low < high)) {
    throw Error(fmt::format("--learning-rates LOW:HIGH:COUNT needs LOW < HIGH and 2 to 1000 values, not '{}'", text));
  }
  for (int i = 0; i < static_cast<int>(count); ++i) {
    const double u = i / (count - 1);
    rates.push_back(std::stod(fmt::format("{:.3g}", std::exp(std::log(low) + u * (std::log(high) - std::log(low))))));
  }
  return rates;
}

// `dltune plan retrain`.
void RegisterPlanRetrain(CLI::App* plan) {
  struct Args : OutputArgs {
    std::uint64_t top = 1;
    bool best_per_substudy = false;
    std::uint64_t replicas = 5;
  };
  auto args = std::make_shared<Args>();
  auto* retrain = plan->add_subcommand(
      "retrain",
      "Train the parent's best configurations again, each from several seeds, to see the run-to-run (trial) "
      "variance before adopting a change: the playbook's \"consider running the best trial N times\". Replica 0 "
      "reuses the parent trial's seed and reproduces its value; replica r of every configuration shares a seed, "
      "so configurations are compared pair by pair. The report and dltune doctor give each configuration's mean "
      "and 95% interval and say when a difference is within the noise.\n\n"
      "Examples:\n  dltune plan retrain --from quickstart --replicas 5          # the best of each sub-study\n"
      "  dltune plan retrain --from quickstart --top 2 --replicas 3 -o retrain.yaml");
  AddOutputOptions(retrain, *args);
  auto* top = retrain->add_option("--top", args->top, "The best K configurations of each sub-study (default 1)")
                  ->check(WholeNumberIn(1, 1000));
  retrain->add_flag("--best-per-substudy", args->best_per_substudy, "The best configuration of each sub-study")
      ->excludes(top);
  retrain->add_option("--replicas", args->replicas, "Runs of each configuration, 2 or more (default 5)")
      ->check(WholeNumberIn(0, 1000000));
  retrain->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned =
        PlanRetrain(*store, {.parent = args->from, .top = args->top, .replicas = args->replicas, .name = args->name});
    WritePlanned(
        planned, *args,
        fmt::format("study {}, {} configuration{} × {} replicas = {} trials", planned.name, planned.configurations,
                    planned.configurations == 1 ? "" : "s", args->replicas, planned.trials));
  });
}

// `dltune plan fit-steps`.
void RegisterPlanFitSteps(CLI::App* plan) {
  struct Args : OutputArgs {
    std::string fit;
    std::int64_t steps = 0;
    std::string learning_rates;
    std::int64_t eval_every = 0;
    std::int64_t batch_size = 0;
  };
  auto args = std::make_shared<Args>();
  auto* fit = plan->add_subcommand(
      "fit-steps",
      "An initial max_train_steps, the playbook's way (\"Algorithm for picking an initial candidate for "
      "max_train_steps using a learning rate sweep\"): one configuration with a constant learning rate and no "
      "regularization, its learning rate swept on a grid, each trial --steps long. The configuration is a spec "
      "file's first trial, a throughput study's at the batch size it recommends (the playbook's start of a project: "
      "throughput, then the step budget, then the first study), or a study's best. The report and dltune doctor "
      "give, per learning rate, the first step that fits the training set (--fit), the fastest as the candidate "
      "max_train_steps, and a warning when that learning rate is at the edge of the sweep; dltune plan apply-steps "
      "applies it.\n\n"
      "Examples:\n  dltune plan fit-steps --from quickstart-throughput\n"
      "  dltune plan fit-steps --from examples/quickstart.yaml --batch-size 128 --steps 2000\n"
      "  dltune plan fit-steps --from quickstart --fit 'train/error_rate<=0.01' --steps 5000");
  AddOutputOptions(fit, *args);
  fit->add_option("--fit", args->fit,
                  "When the training set is fit: split/metric<=value or >=value (default: train/error_rate<=0.01 "
                  "for an error-rate objective, train/accuracy>=0.99 for an accuracy)");
  fit->add_option("--steps", args->steps,
                  "Steps each learning rate trains, a budget that can fit (default: the spec's max_train_steps)")
      ->check(WholeNumberIn(1, 1000000000));
  fit->add_option("--learning-rates", args->learning_rates,
                  "The sweep: comma-separated values, or LOW:HIGH:COUNT log-spaced (default: 7 over the range the "
                  "spec searches)");
  fit->add_option("--eval-every", args->eval_every, "Evaluate every K steps (default: steps / 100)")
      ->check(WholeNumberIn(1, 1000000000));
  fit->add_option("--batch-size", args->batch_size,
                  "The batch size to sweep at (default: the configuration's; from a throughput study, the one it "
                  "recommends)")
      ->check(WholeNumberIn(1, 1000000000));
  fit->callback([args] {
    std::error_code error;
    const auto store = std::filesystem::is_regular_file(args->from, error)
                           ? nullptr
                           : OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned = PlanFitSteps(store.get(), {.parent = args->from,
                                                            .fit = args->fit,
                                                            .steps = args->steps,
                                                            .learning_rates = ParseLearningRates(args->learning_rates),
                                                            .eval_every = args->eval_every,
                                                            .batch_size = args->batch_size,
                                                            .name = args->name});
    const StudySpec spec = ParseStudySpec(planned.text, planned.name + ".yaml");
    WritePlanned(
        planned, *args,
        fmt::format("study {}, {} learning rates × {} steps", planned.name, planned.trials, spec.max_train_steps));
  });
}

// `dltune plan apply-steps`.
void RegisterPlanApplySteps(CLI::App* plan) {
  struct Args : OutputArgs {
    std::int64_t steps = 0;
  };
  auto args = std::make_shared<Args>();
  auto* apply = plan->add_subcommand(
      "apply-steps",
      "Apply a fit-steps study's candidate max_train_steps: the spec the project started from (the spec file or "
      "study the sweeps were planned from) with that max_train_steps and the sweep's batch size, its search space "
      "as written: the first study to tune.\n\n"
      "Examples:\n  dltune plan apply-steps --from quickstart-fit-steps\n"
      "  dltune plan apply-steps --from quickstart-fit-steps --steps 1500 --name quickstart-1500");
  AddOutputOptions(apply, *args);
  apply->add_option("--steps", args->steps, "The max_train_steps (default: the sweep's candidate)")
      ->check(WholeNumberIn(1, 1000000000000));
  apply->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned =
        PlanApplySteps(*store, {.parent = args->from, .steps = args->steps, .name = args->name});
    const StudySpec spec = ParseStudySpec(planned.text, planned.name + ".yaml");
    WritePlanned(planned, *args,
                 fmt::format("study {}, {} trials of {} steps", planned.name, planned.trials, spec.max_train_steps));
  });
}

// `dltune plan expand`.
void RegisterPlanExpand(CLI::App* plan) {
  auto args = std::make_shared<OutputArgs>();
  auto* expand = plan->add_subcommand(
      "expand",
      "Expand a study's search space where its best trials crowd an edge (the playbook's \"Identifying bad search "
      "space boundaries\"; dltune doctor's boundary findings): its own spec, each such range a decade further on a "
      "log scale or half its width further on a linear one, with the same seed so the other params' quasi-random "
      "points stay.\n\n"
      "Example:\n  dltune plan expand --from quickstart");
  AddOutputOptions(expand, *args);
  expand->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned = PlanExpand(*store, {.parent = args->from, .name = args->name});
    WritePlanned(planned, *args, fmt::format("study {}, {} trials", planned.name, planned.trials));
  });
}

// `dltune plan fix`.
void RegisterPlanFix(CLI::App* plan) {
  auto args = std::make_shared<OutputArgs>();
  auto* fix = plan->add_subcommand(
      "fix",
      "Fix the nuisance hyperparameters whose importance a study's trials cannot tell from no effect (dltune "
      "doctor's unimportant findings; dltune show STUDY --importance) at its best trial's values: its own spec with "
      "those params fixed, for the next round (the playbook's \"Identifying scientific, nuisance, and fixed "
      "hyperparameters\").\n\n"
      "Example:\n  dltune plan fix --from quickstart");
  AddOutputOptions(fix, *args);
  fix->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned = PlanFix(*store, {.parent = args->from, .name = args->name});
    WritePlanned(planned, *args, fmt::format("study {}, {} trials", planned.name, planned.trials));
  });
}

// `dltune plan throughput`.
void RegisterPlanThroughput(CLI::App* plan) {
  struct Args : OutputArgs {
    std::string batch_sizes;
    std::int64_t steps = 50;
    std::uint64_t repeats = 2;
  };
  auto args = std::make_shared<Args>();
  auto* throughput = plan->add_subcommand(
      "throughput",
      "The playbook's batch-size sweep (\"Determining the feasible batch sizes and estimating training "
      "throughput\"): a study's best configuration (or a spec file's first trial) at every power of two in "
      "--batch-sizes, one trial at a time with every core, smallest first, stopping at the first that runs out of "
      "memory. The report and dltune doctor give the time per step and examples per second of each, the scaling of "
      "each doubling, where perfect scaling ends, the largest batch size still worth using, and whether waiting for "
      "data makes training input-bound. Changing the batch size means re-tuning most hyperparameters.\n\n"
      "Examples:\n  dltune plan throughput --from quickstart --batch-sizes 16:4096\n"
      "  dltune plan throughput --from examples/quickstart.yaml --batch-sizes 32:1024 --steps 100");
  AddOutputOptions(throughput, *args);
  throughput->add_option("--batch-sizes", args->batch_sizes, "LOW:HIGH: every power of two between them")->required();
  throughput->add_option("--steps", args->steps, "Steps per batch size (default 50; the first fifth is warm-up)")
      ->check(WholeNumberIn(10, 1000000));
  throughput
      ->add_option("--repeats", args->repeats,
                   "Measurements of each batch size, in rounds over the sizes (default 2): their spread says "
                   "whether the machine's speed held")
      ->check(WholeNumberIn(1, 100));
  throughput->callback([args] {
    // A spec file needs no store; where there is one, it says how often the project's throughput was measured.
    std::error_code error;
    const std::string url = StoreUrlOrDefault(args->storage);
    const auto store =
        !std::filesystem::is_regular_file(args->from, error) || StoreMayExist(url) ? OpenStoreReadOnly(url) : nullptr;
    const PlannedStudy planned = PlanThroughput(store.get(), {.parent = args->from,
                                                              .batch_sizes = args->batch_sizes,
                                                              .steps = args->steps,
                                                              .repeats = args->repeats,
                                                              .name = args->name});
    WritePlanned(planned, *args,
                 fmt::format("study {}, {} batch sizes × {} steps, each measured {} time{}", planned.name,
                             planned.configurations, args->steps, args->repeats, args->repeats == 1 ? "" : "s"));
  });
}

// `dltune plan instability`.
void RegisterPlanInstability(CLI::App* plan) {
  struct Args : OutputArgs {
    std::string multipliers = "2,5,10";
    std::int64_t steps = 0;
    std::string eval_schedule = "log:60";
  };
  auto args = std::make_shared<Args>();
  auto* instability = plan->add_subcommand(
      "instability",
      "The playbook's instability probe (\"Identifying unstable workloads\"): the parent's best configuration at "
      "2x, 5x and 10x its learning rate (constant, no warmup), each with the best trial's seed, for an abbreviated "
      "run evaluated densely early (training.eval_schedule) with every step's loss and gradient norm kept. The "
      "report and dltune doctor classify each run (stable, early instability, sudden mid-training instability, "
      "recovered, diverged) and give the smallest unstable learning rate, where a warmup study starts.\n\n"
      "Examples:\n  dltune plan instability --from quickstart\n"
      "  dltune plan instability --from quickstart --multipliers 2,5,10,20 --steps 1000 --eval-schedule dense:100");
  AddOutputOptions(instability, *args);
  instability->add_option("--multipliers", args->multipliers,
                          "Times the best learning rate, comma-separated (default 2,5,10)");
  instability->add_option("--steps", args->steps, "Steps per run (default 500, or the parent's when fewer)")
      ->check(WholeNumberIn(10, 1000000000));
  instability->add_option("--eval-schedule", args->eval_schedule,
                          "When to evaluate: dense:N or log:K (default log:60)");
  instability->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned =
        PlanInstability(*store, {.parent = args->from,
                                 .multipliers = ParseNumberList(args->multipliers, "--multipliers"),
                                 .steps = args->steps,
                                 .eval_schedule = args->eval_schedule,
                                 .name = args->name});
    WritePlanned(planned, *args, fmt::format("study {}, {} learning rates", planned.name, planned.trials));
  });
}

// `dltune plan warmup`.
void RegisterPlanWarmup(CLI::App* plan) {
  struct Args : OutputArgs {
    double unstable = 0;
    double factor = 10;
    std::string warmup_steps;
  };
  auto args = std::make_shared<Args>();
  auto* warmup = plan->add_subcommand(
      "warmup",
      "The playbook's warmup study (\"How to apply learning rate warmup\"): the baseline's best configuration at "
      "10x the unstable learning rate an instability probe found, warming up from 0 over warmup_steps (orders of "
      "magnitude up to a tenth of the baseline's max_train_steps), then training 2 x warmup_steps at that rate. The "
      "report and dltune doctor give the shortest warmup that trains stably; dltune plan apply-warmup prepends it "
      "to the baseline.\n\n"
      "Examples:\n  dltune plan warmup --from quickstart-instability\n"
      "  dltune plan warmup --from quickstart --unstable-lr 0.5 --warmup-steps 10,100,1000");
  AddOutputOptions(warmup, *args);
  warmup->add_option("--unstable-lr", args->unstable,
                     "The learning rate at which training becomes unstable (default: the probe's)");
  warmup->add_option("--factor", args->factor, "The base learning rate is this times the unstable one (default 10)");
  warmup->add_option("--warmup-steps", args->warmup_steps,
                     "The warmups to try, comma-separated (default: 10, 100, ... up to a tenth of max_train_steps)");
  warmup->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned =
        PlanWarmup(*store, {.parent = args->from,
                            .unstable_learning_rate = args->unstable,
                            .factor = args->factor,
                            .warmup_steps = ParseStepList(args->warmup_steps, "--warmup-steps"),
                            .name = args->name});
    WritePlanned(planned, *args, fmt::format("study {}, {} warmup lengths", planned.name, planned.trials));
  });
}

// `dltune plan apply-warmup`.
void RegisterPlanApplyWarmup(CLI::App* plan) {
  struct Args : OutputArgs {
    std::int64_t warmup_steps = 0;
    std::uint64_t replicas = 1;
  };
  auto args = std::make_shared<Args>();
  auto* apply = plan->add_subcommand(
      "apply-warmup",
      "Prepend a warmup study's shortest stable warmup to the baseline, as the playbook says: the baseline's best "
      "configuration with that warmup_steps and max_train_steps longer by it (a 10,000-step baseline with 1,000 "
      "steps of warmup trains 11,000), so that after the warmup its schedule runs as before. Its report compares it "
      "with the baseline's trial.\n\n"
      "Examples:\n  dltune plan apply-warmup --from quickstart-instability-warmup\n"
      "  dltune plan apply-warmup --from quickstart-instability-warmup --warmup-steps 100 --replicas 3");
  AddOutputOptions(apply, *args);
  apply->add_option("--warmup-steps", args->warmup_steps, "The warmup (default: the shortest stable one)")
      ->check(WholeNumberIn(1, 1000000000000));
  apply->add_option("--replicas", args->replicas, "Runs of the configuration (default 1)")
      ->check(WholeNumberIn(1, 1000));
  apply->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned = PlanApplyWarmup(
        *store,
        {.parent = args->from, .warmup_steps = args->warmup_steps, .replicas = args->replicas, .name = args->name});
    WritePlanned(planned, *args,
                 fmt::format("study {}, {} trial{}", planned.name, planned.trials, planned.trials == 1 ? "" : "s"));
  });
}

// `dltune plan clipping`.
void RegisterPlanClipping(CLI::App* plan) {
  struct Args : OutputArgs {
    std::string thresholds;
    std::int64_t steps = 0;
    double unstable = 0;
  };
  auto args = std::make_shared<Args>();
  auto* clipping = plan->add_subcommand(
      "clipping",
      "The playbook's gradient clipping as a remedy for instability (\"Gradient clipping\"): the baseline's best "
      "configuration at the unstable learning rate its instability probe found, constant, for an abbreviated run "
      "evaluated densely, once without clipping and once at each grad_clip_norm around the 90th percentile of the "
      "best trial's recorded gradient norms (half, once and twice it). The report and dltune doctor classify each "
      "run and give the gentlest threshold that trains stably while clipping at most half the steps; dltune plan "
      "apply-clipping applies it.\n\n"
      "Examples:\n  dltune plan clipping --from quickstart\n"
      "  dltune plan clipping --from quickstart --unstable-lr 0.8 --thresholds 0.5,1,2");
  AddOutputOptions(clipping, *args);
  clipping->add_option("--thresholds", args->thresholds,
                       "grad_clip_norm values, comma-separated (default: 0.5, 1 and 2 times the 90th percentile)");
  clipping->add_option("--steps", args->steps, "Steps per run (default: the probe's, or 500)")
      ->check(WholeNumberIn(10, 1000000000));
  clipping->add_option("--unstable-lr", args->unstable,
                       "The learning rate at which training becomes unstable (default: the probe's)");
  clipping->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned = PlanClipping(*store, {.parent = args->from,
                                                       .thresholds = ParseNumberList(args->thresholds, "--thresholds"),
                                                       .steps = args->steps,
                                                       .unstable_learning_rate = args->unstable,
                                                       .name = args->name});
    WritePlanned(planned, *args, fmt::format("study {}, {} runs", planned.name, planned.trials));
  });
}

// A plan that applies a finding to the spec the lineage started from (DerivedRequest): `name`, its help, `plan_study`.
void RegisterDerivedPlan(CLI::App* plan, const std::string& name, const std::string& help,
                         PlannedStudy (*plan_study)(Store&, const DerivedRequest&)) {
  auto args = std::make_shared<OutputArgs>();
  auto* command = plan->add_subcommand(name, help);
  AddOutputOptions(command, *args);
  command->callback([args, plan_study] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned = plan_study(*store, {.parent = args->from, .name = args->name});
    WritePlanned(planned, *args, fmt::format("study {}, {} trials", planned.name, planned.trials));
  });
}

// `dltune plan apply-clipping`.
void RegisterPlanApplyClipping(CLI::App* plan) {
  RegisterDerivedPlan(
      plan, "apply-clipping",
      "The baseline's spec with grad_clip_norm fixed at what a clipping study recommends (the gentlest threshold "
      "that trained stably at the unstable learning rate), to tune as the baseline was.\n\n"
      "Example:\n  dltune plan apply-clipping --from quickstart-clipping",
      PlanApplyClipping);
}

// `dltune plan narrow-lr`.
void RegisterPlanNarrowLr(CLI::App* plan) {
  RegisterDerivedPlan(
      plan, "narrow-lr",
      "For an instability neither warmup nor clipping cures: the baseline's spec with the top of its learning-rate "
      "range at half the unstable learning rate (from an instability probe, or the warmup or clipping study "
      "planned from one), to tune below it.\n\n"
      "Example:\n  dltune plan narrow-lr --from quickstart-clipping",
      PlanNarrowLearningRate);
}

// `dltune plan round2`.
void RegisterPlanRound2(CLI::App* plan) {
  struct Args : OutputArgs {
    std::uint64_t top = 3;
    std::string steps;
  };
  auto args = std::make_shared<Args>();
  auto* round2 = plan->add_subcommand(
      "round2",
      "Round 2 of the playbook's tuning in rounds (\"Deciding how long to train when training is compute-bound\"): "
      "the parent's best configurations trained longer, their learning-rate schedules extended by the playbook's "
      "rule (the extra steps at a high learning rate: a linear decay keeps its length, a cosine decay stretches; "
      "warmup keeps its length in steps). The report ranks the configurations in both rounds and says whether the "
      "winner changed.\n\n"
      "Example:\n  dltune plan round2 --from quickstart --top 3 --steps 4x");
  AddOutputOptions(round2, *args);
  round2->add_option("--top", args->top, "The best K configurations of each sub-study (default 3)")
      ->check(WholeNumberIn(1, 1000));
  round2->add_option("--steps", args->steps, "Round 2's max_train_steps: a factor of round 1's (4x) or a number")
      ->required();
  round2->callback([args] {
    const auto store = OpenStoreReadOnly(StoreUrlOrDefault(args->storage));
    const PlannedStudy planned =
        PlanRound2(*store, {.parent = args->from, .top = args->top, .steps = args->steps, .name = args->name});
    WritePlanned(planned, *args,
                 fmt::format("study {}, {} configuration{} at --steps {}", planned.name, planned.configurations,
                             planned.configurations == 1 ? "" : "s", args->steps));
  });
}

}  // namespace

void RegisterPlanCommand(CLI::App& app) {
  auto* plan = app.add_subcommand(
      "plan",
      "Plan a study from a parent study's records: the playbook's procedures between studies. Each writes a spec "
      "(a list of the parent's best configurations and a procedure: block naming the parent) to read, commit and "
      "run with dltune run; planning again on the same records writes the same file.\n\n"
      "Examples:\n  dltune plan retrain --from quickstart --replicas 5\n"
      "  dltune plan round2 --from quickstart --top 3 --steps 4x\n"
      "  dltune plan expand --from quickstart\n"
      "  dltune plan fix --from quickstart\n"
      "  dltune plan throughput --from examples/quickstart.yaml --batch-sizes 16:4096\n"
      "  dltune plan fit-steps --from quickstart-throughput\n"
      "  dltune plan apply-steps --from quickstart-fit-steps\n"
      "  dltune plan instability --from quickstart\n"
      "  dltune plan warmup --from quickstart-instability\n"
      "  dltune plan apply-warmup --from quickstart-instability-warmup\n"
      "  dltune plan clipping --from quickstart\n"
      "  dltune plan apply-clipping --from quickstart-clipping");
  plan->require_subcommand(1);

  RegisterPlanRetrain(plan);
  RegisterPlanFitSteps(plan);
  RegisterPlanApplySteps(plan);
  RegisterPlanExpand(plan);
  RegisterPlanFix(plan);
  RegisterPlanThroughput(plan);
  RegisterPlanInstability(plan);
  RegisterPlanWarmup(plan);
  RegisterPlanApplyWarmup(plan);
  RegisterPlanClipping(plan);
  RegisterPlanApplyClipping(plan);
  RegisterPlanNarrowLr(plan);
  RegisterPlanRound2(plan);
}

}  // namespace dltune::cli
