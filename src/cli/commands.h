// The dltune subcommands. Each Register* adds one command group to the app.
#pragma once

#include <CLI/CLI.hpp>

namespace dltune::cli {

// `dltune space check` and `dltune space sample`.
void RegisterSpaceCommands(CLI::App& app);
// `dltune studies`, `dltune show` and `dltune export`.
void RegisterStoreCommands(CLI::App& app);
// `dltune train`.
void RegisterTrainCommand(CLI::App& app);

}  // namespace dltune::cli
