#include "run/trial_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cassert>
#include <fstream>
#include <set>

#include <fmt/format.h>

#include "core/files.h"
#include "core/machine.h"
#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/core/hyperparams.h"
#include "dltune/run/study_session.h"
#include "dltune/workloads/train.h"
#include "store/recorded_spec.h"
#include "study/command_template.h"
#include "train/blas_kernels.h"
#include "train/torch_build.h"
#include "trial/checkpoint_owner.h"
#include "trial/python_client.h"
#include "trial/trial_environment.h"
#include "trial/trial_report.h"

namespace dltune {
namespace {

// Trial files are written again by every attempt of the trial: whole, but not synced to disk.
void WriteJson(const std::filesystem::path& path, const nlohmann::json& json) {
  WriteFileAtomically(path, json.dump(2) + "\n", /*sync=*/false);
}

}  // namespace

std::map<std::string, std::string> Placeholders(const StudySpec& spec, const TrialRecord& trial,
                                                const std::map<std::string, Value>& params,
                                                const std::filesystem::path& trial_dir) {
  std::map<std::string, std::string> values;
  for (const auto& [name, value] : params) values[name] = FormatValue(value);
  values["trial_dir"] = trial_dir.string();
  values["trial_number"] = std::to_string(trial.number);
  values["seed"] = std::to_string(trial.seed);
  values["max_train_steps"] = std::to_string(TrialMaxTrainSteps(spec, trial.params));
  values["params_file"] = (trial_dir / "params.json").string();
  return values;
}

namespace {

// A command that is one simple command ("python3 train.py --lr 0.1") runs as `exec ...`, so the program replaces
// the shell: it then receives dltune's signals itself and dies with its worker (parent-death signal).
// Other commands keep their shell, which is told to survive SIGTERM (`trap : TERM`): the signal reaches the
// program through the process group, and the shell then exits with the program's status (75 when it stopped).
std::string ExecWhenSimple(const std::string& command) {
  std::string keep_shell = "trap : TERM; " + command;
  if (command.find_first_of(";&|()\n") != std::string::npos) return keep_shell;  // lists, pipes, subshells
  const auto first_end = command.find(' ');
  const std::string first = command.substr(0, first_end);
  static const std::set<std::string> kNotPrograms = {"cd",  "export", "set",    "exec",  "if",
                                                     "for", "while",  "until",  "case",  "eval",
                                                     ".",   "source", "ulimit", "umask", "unset"};
  if (first.empty() || first.find('=') != std::string::npos || kNotPrograms.count(first)) return keep_shell;
  return "exec " + command;
}

// Writes <study dir>/study.json naming the study the first time, and refuses a directory that names another one.
void ClaimStudyDirectory(const std::filesystem::path& dir, const StudyRecord& study) {
  const auto path = dir / "study.json";
  if (std::ifstream in(path); in) {
    const auto recorded = nlohmann::json::parse(in, nullptr, false);
    if (recorded.is_object() && recorded.value("uid", "") == study.uid) return;
    throw Error(fmt::format("{}: this directory belongs to {}, not to study '{}' (uid {}); its trials are not "
                            "touched",
                            path.string(),
                            recorded.is_object() ? fmt::format("study '{}' (uid {})", recorded.value("study", "?"),
                                                               recorded.value("uid", "?"))
                                                 : "another study (unreadable study.json)",
                            study.name, study.uid),
                ErrorKind::kConflict);
  }
  WriteJson(path, {{"study", study.name}, {"uid", study.uid}, {"created_at", study.created_at}});
}

}  // namespace

void CheckWorkerCanTrain(const StudySpec& spec) {
  CheckWorkloadKnown(spec);
  if (spec.workload.name.empty() && spec.command.empty()) {
    throw Error(
        fmt::format("{}: study '{}' names neither workload: nor command:, so a worker has nothing to train; a "
                    "study without either is trained by your own program through the ask/tell API (see "
                    "examples/ask_tell)",
                    spec.file, spec.name));
  }
  // Every trial would fail the same way at its start: said once, before any starts.
  if (spec.command.empty() && spec.training.device == "cuda" && !LibTorchHasCuda()) {
    throw Error(
        fmt::format("{}: study '{}' sets training.device: cuda, and the LibTorch this dltune was built against "
                    "has no CUDA, so its built-in trainer cannot train on a GPU: build dltune against a LibTorch "
                    "with CUDA (README, \"On a GPU machine\"), or set training.device to auto (a GPU where "
                    "there is one, else the CPU) or cpu",
                    spec.file, spec.name));
  }
}

bool WorkerCanTrain(const StudyRecord& study) {
  try {
    CheckWorkerCanTrain(RecordedSpec(study));
    return true;
  } catch (const Error&) {
    return false;
  }
}

void CheckWorkloadKnown(const StudySpec& spec) {
  if (spec.workload.name.empty()) return;
  std::vector<std::string> names;
  try {
    names = WorkloadNames();
  } catch (const Error& e) {  // no trainer to ask (a dltune built without it, or its module missing): said at the key
    throw Error(
        fmt::format("{}: workload '{}' cannot train: {}", spec.workload.where.ToString(), spec.workload.name, e.what()),
        e.kind());
  }
  if (std::find(names.begin(), names.end(), spec.workload.name) != names.end()) return;
  throw SpecError(
      spec.workload.where, "workload",
      fmt::format("'{}' is not a workload this dltune knows{}; it knows {} (a workload of your own is "
                  "known to the program that registers it: see examples/custom_workload)",
                  spec.workload.name, DidYouMean(spec.workload.name, names), JoinAlternatives(names, false)));
}

void CheckWorkloadReadsParams(const StudySpec& spec, const StudyPlan& plan) {
  if (spec.workload.name.empty()) return;
  // Enough trials to meet every sub-study's and every condition's params; each builds a model, in milliseconds.
  constexpr std::uint64_t kCheckedTrials = 64;
  std::vector<std::string> problems;
  std::set<std::string> seen;
  for (std::uint64_t number = 0; number < plan.TrialCount() && number < kCheckedTrials; ++number) {
    if (!plan.IsPlanned(number)) continue;
    const PlannedTrial trial = plan.Trial(number);
    try {
      CheckWorkloadParams(spec.workload.name, spec.workload.args,
                          HyperParams(spec.workload.args, ParamsByName(*spec.space, trial.params)),
                          TrialMaxTrainSteps(spec, trial.params));
    } catch (const Error& e) {
      if (seen.insert(e.what()).second) problems.push_back(fmt::format("trial {}: {}", number, e.what()));
    }
  }
  if (problems.empty()) return;
  std::string message = fmt::format("'{}' would fail these trials before training:", spec.workload.name);
  for (const auto& problem : problems) message += "\n  " + problem;
  throw SpecError(spec.workload.where, "workload", message);
}

void CheckRunDirUsable(const StudySpec& spec) {
  const std::filesystem::path dir = std::filesystem::absolute(spec.run_dir).lexically_normal();
  const auto refuse = [&](const std::string& why) {
    throw SpecError(SourceLocation{spec.file}, "run_dir",
                    fmt::format("'{}' cannot hold the trials' directories: {}", dir.string(), why));
  };
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (!std::filesystem::is_directory(dir)) {
    refuse(error ? error.message() : std::string("it is not a directory"));
  }
  // Writing is what trials do: try it (access() says yes to root on a read-only mount, and to nothing about /proc).
  const std::filesystem::path probe = dir / fmt::format(".dltune-write-check-{}", ::getpid());
  std::filesystem::create_directory(probe, error);
  if (error) refuse(error.message());
  std::filesystem::remove(probe, error);
}

void CheckSpecBeforeCreating(const StudySpec& spec) {
  CheckWorkloadKnown(spec);
  CheckWorkloadReadsParams(spec, StudyPlan(spec));
  if (!spec.workload.name.empty() || !spec.command.empty()) CheckRunDirUsable(spec);
}

namespace {

// The threads the trial.json in `trial_dir` records; 0 when it has none or there is none.
int RecordedThreads(const std::filesystem::path& trial_dir) {
  std::ifstream in(trial_dir / "trial.json");
  const nlohmann::json trial = nlohmann::json::parse(in, nullptr, false);
  return trial.is_object() ? std::max(0, trial.value(nlohmann::json::json_pointer("/training/threads"), 0)) : 0;
}

}  // namespace

int TrialThreads(const StudySpec& spec, const StudyRecord& study, std::uint64_t number) {
  if (spec.training.threads > 0) return spec.training.threads;
  return std::max(1, RecordedThreads(TrialDirectory(spec, study, number)));
}

nlohmann::json TrialDescription(const StudySpec& spec, const StudyRecord& study, const TrialRecord& trial,
                                const std::map<std::string, Value>& params, int threads, bool resuming) {
  TrainingSettings training = spec.training.Resolved(TrialMaxTrainSteps(spec, trial.params));
  training.threads = threads;
  return {{"protocol", kTrialProtocolVersion},
          {"study", spec.name},
          {"study_uid", study.uid},
          {"checkpoint_owner", TrialCheckpointOwner(study, trial, params)},
          {"number", trial.number},
          {"substudy", trial.substudy_label},
          {"seed", trial.seed},
          {"max_train_steps", TrialMaxTrainSteps(spec, trial.params)},
          {"objective", ObjectiveToJson(spec.objective)},
          {"workload", {{"name", spec.workload.name}, {"args", spec.workload.args}}},
          // Every setting, the derived ones (the evaluation interval) worked out for the program that reads them.
          {"training", TrainingSettingsToJson(training)},
          {"params", ParamsByNameJson(params)},
          {"resuming", resuming}};
}

void WriteTrialDescription(const std::filesystem::path& trial_dir, const nlohmann::json& description) {
  WriteJson(trial_dir / "trial.json", description);
}

namespace {

// trial.json's "gpus": [{"uuid", "name", "index", "memory_total_bytes"}, ...], by rank.
nlohmann::json GpusJson(const std::vector<GpuDevice>& gpus) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& gpu : gpus) {
    list.push_back(
        {{"uuid", gpu.uuid}, {"name", gpu.name}, {"index", gpu.index}, {"memory_total_bytes", gpu.total_memory_bytes}});
  }
  return list;
}

}  // namespace

std::map<std::string, std::string> SharedTrialEnvironment(bool builtin) {
  std::map<std::string, std::string> environment;
  if (const auto wait = PassiveWaitEnvironment()) environment[wait->first] = wait->second;
  if (const auto python_path = PythonPathWithClient()) environment["PYTHONPATH"] = *python_path;
  if (builtin) {
    // The built-in trainer's process starts with the BLAS kernels it would otherwise restart itself to get.
    if (const auto blas = FasterBlasEnvironment()) environment[blas->first] = blas->second;
    environment["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8";  // cuBLAS's deterministic workspace, on CUDA
  }
  return environment;
}

std::map<std::string, std::string> TrialEnvironment(const TrialVariables& variables) {
  std::map<std::string, std::string> environment = SharedTrialEnvironment(variables.builtin);
  if (!variables.trial_dir.empty()) {
    environment["DLTUNE_TRIAL_DIR"] = variables.trial_dir.string();
    environment["DLTUNE_PARAMS"] = (variables.trial_dir / "params.json").string();
    environment["DLTUNE_TRIAL"] = (variables.trial_dir / "trial.json").string();
  }
  if (!variables.trial_json.empty()) environment["DLTUNE_TRIAL"] = variables.trial_json.string();
  if (variables.seed) environment["DLTUNE_SEED"] = std::to_string(*variables.seed);
  if (variables.max_train_steps) environment["DLTUNE_MAX_TRAIN_STEPS"] = std::to_string(*variables.max_train_steps);
  if (variables.threads) {
    environment["DLTUNE_THREADS"] = std::to_string(*variables.threads);
    for (const char* name : kThreadCountVariables) environment[name] = std::to_string(*variables.threads);
  }
  return environment;
}

PreparedTrial PrepareTrial(const StudySpec& given_spec, const StudyRecord& study, const ActiveTrial& trial,
                           const std::filesystem::path& dltune_executable, int auto_threads,
                           const std::optional<std::vector<GpuDevice>>& gpus) {
  StudySpec resolved;
  if (given_spec.training.threads == 0) {
    resolved = given_spec;
    // A trial that resumes keeps the threads it started with: sums over other threads round differently, and
    // resuming is bit-exact.
    const int recorded = RecordedThreads(TrialDirectory(given_spec, study, trial.number()));
    resolved.training.threads = recorded > 0 ? recorded : std::max(1, auto_threads);
  }
  const StudySpec& spec = given_spec.training.threads == 0 ? resolved : given_spec;
  PreparedTrial prepared;
  prepared.trial_dir = TrialDirectory(spec, study, trial.number());
  std::error_code error;
  std::filesystem::create_directories(prepared.trial_dir, error);
  if (error) {
    throw IoError(
        fmt::format("{}: cannot create the trial directory: {}", prepared.trial_dir.string(), error.message()));
  }
  ClaimStudyDirectory(StudyDirectory(spec, study), study);
  prepared.resuming = std::filesystem::exists(prepared.trial_dir / "trial.json");
  const auto params = trial.ParamsByName();
  WriteJson(prepared.trial_dir / "params.json", ParamsByNameJson(params));
  nlohmann::json description = TrialDescription(spec, study, trial.record(), params,
                                                TrialThreads(spec, study, trial.number()), prepared.resuming);
  if (gpus) description["gpus"] = GpusJson(*gpus);
  WriteTrialDescription(prepared.trial_dir, description);

  TrialCommand& command = prepared.command;
  if (spec.command.empty()) {
    command.argv = {dltune_executable.string(), "run-trial"};
    command.warm_start = true;
  } else {
    command.shell_command =
        ExecWhenSimple(RenderCommand(spec.command, Placeholders(spec, trial.record(), params, prepared.trial_dir)));
  }
  command.environment = TrialEnvironment({.builtin = spec.command.empty(),
                                          .trial_dir = prepared.trial_dir,
                                          .seed = trial.record().seed,
                                          .max_train_steps = TrialMaxTrainSteps(spec, trial.record().params),
                                          .threads = spec.training.threads});
  command.environment["DLTUNE_PROTOCOL"] = std::to_string(kTrialProtocolVersion);
  command.environment["DLTUNE_RESUMING"] = prepared.resuming ? "1" : "0";
  command.environment["DLTUNE_TRIAL_NUMBER"] = std::to_string(trial.number());
  // A program of one process may answer that it serves its trials warm (docs/trial-protocol.md, "Warm trial
  // processes (Python programs)"); a launcher's ranks (training.processes) always start cold.
  if (!spec.command.empty() && spec.training.processes == 1) command.environment["DLTUNE_WARM_OFFER"] = "1";
  if (gpus) {
    // By UUID, in the order NVML lists them: what the trial sees is what it was given, whatever CUDA's own order.
    std::string visible;
    for (const auto& gpu : *gpus) visible += (visible.empty() ? "" : ",") + gpu.uuid;
    command.environment["CUDA_VISIBLE_DEVICES"] = visible;
    command.environment["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  }
  command.stdout_path = prepared.trial_dir / "stdout.log";
  command.stderr_path = prepared.trial_dir / "stderr.log";
  return prepared;
}

std::string ReproduceCommand(const StudySpec& spec, const StudyRecord& study, const TrialRecord& trial) {
  const auto params = ParamsByName(*spec.space, trial.params);
  const auto trial_dir = TrialDirectory(spec, study, trial.number);
  const std::string out = trial_dir.string() + "-again";
  if (!spec.command.empty()) {
    return fmt::format(
        "DLTUNE_PARAMS={} DLTUNE_TRIAL={} DLTUNE_TRIAL_DIR={} DLTUNE_SEED={} DLTUNE_MAX_TRAIN_STEPS={} {}",
        ShellQuote((trial_dir / "params.json").string()), ShellQuote((trial_dir / "trial.json").string()),
        ShellQuote(out), trial.seed, TrialMaxTrainSteps(spec, trial.params),
        RenderCommand(spec.command, Placeholders(spec, trial, params, out)));
  }
  std::string command = fmt::format("dltune train {}", spec.workload.name);
  for (const auto& [key, value] : spec.workload.args.items()) {
    command += fmt::format(" --set {}", ShellQuote(key + "=" + value.dump()));
  }
  for (const auto& [name, value] : params) command += " --set " + ShellQuote(name + "=" + FormatValue(value));
  command += fmt::format(" --steps {} --seed {}", TrialMaxTrainSteps(spec, trial.params), trial.seed);
  TrainingSettings training = spec.training;
  training.threads = TrialThreads(spec, study, trial.number);
  if (const std::string flags = TrainingSettingFlags(training); !flags.empty()) command += " " + flags;
  if (spec.objective.Name() != Objective{}.Name() || spec.objective.direction != Direction::kMinimize) {
    command +=
        fmt::format(" --objective {} --{}", ShellQuote(spec.objective.Name()), DirectionName(spec.objective.direction));
  }
  return command + " --out " + ShellQuote(out);
}

}  // namespace dltune
