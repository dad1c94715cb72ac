#include "run/worker_gang.h"

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/machine.h"
#include "dltune/core/error.h"
#include "train/rendezvous_store.h"
#include "trial/trial_gang.h"

namespace dltune {
namespace {

// The files a trial's process reads at start, which a machine that does not share the trial's directory lacks.
constexpr const char* kTrialFiles[] = {"trial.json", "params.json"};

}  // namespace

WorkerGang WorkerGangFromEnvironment(double timeout_seconds) {
  WorkerGang gang;
  gang.timeout_seconds = timeout_seconds;
  const std::optional<LauncherTask> task = LauncherTaskFromEnvironment();
  if (!task || task->size <= 1) return gang;
  const char* address = std::getenv("MASTER_ADDR");
  const std::optional<int> port = WholeNumberVariable("MASTER_PORT");
  if (address == nullptr || *address == '\0' || !port) {
    throw Error(fmt::format(
        "this worker is task {} of {} of a launcher's job, which makes the job's workers one gang: set MASTER_ADDR to "
        "the first task's host and MASTER_PORT to a free port there (examples/slurm/ shows how)",
        task->rank, task->size));
  }
  gang.rank = task->rank;
  gang.size = task->size;
  gang.address = address;
  gang.port = *port;
  return gang;
}

GangLeader::GangLeader(const WorkerGang& gang)
    : gang_(gang),
      store_(std::make_unique<RendezvousStore>(gang.address, gang.port, /*serve=*/true, gang.timeout_seconds)) {}

GangLeader::~GangLeader() {
  try {
    store_->Set("done", std::to_string(trials_));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (store_->Add("left", 0) < gang_.size - 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const Error&) {
    // The others find the store gone, and leave.
  }
}

TrialCommand GangLeader::Publish(const TrialCommand& command, const std::filesystem::path& trial_dir) {
  const int port = FreePort();  // on rank 0's machine, where rank 0 of the trial serves its store
  nlohmann::json files = nlohmann::json::object();
  for (const char* name : kTrialFiles) {
    if (std::filesystem::exists(trial_dir / name)) files[name] = ReadWholeFile(trial_dir / name);
  }
  const nlohmann::json trial = {{"argv", command.argv},
                                {"shell_command", command.shell_command},
                                {"environment", command.environment},
                                {"working_dir", command.working_dir.string()},
                                {"trial_dir", trial_dir.string()},
                                {"built_in", command.warm_start},
                                {"files", files},
                                {"master_port", port}};
  store_->Set(fmt::format("trial/{}", ++trials_), trial.dump());
  TrialCommand rank0 = command;
  for (auto& [key, value] : RendezvousVariables({0, gang_.size}, gang_.address, port)) rank0.environment[key] = value;
  return rank0;
}

namespace {

// Starts this worker's rank of a published trial.
std::unique_ptr<TrialProcess> StartRank(const WorkerGang& gang, const nlohmann::json& trial) {
  const std::filesystem::path trial_dir = trial.at("trial_dir").get<std::string>();
  std::filesystem::create_directories(trial_dir);
  for (const auto& [name, content] : trial.at("files").items()) {
    const std::filesystem::path path = trial_dir / name;
    if (!std::filesystem::exists(path) || ReadWholeFile(path) != content.get<std::string>()) {
      WriteFileAtomically(path, content.get<std::string>());
    }
  }
  TrialCommand command;
  command.argv = trial.at("argv").get<std::vector<std::string>>();
  // A built-in trial runs this machine's dltune, wherever rank 0's is.
  if (trial.at("built_in").get<bool>() && !command.argv.empty()) command.argv[0] = SelfExecutable().string();
  command.shell_command = trial.at("shell_command").get<std::string>();
  command.environment = trial.at("environment").get<std::map<std::string, std::string>>();
  for (auto& [key, value] :
       RendezvousVariables({gang.rank, gang.size}, gang.address, trial.at("master_port").get<int>())) {
    command.environment[key] = value;
  }
  command.working_dir = trial.at("working_dir").get<std::string>();
  command.stdout_path = command.stderr_path = trial_dir / fmt::format("rank_{}.log", gang.rank);
  return std::make_unique<TrialProcess>(command);
}

}  // namespace

int RunGangMember(const WorkerGang& gang, const std::atomic<int>& stop_requests,
                  const std::function<void(const std::string&)>& notice) {
  BecomeSubreaper();
  RendezvousStore store(gang.address, gang.port, /*serve=*/false, gang.timeout_seconds);
  notice(fmt::format("rank {} of {}: joined the gang at {}:{}; running the ranks of the trials rank 0 starts",
                     gang.rank, gang.size, gang.address, gang.port));
  std::unique_ptr<TrialProcess> running;
  int next = 1;
  int signalled = 0;   // the stop requests passed on to the running rank
  std::string number;  // the running rank's trial number
  std::string drained;
  while (true) {
    if (running) {
      while (running->report_fd() >= 0 && running->ReadReport(drained) && !drained.empty()) drained.clear();
      if (const auto status = running->TryWait()) {
        notice(fmt::format("rank {} of trial {} ended with {}", gang.rank, number, status->Describe()));
        running.reset();
      }
    }
    const int stops = stop_requests.load();
    if (stops > signalled && running) running->Signal(stops >= 2 ? SIGKILL : SIGTERM);
    signalled = stops;
    if (stops > 0 && !running) break;
    if (const auto published = store.TryGet(fmt::format("trial/{}", next)); published && stops == 0) {
      if (running) {
        notice(fmt::format("rank {} of trial {} still runs as rank 0 starts the next: ended", gang.rank, number));
        running.reset();  // kills it
      }
      const nlohmann::json trial = nlohmann::json::parse(*published);
      running = StartRank(gang, trial);
      number = trial.at("environment").value("DLTUNE_TRIAL_NUMBER", std::to_string(next));
      notice(fmt::format("rank {} of trial {} started in {}", gang.rank, number,
                         trial.at("trial_dir").get<std::string>()));
      ++next;
    } else if (!running && store.TryGet("done")) {
      break;
    }
    ReapOrphans();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  store.Add("left", 1);
  return 0;
}

}  // namespace dltune
