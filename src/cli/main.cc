// dltune: the command-line front end of libdltune.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "builtin/process_setup.h"
#include "commands.h"
#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/version.h"
#include "study/command_template.h"

namespace {

void PrintError(const std::string& message) {
  std::fprintf(stderr, "dltune: error: %s\n", dltune::TerminalSafe(message).c_str());
}

// Commands that dltune starts itself (trial-server, probe-speed, run-trial, run-fused): accepted, never listed.
bool Internal(const CLI::App* command) { return command->get_group().empty(); }

// A command's description up to its first clause, for a list of commands one line each: a command's own --help
// prints the whole of it.
std::string Summary(const std::string& description, std::size_t width) {
  std::size_t end = description.size();
  for (const char* stop : {". ", ": ", " — ", "; ", " (", "\n"}) end = std::min(end, description.find(stop));
  std::string summary = description.substr(0, end);
  if (summary.size() <= width) return summary;
  const std::size_t clause = summary.rfind(", ", width);
  if (clause != std::string::npos && clause > width / 2) return summary.substr(0, clause);
  const std::size_t word = summary.rfind(' ', width - 2);
  return summary.substr(0, word == std::string::npos ? width - 2 : word) + " …";
}

// Lists each command on one line: its name and the first clause of its description.
class OneLineFormatter : public CLI::Formatter {
 public:
  std::string make_subcommand(const CLI::App* command) const override {
    constexpr std::size_t kLineWidth = 100;
    const std::size_t name_width = std::max<std::size_t>(get_column_width(), command->get_name().size() + 3);
    return fmt::format("  {:<{}}{}\n", command->get_name(), name_width - 2,
                       Summary(command->get_description(), kLineWidth - name_width));
  }
};

// CLI11 reports a mistyped or missing command as "A subcommand is required"; name the word and the choices instead.
void CheckCommandWords(CLI::App& app, int argc, char** argv) {
  CLI::App* group = &app;
  std::string path = "dltune";
  for (int i = 1;; ++i) {
    const auto commands = group->get_subcommands([](CLI::App*) { return true; });
    if (commands.empty()) return;
    std::vector<std::string> names;
    names.reserve(commands.size());
    for (const CLI::App* command : commands) {
      if (!Internal(command)) names.push_back(command->get_name());
    }
    if (i >= argc || argv[i][0] == '-') {
      const bool help = i < argc && (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h" ||
                                     std::string(argv[i]) == "--version");
      if (help) return;
      throw dltune::Error(
          fmt::format("{} needs a command: {} (see {} --help)", path, dltune::JoinAlternatives(names, false), path));
    }
    const std::string word = argv[i];
    const bool known = std::any_of(commands.begin(), commands.end(),
                                   [&word](const CLI::App* command) { return command->get_name() == word; });
    if (!known) {
      throw dltune::Error(fmt::format("'{}' is not a command of {}{}; choose {}", word, path,
                                      dltune::DidYouMean(word, names), dltune::JoinAlternatives(names, false)));
    }
    group = group->get_subcommand(word);
    path += " " + word;
  }
}

// Everything a command printed reached standard output, or the command fails: a full disk under `dltune export >
// file` must not pass for a whole CSV. `status` is the command's own; a write error turns it into 74.
int CheckStandardOutput(int status) {
  std::cout.flush();
  errno = 0;
  const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) || std::cout.fail();
  if (!failed) return status;
  const int error = errno;
  std::fprintf(stderr, "dltune: error: cannot write standard output%s%s; what it holds is incomplete\n",
               error != 0 ? ": " : "", error != 0 ? std::strerror(error) : "");
  return status == 0 ? dltune::kExitIo : status;
}

}  // namespace

namespace dltune::cli {
namespace {
std::string command_line;
std::vector<std::string> command_words;
}  // namespace

void SetCommandLine(int argc, char** argv) {
  command_line = "dltune";
  command_words.assign(argv + 1, argv + argc);
  for (int i = 1; i < argc; ++i) command_line += " " + dltune::ShellQuote(argv[i]);
}

const std::string& CommandLineText() { return command_line; }

const std::vector<std::string>& CommandLineWords() { return command_words; }

}  // namespace dltune::cli

int main(int argc, char** argv) {
  dltune::SetUpProcess(argc, argv);  // first: it may restart the program, or be a trial server's trial
  CLI::App app{
      "dltune runs the Deep Learning Tuning Playbook end to end: studies with scientific, nuisance and fixed\n"
      "hyperparameters, quasi-random search, and the playbook's analyses.\n\n"
      "Example:\n  dltune space sample examples/quickstart.yaml -n 4",
      "dltune"};
  app.set_version_flag("--version", fmt::format("dltune {} ({})", dltune::kVersion,
                                                *dltune::kBuildCommit ? dltune::kBuildCommit : "unknown commit"));
  app.require_subcommand(1);
  app.formatter(std::make_shared<OneLineFormatter>());  // before the commands: they take their parent's formatter
  dltune::cli::RegisterSpaceCommands(app);
  dltune::cli::RegisterStoreCommands(app);
  dltune::cli::RegisterCopyCommand(app);
  dltune::cli::RegisterTrainCommand(app);
  dltune::cli::RegisterRunCommands(app);
  dltune::cli::RegisterDoctorCommand(app);
  dltune::cli::RegisterPlanCommand(app);
  dltune::cli::RegisterDecisionCommands(app);
  dltune::cli::RegisterServeCommand(app);
  dltune::cli::RegisterReportCommand(app);
  dltune::cli::RegisterCompareCommand(app);
  dltune::cli::SetCommandLine(argc, argv);

  try {
    CheckCommandWords(app, argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    // a command that reported its own outcome (e.g. train: 4 infeasible, 75 stopped)
    return CheckStandardOutput(e.get_exit_code());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return CheckStandardOutput(app.exit(e));  // --help, --version
    PrintError(fmt::format("{} (run with --help for usage)", e.what()));
    return dltune::kExitInvalidInput;
  } catch (const dltune::Error& e) {
    PrintError(e.what());
    return dltune::ExitStatusFor(e.kind());
  } catch (const std::exception& e) {
    PrintError(fmt::format("internal error, please report it: {}", e.what()));
    return dltune::kExitInternal;
  }
  return CheckStandardOutput(0);
}
