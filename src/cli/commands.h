// The dltune subcommands. Each Register* adds one command group to the app.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "dltune/core/training_settings.h"
#include "dltune/store/store.h"

namespace dltune::cli {

// `dltune space check` and `dltune space sample`.
void RegisterSpaceCommands(CLI::App& app);
// `dltune studies`, `dltune show` and `dltune export`.
void RegisterStoreCommands(CLI::App& app);
// `dltune copy`.
void RegisterCopyCommand(CLI::App& app);
// `dltune train`.
void RegisterTrainCommand(CLI::App& app);
// `dltune run`, `dltune worker` and `dltune run-trial`.
void RegisterRunCommands(CLI::App& app);
// `dltune report`.
void RegisterReportCommand(CLI::App& app);
// `dltune compare`.
void RegisterCompareCommand(CLI::App& app);
// `dltune serve`.
void RegisterServeCommand(CLI::App& app);
// `dltune doctor` and `dltune next`.
void RegisterDoctorCommand(CLI::App& app);
// `dltune plan retrain` and `dltune plan round2`.
void RegisterPlanCommand(CLI::App& app);
// `dltune note`, `decide`, `evaluate`, `launch` and `launches`.
void RegisterDecisionCommands(CLI::App& app);

// Shared by the commands.
// The command line as typed (set by main), recorded with new studies.
void SetCommandLine(int argc, char** argv);
const std::string& CommandLineText();
// The words after the program's name on the command line.
const std::vector<std::string>& CommandLineWords();
// The --storage option.
void AddStorageOption(CLI::App* command, std::string& storage);
// The --format option of a command that prints text for people: text, json or (`tabular`) csv.
void AddFormatOption(CLI::App* command, std::string& format, bool tabular);
// Writes the HTML report of `study` to `output` (default ./STUDY-report.html) and prints its path.
void PrintWrittenReport(Store& store, const std::string& study, const std::string& output, std::size_t top = 5);
// Option checks whose messages a person can read ("must be between 1 and 4096, not 0"), refusing what CLI11's
// number checks let through (nan, inf, -1 for an unsigned option).
CLI::Validator WholeNumberIn(long long min, long long max);
CLI::Validator FiniteNumberIn(double min, double max);
// The training settings as command-line options (`dltune train`): one per setting that has a flag
// (dltune/core/training_settings.h), checked as a spec's `training:` value is.
class TrainingSettingOptions {
 public:
  // The settings given, over the defaults.
  TrainingSettings Settings() const;

 private:
  friend void AddTrainingSettingOptions(CLI::App* command, TrainingSettingOptions& options);
  std::map<std::string, std::string> values_;  // by key
  std::map<std::string, bool> switches_;       // by key
  std::vector<std::pair<const TrainingSettingField*, CLI::Option*>> given_;
};
void AddTrainingSettingOptions(CLI::App* command, TrainingSettingOptions& options);

}  // namespace dltune::cli
