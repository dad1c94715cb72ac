#include "dltune/run/launch.h"

#include <poll.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "builtin/builtin_trial.h"
#include "core/git.h"
#include "core/sha256.h"
#include "core/strings.h"
#include "dltune/analyze/trial_variance.h"
#include "dltune/report/study_data.h"
#include "dltune/workloads/train.h"
#include "report/decision_log.h"
#include "run/trial_setup.h"
#include "store/tracking.h"
#include "study/command_template.h"
#include "trial/trial_process.h"
#include "trial/trial_report.h"

namespace dltune {
namespace {

const TrialRecord& TrialNumbered(const StudyData& data, std::uint64_t number) {
  const auto it =
      std::find_if(data.trials.begin(), data.trials.end(), [&](const TrialRecord& t) { return t.number == number; });
  if (it == data.trials.end()) {
    throw Error(
        fmt::format("study '{}' has no trial {} (it has {} trials)", data.study.name, number, data.trials.size()));
  }
  return *it;
}

// The best completed trial and why it was chosen.
std::pair<std::uint64_t, std::string> BestChoice(const StudyData& data) {
  if (data.spec.replicas > 1) {
    const TrialVariance variance = AnalyzeTrialVariance(data);
    if (variance.best_configuration) {
      for (const ConfigurationReplicas& c : variance.configurations) {
        if (c.configuration != *variance.best_configuration || !c.median_trial) continue;
        return {*c.median_trial,
                fmt::format("configuration {}{} has the best mean ({}); trial {} is its median replica",
                            c.configuration, c.scientific.empty() ? "" : " (" + c.scientific + ")",
                            ReplicaValueText(c.stats), *c.median_trial)};
      }
    }
  } else {
    std::optional<std::uint64_t> best;
    std::optional<double> best_value;
    for (const TrialRecord& trial : data.trials) {
      if (trial.state != TrialState::kCompleted) continue;
      const auto value = BestObjectiveOf(data, trial);
      if (value && (!best_value || IsBetter(*value, *best_value, data.spec.objective.direction))) {
        best = trial.number;
        best_value = value;
      }
    }
    if (best) {
      return {*best, fmt::format("trial {} has the study's best {} ({:.6g}; a single run)", *best,
                                 data.spec.objective.Name(), *best_value)};
    }
  }
  throw Error(fmt::format("study '{}' has no completed trial with an objective to launch", data.study.name));
}

// Runs the spec's evaluate_command for the checkpoint and collects the `eval` lines it reports for `split`.
CheckpointEvaluation EvaluateExternally(const StudyData& data, const ChosenCheckpoint& chosen,
                                        const std::string& split) {
  const StudySpec& spec = data.spec;
  if (spec.evaluate_command.empty()) {
    throw Error(fmt::format(
        "study '{}' trains with its own command: and has no evaluate_command: to evaluate a checkpoint with; add one "
        "(docs/trial-protocol.md, \"Evaluating a checkpoint\")",
        data.study.name));
  }
  const std::filesystem::path trial_dir = TrialDirectory(spec, data.study, chosen.trial.number);
  std::error_code error;
  std::filesystem::create_directories(trial_dir, error);
  auto values = Placeholders(spec, chosen.trial, ParamsByName(*spec.space, chosen.trial.params), trial_dir);
  std::filesystem::path checkpoint = chosen.checkpoint.path;
  if (checkpoint.is_relative()) checkpoint = trial_dir / checkpoint;
  values["checkpoint"] = checkpoint.string();
  values["split"] = split;
  TrialCommand command;
  command.shell_command = RenderCommand(spec.evaluate_command, values);
  // The trial's own files and variables too: the program reads its params as when it trained.
  command.environment = TrialEnvironment({.trial_dir = trial_dir,
                                          .seed = chosen.trial.seed,
                                          .max_train_steps = TrialMaxTrainSteps(spec, chosen.trial.params)});
  command.environment["DLTUNE_CHECKPOINT"] = checkpoint.string();
  command.environment["DLTUNE_SPLIT"] = split;
  command.stdout_path = trial_dir / "evaluate.log";
  command.stderr_path = trial_dir / "evaluate.log";
  TrialProcess process(command);
  ReportReader reader;
  CheckpointEvaluation evaluation;
  std::string bytes;
  bool open = true;
  std::optional<ExitStatus> status;
  while (open || !status) {
    if (open) {
      pollfd poll_fd{process.report_fd(), POLLIN, 0};
      ::poll(&poll_fd, 1, 100);
      open = process.ReadReport(bytes);
      reader.Feed(bytes);
      bytes.clear();
      while (auto line = reader.Next(!open)) {
        if (line->eval && line->eval->split == split) {
          evaluation.metrics = line->eval->metrics;
          evaluation.examples = line->eval->examples;
        }
      }
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!status) status = process.TryWait();
  }
  if (!status->ok()) {
    throw Error(fmt::format("evaluate_command for trial {} ended with {}: {}", chosen.trial.number, status->Describe(),
                            TailOfFile(command.stderr_path, 5)));
  }
  if (evaluation.metrics.empty()) {
    throw Error(fmt::format("evaluate_command for trial {} reported no eval line for split '{}' (see {})",
                            chosen.trial.number, split, command.stdout_path.string()));
  }
  return evaluation;
}

}  // namespace

ChosenCheckpoint ChooseCheckpoint(Store& store, const StudyData& data, std::optional<std::uint64_t> trial) {
  ChosenCheckpoint chosen;
  if (trial) {
    chosen.trial = TrialNumbered(data, *trial);
    if (chosen.trial.state != TrialState::kCompleted) {
      throw Error(fmt::format("trial {} of study '{}' is {}, not completed: only a finished run is launched", *trial,
                              data.study.name, TrialStateName(chosen.trial.state)));
    }
    chosen.why = fmt::format("trial {}, as asked", *trial);
  } else {
    const auto [number, why] = BestChoice(data);
    chosen.trial = TrialNumbered(data, number);
    chosen.why = why;
  }
  const auto checkpoint = BestCheckpoint(store.ListCheckpoints(chosen.trial.id), chosen.trial.best_step);
  if (!checkpoint) {
    throw Error(fmt::format("trial {} of study '{}' keeps no checkpoint of its best step {}", chosen.trial.number,
                            data.study.name,
                            chosen.trial.best_step ? std::to_string(*chosen.trial.best_step) : "(none recorded)"));
  }
  chosen.checkpoint = *checkpoint;
  return chosen;
}

std::optional<Adoption> LatestDecision(const StudyData& data) {
  static const std::regex kAdopted(R"(^(configuration|trial) ([0-9]{1,18})\b.*)");
  for (auto it = data.notes.rbegin(); it != data.notes.rend(); ++it) {
    if (it->kind != NoteKind::kDecision) continue;
    std::smatch match;
    if (!std::regex_match(it->adopt, match, kAdopted)) {
      throw Error(fmt::format("study '{}': decision {} adopts '{}', neither a trial nor a configuration",
                              data.study.name, it->id, it->adopt));
    }
    return Adoption{.note = it->id,
                    .configuration = match[1].str() == "configuration",
                    .number = std::stoull(match[2].str()),
                    .text = it->adopt,
                    .decided_at = it->created_at};
  }
  return std::nullopt;
}

namespace {

// The trial a decision adopts: the trial itself, or the configuration's median replica (its only trial without
// replicas).
std::uint64_t AdoptedTrial(const StudyData& data, const Adoption& adoption) {
  if (!adoption.configuration) return adoption.number;
  if (data.spec.replicas > 1) {
    for (const ConfigurationReplicas& c : AnalyzeTrialVariance(data).configurations) {
      if (c.configuration != adoption.number) continue;
      if (c.median_trial) return *c.median_trial;
      throw Error(fmt::format("study '{}': configuration {} that the decision adopts has no completed replica",
                              data.study.name, adoption.number));
    }
  }
  for (const TrialRecord& trial : data.trials) {
    if (trial.configuration == adoption.number && trial.state == TrialState::kCompleted) return trial.number;
  }
  throw Error(fmt::format("study '{}': configuration {} that the decision adopts has no completed trial",
                          data.study.name, adoption.number));
}

// Whether `number` is a trial of what the decision adopts.
bool TrialOfAdoption(const StudyData& data, const Adoption& adoption, std::uint64_t number) {
  if (!adoption.configuration) return number == adoption.number;
  const auto it =
      std::find_if(data.trials.begin(), data.trials.end(), [&](const TrialRecord& t) { return t.number == number; });
  return it != data.trials.end() && it->configuration == adoption.number;
}

}  // namespace

ChosenCheckpoint ChooseForTheTestSplit(Store& store, const StudyData& data, std::optional<std::uint64_t> trial,
                                       bool overrule_decision) {
  const std::optional<Adoption> decision = LatestDecision(data);
  const std::string decided =
      decision ? fmt::format("the decision of {} (note {}) adopts {}",
                             FormatClockTime(decision->decided_at, "%Y-%m-%d %H:%M", TimeZone::kLocal), decision->note,
                             decision->text)
               : "";
  if (trial) {
    if (decision && !TrialOfAdoption(data, *decision, *trial) && !overrule_decision) {
      throw Error(fmt::format(
          "study '{}': {}, and trial {} is not of it: launch what was decided (leave out --trial), decide again "
          "(dltune decide), or pass --overrule-decision to evaluate trial {} on the test set all the same",
          data.study.name, decided, *trial, *trial));
    }
    ChosenCheckpoint chosen = ChooseCheckpoint(store, data, trial);
    if (decision && TrialOfAdoption(data, *decision, *trial)) chosen.decision = decision->note;
    if (decision && !chosen.decision) chosen.why += fmt::format(", overruling {}", decided);
    return chosen;
  }
  if (!decision) {
    ChosenCheckpoint chosen = ChooseCheckpoint(store, data, std::nullopt);
    chosen.why += "; no decision is recorded on this study (dltune decide records one), so its best is taken";
    return chosen;
  }
  const std::uint64_t number = AdoptedTrial(data, *decision);
  ChosenCheckpoint chosen = ChooseCheckpoint(store, data, number);
  chosen.decision = decision->note;
  chosen.why = decision->configuration ? fmt::format("{}: trial {} is its median replica", decided, number)
                                       : fmt::format("{}", decided);
  return chosen;
}

bool VerifyCheckpoint(const CheckpointRecord& checkpoint) {
  const auto expected = CanonicalChecksum(checkpoint.checksum);
  if (!expected) return false;  // none recorded
  std::filesystem::path file = checkpoint.path;
  std::error_code error;
  if (std::filesystem::is_directory(file, error)) file /= "state.pt";
  if (!std::filesystem::exists(file, error)) {
    throw IoError(fmt::format("{}: the checkpoint of step {} is gone", file.string(), checkpoint.step));
  }
  const std::string actual = Sha256File(file);
  if (actual != *expected) {
    throw CorruptError(
        fmt::format("{}: the checkpoint of step {} changed since it was recorded (checksum {}, "
                    "recorded {}); it is not the one training selected",
                    file.string(), checkpoint.step, actual, *expected));
  }
  return true;
}

CheckpointEvaluation EvaluateChosen(const StudyData& data, const ChosenCheckpoint& chosen, const std::string& split,
                                    const std::filesystem::path& export_path, const TestSplitHold* test_split) {
  if (split == "test" && (test_split == nullptr || test_split->study_id() != data.study.id)) {
    throw Error(
        fmt::format("the test split of study '{}' is evaluated only while held (HoldTestSplit: once, at the "
                    "end, one process at a time); dltune launch and dltune evaluate --split test hold it",
                    data.study.name));
  }
  CheckpointEvaluation evaluation;
  if (data.spec.workload.name.empty()) {
    evaluation = EvaluateExternally(data, chosen, split);
  } else {
    const auto params = ParamsByName(*data.spec.space, chosen.trial.params);
    const nlohmann::json description = TrialDescription(data.spec, data.study, chosen.trial, params,
                                                        TrialThreads(data.spec, data.study, chosen.trial.number), true);
    const BuiltinTrialRun run = ReadBuiltinTrial(description, "trial " + std::to_string(chosen.trial.number));
    if (!export_path.empty()) {
      std::error_code error;
      std::filesystem::create_directories(export_path.parent_path(), error);
    }
    const CheckpointMetrics measured =
        EvaluateWorkloadCheckpoint(run.workload, run.args, HyperParams(run.args, run.params), run.options,
                                   chosen.checkpoint.path, split, export_path.string());
    for (const EvalMetric& metric : measured.metrics) {
      evaluation.metrics[metric.metric] = metric.value;
      evaluation.examples = metric.examples;
    }
  }
  evaluation.trial = chosen.trial.number;
  evaluation.step = chosen.checkpoint.step;
  evaluation.checkpoint_path = chosen.checkpoint.path;
  evaluation.checksum = chosen.checkpoint.checksum;
  evaluation.split = split;
  return evaluation;
}

std::vector<StudyRecord> LineageOf(Store& store, const StudyRecord& study) {
  const std::vector<StudyRecord> studies = store.ListStudies();
  std::multimap<std::int64_t, std::int64_t> links;  // each way: parent -> child and child -> parent (IsParentOf)
  for (const StudyRecord& other : studies) {
    if (const StudyRecord* parent = ParentAmong(studies, other)) {
      links.emplace(parent->id, other.id);
      links.emplace(other.id, parent->id);
    }
  }
  // A walk that visits each study once.
  std::set<std::int64_t> members = {study.id};
  for (std::vector<std::int64_t> frontier = {study.id}; !frontier.empty();) {
    const std::int64_t id = frontier.back();
    frontier.pop_back();
    for (auto [it, end] = links.equal_range(id); it != end; ++it) {
      if (members.insert(it->second).second) frontier.push_back(it->second);
    }
  }
  std::vector<StudyRecord> lineage;
  for (const StudyRecord& other : studies) {
    if (members.count(other.id) != 0) lineage.push_back(other);
  }
  std::sort(lineage.begin(), lineage.end(), [](const StudyRecord& a, const StudyRecord& b) { return a.id < b.id; });
  return lineage;
}

std::vector<TestLook> TestLooks(Store& store, const StudyRecord& study) {
  std::vector<TestLook> looks;
  for (const StudyRecord& member : LineageOf(store, study)) {
    std::map<std::int64_t, std::int64_t> launch_of;  // evaluation id -> launch id
    for (const LaunchRecord& launch : store.ListLaunches(member.id)) launch_of[launch.evaluation.id] = launch.id;
    for (const CheckpointEvaluation& evaluation : store.ListEvaluations(member.id)) {
      if (evaluation.split != "test") continue;
      const auto launch = launch_of.find(evaluation.id);
      looks.push_back({.study = member.name,
                       .evaluation = evaluation,
                       .launch = launch == launch_of.end() ? std::nullopt : std::optional(launch->second)});
    }
  }
  std::stable_sort(looks.begin(), looks.end(), [](const TestLook& a, const TestLook& b) {
    return a.evaluation.created_at < b.evaluation.created_at;
  });
  return looks;
}

int TestEvaluations(Store& store, const StudyRecord& study) { return static_cast<int>(TestLooks(store, study).size()); }

std::string CurrentAuthor() {
  std::string user;
  if (const char* name = std::getenv("USER"); name && *name) user = name;
  if (user.empty()) {
    if (const passwd* entry = ::getpwuid(::getuid())) user = entry->pw_name;
  }
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return (user.empty() ? "unknown" : user) + "@" + host;
}

TestSplitHold HoldTestSplit(Store& store, const StudyRecord& study, bool again) {
  // One lock for the lineage, on its oldest study: two of its studies never look at once either.
  TestSplitHold hold(store.LockTestSplit(LineageOf(store, study).front().id), study.id);
  const std::vector<TestLook> looks = TestLooks(store, study);
  if (!looks.empty() && !again) {
    std::vector<std::string> seen;
    seen.reserve(looks.size());
    for (const TestLook& look : looks) {
      seen.push_back(look.launch ? fmt::format("launch {} of study '{}'", *look.launch, look.study)
                                 : fmt::format("dltune evaluate --split test of study '{}'", look.study));
    }
    throw Error(fmt::format(
        "the test split of study '{}' was evaluated {} time{} already in its lineage (the studies planned from the "
        "same first one share its test set): {}; dltune launches {} lists them. The playbook checks the test set "
        "once, at the end: pass --again to evaluate it once more (the count is kept)",
        study.name, looks.size(), looks.size() == 1 ? "" : "s", fmt::join(seen, ", "), ShellQuote(study.name)));
  }
  return hold;
}

EvaluationDone Evaluate(Store& store, const EvaluateRequest& request) {
  const StudyData data = LoadStudyData(store, request.study, /*with_measurements=*/false);
  std::optional<TestSplitHold> test_split;
  if (request.split == "test") {
    RequireAdoptable(data, "evaluate on the test split");
    test_split.emplace(HoldTestSplit(store, data.study, request.again));
  }
  EvaluationDone done;
  done.chosen = request.split == "test" ? ChooseForTheTestSplit(store, data, request.trial, request.overrule_decision)
                                        : ChooseCheckpoint(store, data, request.trial);
  done.checksum_verified = VerifyCheckpoint(done.chosen.checkpoint);
  done.evaluation = store.AddEvaluation(
      data.study.id, EvaluateChosen(data, done.chosen, request.split, {}, test_split ? &*test_split : nullptr));
  done.test_evaluations = TestEvaluations(store, data.study);
  return done;
}

LaunchDone Launch(Store& store, const LaunchRequest& request) {
  if (request.reason.empty()) throw Error("a launch needs --reason: why this model is adopted, for the decision log");
  const StudyData data = LoadStudyData(store, request.study, /*with_measurements=*/false);
  RequireAdoptable(data, "launch");
  // Held until the launch is recorded: a second launch at the same time is refused, never a second look unasked.
  const TestSplitHold test_split = HoldTestSplit(store, data.study, request.again);
  LaunchDone done;
  done.chosen = ChooseForTheTestSplit(store, data, request.trial, request.overrule_decision);
  done.checksum_verified = VerifyCheckpoint(done.chosen.checkpoint);
  const bool built_in = !data.spec.workload.name.empty();
  std::filesystem::path export_path = request.export_path;
  if (export_path.empty() && built_in) {
    const auto launches = store.ListLaunches(data.study.id);
    export_path = std::filesystem::absolute(StudyDirectory(data.spec, data.study) / "launches" /
                                            fmt::format("launch_{}", launches.size() + 1) / "model.pt");
  }
  LaunchRecord launch;
  launch.evaluation =
      EvaluateChosen(data, done.chosen, "test", built_in ? export_path : std::filesystem::path(), &test_split);
  launch.reason = request.reason;
  launch.author = CurrentAuthor();
  launch.git_commit = GitCommitOf(std::filesystem::current_path()).value_or("");
  launch.git_dirty = GitDirtyOf(std::filesystem::current_path());
  // An external program's model is its checkpoint.
  launch.export_path = built_in ? export_path.string() : done.chosen.checkpoint.path;
  launch.decision = done.chosen.decision;
  done.launch = store.AddLaunch(data.study.id, launch);
  done.test_evaluations = TestEvaluations(store, data.study);
  return done;
}

}  // namespace dltune
