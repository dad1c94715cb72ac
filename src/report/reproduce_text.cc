#include "report/reproduce_text.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/reproduction.h"
#include "core/strings.h"
#include "dltune/study/study_spec.h"
#include "space/yaml_node.h"
#include "space/yaml_writer.h"
#include "store/trial_resources.h"

namespace dltune {
namespace {

using nlohmann::json;

constexpr char kSpecEnd[] = "DLTUNE_SPEC_END";

std::string Text(const json& object, const char* key) {
  const auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : "";
}

json RuntimeJson(const TrialRecord& trial) {
  json runtime = json::object();
  for (const auto& [name, version] : RuntimeOf(trial.resources)) runtime[name] = version;
  return runtime;
}

// "libtorch 1.13, blas OpenBLAS 0.3.21 ..." of a JSON object of versions by name.
std::string VersionsText(const json& versions) {
  std::string text;
  for (const auto& [name, value] : versions.items()) {
    if (!value.is_string()) continue;
    text += fmt::format("{}{} {}", text.empty() ? "" : ", ", name, value.get<std::string>());
  }
  return text;
}

// The machine's lines: OS, CPU, GPUs and driver.
std::string MachineText(const json& record) {
  std::string text = Text(record, "os");
  if (const std::string cpu = Text(record, "cpu"); !cpu.empty()) text += (text.empty() ? "CPU " : "; CPU ") + cpu;
  if (record.contains("gpus") && record["gpus"].is_array() && !record["gpus"].empty()) {
    std::vector<std::string> models;
    for (const json& model : record["gpus"]) models.push_back(model.is_string() ? model.get<std::string>() : "?");
    text += fmt::format("; GPUs {}", fmt::join(models, ", "));
    if (const std::string driver = Text(record, "driver"); !driver.empty()) text += ", driver " + driver;
  }
  return text;
}

std::string DltuneText(const json& record) {
  if (!record.contains("dltune") || !record["dltune"].is_object()) return "";
  return fmt::format("{} ({})", Text(record["dltune"], "version"), Text(record["dltune"], "build"));
}

// What the record says of the patch, for people: "1.2 KiB, stored", or why none is.
std::string PatchText(const StudyRecord& study, const json& patch) {
  if (!study.git_dirty.value_or(false)) return "";
  if (!patch.is_object()) return "uncommitted changes not recorded (the study was created before dltune kept them)";
  if (!patch.contains("bytes")) return Text(patch, "note");
  const std::size_t bytes = patch.value("bytes", std::size_t{0});
  if (!patch.value("stored", false))
    return fmt::format("{}: not stored ({})", ByteSizeText(bytes), Text(patch, "note"));
  return fmt::format("{}, SHA-256 {} (dltune show {} --patch)", ByteSizeText(bytes),
                     Text(patch, "sha256").substr(0, 12), study.name);
}

struct Script {
  std::string text;
  std::vector<std::string> commands;

  void Comment(const std::string& line) { text += "# " + line + "\n"; }
  void Command(const std::string& line) {
    text += line + "\n";
    commands.push_back(line);
  }
  void Blank() { text += "\n"; }
};

Script MakeScript(const StudyRecord& study, const std::optional<TrialRecord>& trial, const std::string& store_url) {
  const json record = ParseRecord(study.reproduction);
  const json git = record.value("git", json::object());
  const std::string storage = "--storage " + ShellQuote(store_url);
  const std::string name = ShellQuote(study.name);
  Script script;
  script.Comment(trial ? fmt::format("Reproducing trial {} of study {}", trial->number, study.name)
                       : fmt::format("Reproducing study {}", study.name));
  if (record.empty()) {
    script.Comment("(created by dltune " + study.dltune_version +
                   ", before dltune kept a reproduction record: only its commit and spec are known)");
  }
  script.Blank();

  if (study.git_commit.empty()) {
    script.Comment("1. The code: the study was not created in a git checkout; nothing of its code was recorded.");
  } else {
    const std::string remote = Text(git, "remote");
    script.Comment(fmt::format("1. The code: commit {}{}", study.git_commit, remote.empty() ? "" : " of " + remote));
    if (remote.empty()) {
      script.Comment("in a clone of the repository the study was created in:");
    } else {
      script.Command(fmt::format("git clone {} {}-reproduced && cd {}-reproduced", ShellQuote(remote),
                                 ShellQuote(study.name), ShellQuote(study.name)));
    }
    script.Command("git checkout " + study.git_commit);
    const json patch = git.value("patch", json());
    if (study.git_dirty.value_or(false) && patch.is_object() && patch.value("stored", false)) {
      script.Comment("with the uncommitted changes it ran with: " + PatchText(study, patch));
      script.Command(fmt::format("dltune show {} --patch {} > study.patch && git apply study.patch", name, storage));
    } else if (const std::string why = PatchText(study, patch); !why.empty()) {
      script.Comment("it had uncommitted changes: " + why);
    }
    if (const std::string prefix = Text(git, "prefix"); !prefix.empty()) script.Command("cd " + ShellQuote(prefix));
    if (git.contains("untracked") && git["untracked"].is_array() && !git["untracked"].empty()) {
      std::vector<std::string> files;
      for (const json& file : git["untracked"]) files.push_back(file.is_string() ? file.get<std::string>() : "?");
      script.Comment(
          fmt::format("untracked files then, in no commit or patch (bring them if the program reads them): "
                      "{}{}",
                      fmt::join(files, ", "), git.contains("untracked_more") ? ", ..." : ""));
    }
  }
  script.Blank();

  script.Comment("2. The versions that decided the numbers (install the same):");
  if (const std::string dltune = DltuneText(record); !dltune.empty()) {
    script.Comment("  dltune " + dltune);
  } else {
    script.Comment("  dltune " + study.dltune_version);
  }
  if (const std::string libraries = VersionsText(record.value("libraries", json::object())); !libraries.empty()) {
    script.Comment("  " + libraries);
  }
  if (const std::string machine = MachineText(record); !machine.empty()) script.Comment("  " + machine);
  if (trial) {
    const json runtime = RuntimeJson(*trial);
    if (!runtime.empty()) script.Comment(fmt::format("  trial {}'s runtime: {}", trial->number, VersionsText(runtime)));
    for (const std::string& difference : RuntimeDifferences(record, runtime)) {
      script.Comment("  trial's runtime differs from the study's record: " + difference);
    }
  }
  script.Blank();

  const json environment = record.value("environment", json::object());
  script.Comment("3. The environment variables that chose kernels, threads and devices, as they were:");
  if (environment.empty()) script.Comment(record.empty() ? "  not recorded" : "  none was set");
  for (const auto& [variable, value] : environment.items()) {
    if (value.is_string()) script.Command(fmt::format("export {}={}", variable, ShellQuote(value.get<std::string>())));
  }
  script.Blank();

  if (!trial) {
    script.Comment("4. The study again, in a store of its own: the same spec makes the same trials, params and seeds.");
    script.Command(fmt::format("dltune show {} --spec {} > spec.yaml", name, storage));
    script.Command("dltune run spec.yaml --storage \"sqlite:///$PWD/reproduced.db\"");
    if (!study.command_line.empty()) script.Comment("it was created by: " + study.command_line);
    return script;
  }
  const std::string rerun = RerunStudyName(study, *trial);
  script.Comment(fmt::format("4. Trial {} alone, with its params and its seed {}, as study {} in the same store:",
                             trial->number, trial->seed, rerun));
  std::string spec = RerunSpec(study, *trial);
  const std::string file = ShellQuote(rerun + ".yaml");
  script.Command(fmt::format("cat > {} <<'{}'\n{}{}", file, kSpecEnd, spec, kSpecEnd));
  script.Command(fmt::format("dltune run {} {}", file, storage));
  script.Comment(fmt::format("then compare its trial 0 with trial {}: dltune show {} 0 and dltune show {} {}",
                             trial->number, rerun, study.name, trial->number));
  return script;
}

}  // namespace

std::string RerunStudyName(const StudyRecord& study, const TrialRecord& trial) {
  return fmt::format("{}-rerun-{}", study.name, trial.number);
}

std::string RerunSpec(const StudyRecord& study, const TrialRecord& trial) {
  const std::string file = study.spec_path.empty() ? study.name + ".yaml" : study.spec_path;
  const StudySpec spec = ParseStudySpec(study.spec_text, file);
  YamlTree tree = YamlTree::From(YamlNode::Parse(study.spec_text, file));
  tree.comment = fmt::format(
      "Trial {} of study {} alone: its configuration, trained once with its seed (dltune show {} {} --reproduce).",
      trial.number, study.name, study.name, trial.number);
  tree.Set("name", YamlTree::Of(RerunStudyName(study, trial)));
  tree.Erase("trials");
  tree.Erase("replicas");
  // One configuration, not one per scientific value: the trial's own scientific values are in it.
  if (spec.space->params().end() != std::find_if(spec.space->params().begin(), spec.space->params().end(),
                                                 [](const Param& p) { return p.role == Role::kScientific; })) {
    tree.Set("scientific_mode", YamlTree::Of(std::string("joint")));
  }
  YamlTree config = YamlTree::Map(/*flow=*/true);
  for (const Param& param : spec.space->params()) {
    const auto it = trial.params.find(param.id);
    if (it != trial.params.end() && param.Varies()) config.Set(param.id, YamlTree::Of(it->second));
  }
  YamlTree configs = YamlTree::Sequence();
  configs.Append(config);
  YamlTree sampler = YamlTree::Map();
  sampler.Set("name", YamlTree::Of(std::string("list")));
  sampler.Set("configs", configs);
  tree.Set("sampler", sampler);
  YamlTree procedure = YamlTree::Map();
  procedure.Set("kind", YamlTree::Of(std::string("retrain")));
  procedure.Set("parent", YamlTree::Of(study.name));
  YamlTree from = YamlTree::Sequence();
  YamlTree entry = YamlTree::Map(/*flow=*/true);
  entry.Set("trial", YamlTree::Of(static_cast<std::int64_t>(trial.number)));
  entry.Set("seed", YamlTree::Of(static_cast<std::int64_t>(trial.seed)));
  from.Append(entry);
  procedure.Set("from_trials", from);
  tree.Set("procedure", procedure);
  return ToYamlText(tree);
}

nlohmann::json ReproduceJson(const StudyRecord& study, const std::optional<TrialRecord>& trial,
                             const std::string& store_url) {
  const json record = ParseRecord(study.reproduction);
  const Script script = MakeScript(study, trial, store_url);
  json out = {{"study", study.name},
              {"trial", trial ? json(trial->number) : json()},
              {"git_commit", study.git_commit},
              {"git_dirty", study.git_dirty ? json(*study.git_dirty) : json()},
              {"record", record},
              {"commands", script.commands}};
  if (trial) {
    const json runtime = RuntimeJson(*trial);
    out["seed"] = trial->seed;
    out["runtime"] = runtime;
    out["runtime_differences"] = RuntimeDifferences(record, runtime);
    out["rerun_study"] = RerunStudyName(study, *trial);
    out["rerun_spec"] = RerunSpec(study, *trial);
  }
  return out;
}

std::string ReproduceText(const StudyRecord& study, const std::optional<TrialRecord>& trial,
                          const std::string& store_url) {
  return TerminalSafe(MakeScript(study, trial, store_url).text);
}

std::vector<std::pair<std::string, std::string>> ReproductionFacts(const StudyRecord& study) {
  std::vector<std::pair<std::string, std::string>> facts;
  const json record = ParseRecord(study.reproduction);
  if (record.empty()) return facts;
  const json git = record.value("git", json::object());
  if (const std::string patch = PatchText(study, git.value("patch", json())); !patch.empty()) {
    facts.emplace_back("uncommitted patch", patch);
  }
  std::string versions = "dltune " + DltuneText(record);
  if (const std::string libraries = VersionsText(record.value("libraries", json::object())); !libraries.empty()) {
    versions += ", " + libraries;
  }
  facts.emplace_back("versions", versions);
  if (const std::string machine = MachineText(record); !machine.empty()) facts.emplace_back("machine", machine);
  std::vector<std::string> variables;
  const json environment = record.value("environment", json::object());
  for (const auto& [variable, value] : environment.items()) {
    variables.push_back(variable + "=" + (value.is_string() ? value.get<std::string>() : value.dump()));
  }
  facts.emplace_back("environment", variables.empty() ? "none of the kernel variables set"
                                                      : fmt::format("{}", fmt::join(variables, " ")));
  return facts;
}

std::vector<std::pair<std::string, std::string>> TrialRuntimeFacts(const StudyRecord& study, const TrialRecord& trial) {
  std::vector<std::pair<std::string, std::string>> facts;
  const json runtime = RuntimeJson(trial);
  if (runtime.empty()) return facts;
  facts.emplace_back("runtime", VersionsText(runtime));
  const std::vector<std::string> differences = RuntimeDifferences(ParseRecord(study.reproduction), runtime);
  if (!differences.empty()) facts.emplace_back("runtime differs", fmt::format("{}", fmt::join(differences, "; ")));
  return facts;
}

std::string TrialRuntimesText(const std::vector<TrialRecord>& trials) {
  std::map<std::map<std::string, std::string>, std::vector<std::uint64_t>> groups;
  for (const TrialRecord& trial : trials) {
    std::map<std::string, std::string> runtime = RuntimeOf(trial.resources);
    if (!runtime.empty()) groups[std::move(runtime)].push_back(trial.number);
  }
  if (groups.empty()) return "";
  const auto versions = [](const std::map<std::string, std::string>& runtime) {
    std::string text;
    for (const auto& [name, version] : runtime) text += fmt::format("{}{} {}", text.empty() ? "" : ", ", name, version);
    return text;
  };
  if (groups.size() == 1) {
    return fmt::format("{} (every trial that sent one: {})", versions(groups.begin()->first),
                       groups.begin()->second.size());
  }
  constexpr std::size_t kListed = 8;
  std::vector<std::string> parts;
  for (const auto& [runtime, numbers] : groups) {
    std::vector<std::uint64_t> listed(numbers.begin(), numbers.begin() + std::min(numbers.size(), kListed));
    parts.push_back(fmt::format("{} (trial{} {}{})", versions(runtime), numbers.size() == 1 ? "" : "s",
                                fmt::join(listed, ", "),
                                numbers.size() > kListed ? fmt::format(" and {} more", numbers.size() - kListed) : ""));
  }
  return fmt::format("{} differ: {}", groups.size(), fmt::join(parts, "; "));
}

}  // namespace dltune
