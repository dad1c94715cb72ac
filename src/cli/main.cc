// dltune: the command-line front end of libdltune.
#include <cstdio>
#include <exception>
#include <string>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "commands.h"
#include "dltune/core/error.h"
#include "dltune/version.h"

namespace {

constexpr int kUsageError = 2;     // the user's mistake: a bad spec, option or file
constexpr int kInternalError = 70;  // a bug in dltune (EX_SOFTWARE)

void PrintError(const std::string& message) { std::fprintf(stderr, "dltune: error: %s\n", message.c_str()); }

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "dltune runs the Deep Learning Tuning Playbook end to end: studies with scientific, nuisance and fixed\n"
      "hyperparameters, quasi-random search, and the playbook's analyses.\n\n"
      "Example:\n  dltune space sample examples/quickstart.yaml -n 4",
      "dltune"};
  app.set_version_flag("--version", fmt::format("dltune {} ({})", dltune::kVersion,
                                                 *dltune::kBuildCommit ? dltune::kBuildCommit : "unknown commit"));
  app.require_subcommand(1);
  dltune::cli::RegisterSpaceCommands(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    PrintError(fmt::format("{} (run with --help for usage)", e.what()));
    return kUsageError;
  } catch (const dltune::Error& e) {
    PrintError(e.what());
    return kUsageError;
  } catch (const std::exception& e) {
    PrintError(fmt::format("internal error, please report it: {}", e.what()));
    return kInternalError;
  }
  return 0;
}
