// dltune: the command-line front end of libdltune.
#include <malloc.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "commands.h"
#include "core/machine.h"
#include "core/strings.h"
#include "dltune/core/error.h"
#include "dltune/version.h"
#include "run/builtin_trial.h"
#include "run/trial_server.h"
#include "study/command_template.h"
#include "train/blas_kernels.h"

namespace {

constexpr int kUsageError = 2;      // a command line CLI11 refused (a dltune::Error exits with its kind's status)
constexpr int kInternalError = 70;  // a bug in dltune (EX_SOFTWARE)
constexpr int kIoError = 74;        // standard output could not be written (EX_IOERR)

void PrintError(const std::string& message) {
  std::fprintf(stderr, "dltune: error: %s\n", dltune::TerminalSafe(message).c_str());
}

// CLI11 reports a mistyped or missing command as "A subcommand is required"; name the word and the choices instead.
void CheckCommandWords(CLI::App& app, int argc, char** argv) {
  CLI::App* group = &app;
  std::string path = "dltune";
  for (int i = 1;; ++i) {
    const auto commands = group->get_subcommands([](CLI::App*) { return true; });
    if (commands.empty()) return;
    std::vector<std::string> names;
    names.reserve(commands.size());
    for (const CLI::App* command : commands) names.push_back(command->get_name());
    if (i >= argc || argv[i][0] == '-') {
      const bool help = i < argc && (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h" ||
                                     std::string(argv[i]) == "--version");
      if (help) return;
      throw dltune::Error(
          fmt::format("{} needs a command: {} (see {} --help)", path, dltune::JoinAlternatives(names, false), path));
    }
    const std::string word = argv[i];
    if (std::find(names.begin(), names.end(), word) == names.end()) {
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
  return status == 0 ? kIoError : status;
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

// `dltune trial-server` with its socket on descriptor 3, as a worker starts it: serves until the worker leaves (then
// exits), and returns true in each trial process it forks, with `argc`/`argv` now the trial's. False otherwise.
static bool ServeTrialsIfAsked(int& argc, char**& argv) {
  struct stat control {};
  if (argc != 2 || std::string(argv[1]) != "trial-server" || ::fstat(3, &control) != 0 || !S_ISSOCK(control.st_mode)) {
    return false;
  }
  dltune::ReexecWithFasterBlasKernels(argv);
  const auto trial = dltune::ServeTrials(3, dltune::PrepareBuiltinTrial);
  if (!trial) std::exit(0);
  static std::vector<std::string> words = trial->argv;
  static std::vector<char*> pointers;
  pointers.reserve(words.size() + 1);
  for (std::string& word : words) pointers.push_back(word.data());
  pointers.push_back(nullptr);
  argc = static_cast<int>(words.size());
  argv = pointers.data();
  return true;
}

// OpenMP threads that spin while they wait for work take the cores of every other process on a shared machine: two
// `dltune train --threads 2` at once ran 45x slower than one alone, a study of 16 workers 25x (docs/parallel-layout.md,
// "A shared machine"). dltune's processes and every trial it starts wait passively (OMP_WAIT_POLICY=PASSIVE: a
// waiting thread sleeps) unless the environment chose a policy. Returns true when it set it: OpenMP read the policy
// when it loaded, before main (libc resets an environment changed earlier), so a training command restarts once.
static bool WaitPassivelyUnlessChosen() {
  const auto wait = dltune::PassiveWaitEnvironment();
  if (!wait) return false;
  ::setenv(wait->first.c_str(), wait->second.c_str(), 1);
  return true;
}

// Whether the command line asks for one thread (`--threads 1`), whose OpenMP never waits for a team.
static bool OneThreadAsked(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--threads=1" || (word == "--threads" && i + 1 < argc && std::string(argv[i + 1]) == "1")) return true;
  }
  return false;
}

// Commands that train keep the memory they free: a training step frees and allocates the same large tensors again,
// and glibc's default hands such blocks back to the kernel to fault them in again on the next step (40% of a small
// MLP's step when it logs every step; docs/training.md, "Memory").
static void KeepFreedMemoryIfTraining(int argc, char** argv) {
  static const std::set<std::string> kTraining = {"train",        "run-trial", "probe-speed",
                                                  "trial-server", "launch",    "evaluate"};
  if (argc < 2 || !kTraining.count(argv[1])) return;
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest threshold glibc takes; fixing it stops its adjusting
  ::mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

int main(int argc, char** argv) {
  // A file past `ulimit -f` is a write error (EFBIG) to report, with the file left as it was, not a kill.
  ::signal(SIGXFSZ, SIG_IGN);
  const bool wait_policy_set = WaitPassivelyUnlessChosen();  // before any child process starts: they inherit it
  KeepFreedMemoryIfTraining(argc, argv);  // before the trial server forks: its trials inherit the settings
  ServeTrialsIfAsked(argc, argv);
  // Training commands restart once with faster OpenBLAS kernels when OpenBLAS misdetected the CPU (docs/training.md).
  // `launch` and `evaluate` evaluate with the same kernels as training did, so their numbers are training's.
  if (argc > 1 && (std::string(argv[1]) == "train" || std::string(argv[1]) == "run-trial" ||
                   std::string(argv[1]) == "probe-speed" || std::string(argv[1]) == "launch" ||
                   std::string(argv[1]) == "evaluate")) {
    dltune::ReexecWithFasterBlasKernels(argv);  // a restart carries the wait policy too
    // Restart once for OpenMP to read the policy (about 0.3 s: LibTorch loads again), unless one thread never waits.
    if (wait_policy_set && !OneThreadAsked(argc, argv)) ::execv("/proc/self/exe", argv);
  }
  CLI::App app{
      "dltune runs the Deep Learning Tuning Playbook end to end: studies with scientific, nuisance and fixed\n"
      "hyperparameters, quasi-random search, and the playbook's analyses.\n\n"
      "Example:\n  dltune space sample examples/quickstart.yaml -n 4",
      "dltune"};
  app.set_version_flag("--version", fmt::format("dltune {} ({})", dltune::kVersion,
                                                *dltune::kBuildCommit ? dltune::kBuildCommit : "unknown commit"));
  app.require_subcommand(1);
  dltune::cli::RegisterSpaceCommands(app);
  dltune::cli::RegisterStoreCommands(app);
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
    // a command that reported its own outcome (e.g. train: 3 infeasible, 75 stopped)
    return CheckStandardOutput(e.get_exit_code());
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return CheckStandardOutput(app.exit(e));  // --help, --version
    PrintError(fmt::format("{} (run with --help for usage)", e.what()));
    return kUsageError;
  } catch (const dltune::Error& e) {
    PrintError(e.what());
    return dltune::ExitStatusFor(e.kind());
  } catch (const std::exception& e) {
    PrintError(fmt::format("internal error, please report it: {}", e.what()));
    return kInternalError;
  }
  return CheckStandardOutput(0);
}
