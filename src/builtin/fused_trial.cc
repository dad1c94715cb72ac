#include "builtin/fused_trial.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "builtin/builtin_trial.h"
#include "builtin/injected_faults.h"
#include "dltune/core/error.h"
#include "dltune/train/trainer.h"
#include "dltune/workloads/train.h"
#include "trial/trial_report.h"

namespace dltune {
namespace {

// Every member's report lines, on the group's one channel: "<member>\t<line>", each written whole and flushed.
class GroupReporter final : public MemberCallbacks {
 public:
  GroupReporter(const std::string& report_path, const std::atomic<bool>& stop_requested)
      : report_(std::fopen(report_path.c_str(), "a")), stop_requested_(stop_requested) {
    if (!report_) throw IoError(fmt::format("{}: cannot open the report channel", report_path));
  }
  ~GroupReporter() override { std::fclose(report_); }
  GroupReporter(const GroupReporter&) = delete;
  GroupReporter& operator=(const GroupReporter&) = delete;

  void Write(std::size_t member, const std::string& line) {
    std::fputs(fmt::format("{}\t{}\n", member, line).c_str(), report_);
    std::fflush(report_);
  }

  void OnStart(std::size_t member, std::int64_t step) override {
    if (step > 0 && member == 0) {
      std::printf("resuming the group from its checkpoints of step %lld\n", static_cast<long long>(step));
      std::fflush(stdout);
    }
    Write(member, RuntimeLine());
    Write(member, StartLine(step, true));
  }

  void OnTrainMetrics(std::size_t member, const std::vector<StepMetrics>& steps) override {
    std::string lines;
    for (const StepMetrics& s : steps) lines += fmt::format("{}\t{}\n", member, TrainLineOf(s));
    std::fputs(lines.c_str(), report_);
    std::fflush(report_);
  }

  void OnEvaluation(std::size_t member, std::int64_t step, const std::vector<EvalMetric>& metrics, std::int64_t,
                    double) override {
    for (const std::string& line : EvalLines(step, metrics)) Write(member, line);
  }

  void OnCheckpoint(std::size_t member, const CheckpointEvent& event) override {
    Write(member, CheckpointLineOf(event));
  }

  void OnEnd(std::size_t member, const TrainResult& result) override {
    if (result.outcome == TrainOutcome::kCompleted) ends_[member] = EndLine({});
    if (result.outcome == TrainOutcome::kInfeasible) {
      // Told at once, while its mates train on: the worker records it infeasible now, so that a runner killed
      // before the group ends leaves no member running without a checkpoint beside mates with some. Its time is the
      // group's, not known yet: a diverged member has no timing line.
      Write(member, EndLine({.state = EndState::kInfeasible, .reason = result.reason}));
      ended_early_.insert(member);
    }
    // A stopped member writes no end: the group's exit status (kExitStopped) says it.
  }

  // Once the group has trained: each member's time (the group's time split, which it trained in) and end.
  void Finish(const std::vector<TrainResult>& results) {
    for (std::size_t m = 0; m < results.size(); ++m) {
      if (ended_early_.count(m) != 0) continue;
      Write(m, TimingLine(results[m].seconds));
      if (const auto end = ends_.find(m); end != ends_.end()) Write(m, end->second);
    }
  }

  bool ShouldStop(std::int64_t step) override {
    faults_.AtStep(step);
    return stop_requested_.load();
  }

 private:
  std::FILE* report_;
  InjectedFaults faults_;
  const std::atomic<bool>& stop_requested_;
  std::map<std::size_t, std::string> ends_;  // by member: its end line, written after its time
  std::set<std::size_t> ended_early_;        // the members that diverged: their end is written already
};

}  // namespace

std::vector<std::string> FusedTrialFiles(const std::string& variable) {
  std::vector<std::string> files;
  std::istringstream lines(variable);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty()) files.push_back(line);
  }
  return files;
}

int RunFusedTrials(const std::atomic<bool>& stop_requested) {
  const std::vector<std::string> files = FusedTrialFiles(RequireWorkerVariable(kFusedTrialsVariable, "run-fused"));
  if (files.empty()) throw Error(fmt::format("${} lists no trial file", kFusedTrialsVariable));
  const char* limits_variable = std::getenv(kFusedResumeLimitsVariable);
  const std::vector<std::string> limits = FusedTrialFiles(limits_variable != nullptr ? limits_variable : "");
  std::vector<FusedMember> members;
  std::optional<BuiltinTrialRun> first;
  nlohmann::json shared;  // what every member must have alike
  for (const std::string& file : files) {
    const nlohmann::json trial = ReadTrialFile(file);
    BuiltinTrialRun run = ReadBuiltinTrial(trial, file);
    const nlohmann::json alike = {{"workload", trial.at("workload")},
                                  {"max_train_steps", trial.at("max_train_steps")},
                                  {"training", trial.at("training")},
                                  {"objective", trial.at("objective")}};
    if (!first) {
      shared = alike;
      first = run;
    } else if (alike != shared) {
      throw Error(
          fmt::format("{}: a fused group's trials share their workload, max_train_steps, training and "
                      "objective; this one's differ from {}'s",
                      file, files.front()));
    }
    members.push_back({.params = HyperParams(run.args, run.params),
                       .init_seed = run.options.init_seed,
                       .data_seed = run.options.data_seed,
                       .checkpoint_dir = (std::filesystem::path(file).parent_path() / "checkpoints").string(),
                       .checkpoint_owner = run.options.checkpoint_owner,
                       .max_resume_step = members.size() < limits.size() ? std::stoll(limits[members.size()]) : -1});
  }
  // Here, in the group's own process: a trial server must not have touched CUDA before it forks.
  first->options.device = ResolveTrainingDevice(first->options.training);
  if (first->options.device != "cpu") std::printf("training on %s\n", first->options.device.c_str());
  GroupReporter reporter(RequireWorkerVariable("DLTUNE_REPORT", "run-fused"), stop_requested);
  std::printf("fused group of %zu trials\n", members.size());
  std::fflush(stdout);
  const std::vector<TrainResult> results =
      TrainFusedTrials(first->workload, first->args, members, first->options, reporter);
  reporter.Finish(results);
  for (const TrainResult& result : results) {
    if (result.outcome == TrainOutcome::kStopped) return kExitStopped;
  }
  return 0;
}

}  // namespace dltune
