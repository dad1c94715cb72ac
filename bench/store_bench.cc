// Experiment-store throughput under concurrent processes, on SQLite and PostgreSQL, side by side with Optuna 3.1's
// RDB storage on SQLite.
//
// One invocation runs every scenario and prints a table (figure, target, met) and summary lines with ratios:
//   1. Store::Record rows/s in one process, batches of 1000 training measurements with every field set (SQLite);
//   2. the same aggregated over 8 writer processes on one SQLite file, each writing its own trial;
//   3. ClaimNext + Finish claims/s of 8 worker processes draining a 2000-trial study, on PostgreSQL and on SQLite;
//   4. 1000 one-float-param trials created, then claimed, recorded (one eval row with the objective) and finished
//      one after another in one process, against Optuna (bench/peers/optuna_store.py: create_study on an SQLite
//      storage + study.optimize of a trivial objective with RandomSampler, INFO log silenced).
// Writer and worker processes are this binary re-executed with the hidden first argument --child. PostgreSQL is a
// throw-away server from scripts/pg-test-server. All files go to a fresh directory under $TMPDIR (default /tmp),
// removed at the end; both stores of scenario 4 live there, so they share one filesystem (printed).
// Exits 1 if a target is missed, a scenario fails or the peer cannot run. The peer's interpreter is $DLTUNE_PYTHON,
// else /usr/bin/python3 (Debian's python3-optuna is importable only there), else python3 on PATH.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/files.h"
#include "dltune/store/store.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kProcesses = 8;
constexpr std::int64_t kBatchRows = 1000;
constexpr std::int64_t kSingleWriterRows = 400'000;
constexpr std::int64_t kRowsPerWriter = 50'000;  // 8 writers: 400,000 rows in all
constexpr int kDrainTrials = 2000;
constexpr int kPeerTrials = 1000;
constexpr double kWorkSeconds = 20;        // a writer or worker stops after this long and reports what it did
constexpr double kChildGraceSeconds = 60;  // children still running this long after kWorkSeconds are killed
constexpr double kTargetRowsPerSecond = 50'000;
constexpr double kTargetClaimsPerSecond = 500;
constexpr double kTargetPeerRatio = 1.0;  // dltune at least as fast as Optuna
constexpr char kChildFlag[] = "--child";
constexpr char kInsertScenario[] = "measurement inserts (Record, 1000 rows/call)";
constexpr char kClaimScenario[] = "claims (ClaimNext + Finish), 2000 trials";
constexpr char kPeerScenario[] = "1000 trials: create, claim, record, finish";

// The signal (SIGINT, SIGTERM, SIGHUP) that asked us to stop, or 0: scenarios then end early and clean up.
volatile std::sig_atomic_t received_signal = 0;

extern "C" void OnSignal(int signal_number) { received_signal = signal_number; }

// Handlers, not SIG_IGN: exec resets them, so children and the peer still die of a Ctrl-C as usual.
void InstallSignalHandlers() {
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  for (const int signal_number : {SIGINT, SIGTERM, SIGHUP}) sigaction(signal_number, &action, nullptr);
}

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

double SecondsSince(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// A study row with only what the store requires.
dltune::NewStudy BenchStudy(const std::string& name) {
  dltune::NewStudy study;
  study.name = name;
  study.description = "dltune_bench_store";
  study.spec_text = "name: " + name + "\n";
  study.command_line = "dltune_bench_store";
  study.dltune_version = "bench";
  return study;
}

// `count` pending trials numbered from 0, each with one float param x in [0, 1).
std::vector<dltune::NewTrial> BenchTrials(int count) {
  std::vector<dltune::NewTrial> trials;
  trials.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    dltune::NewTrial trial;
    trial.number = static_cast<std::uint64_t>(i);
    trial.params["x"] = std::fmod(0.6180339887498949 * (i + 1), 1.0);
    trial.seed = static_cast<std::uint64_t>(i);
    trials.push_back(std::move(trial));
  }
  return trials;
}

// `rows` training measurements from `first_step` with every field set, and the best so far.
dltune::MeasurementBatch TrainBatch(std::int64_t first_step, std::int64_t rows) {
  dltune::MeasurementBatch batch;
  batch.train.reserve(static_cast<std::size_t>(rows));
  for (std::int64_t step = first_step; step < first_step + rows; ++step) {
    const double s = static_cast<double>(step);
    dltune::TrainMeasurement m;
    m.step = step;
    m.loss = 2.0 / (1.0 + 0.001 * s);
    m.learning_rate = 0.1 / (1.0 + 1e-5 * s);
    m.grad_norm = 1.0 + 0.5 / (1.0 + s);
    m.clipped = step % 7 == 0;
    m.step_time = 0.0123;
    m.data_wait = 0.0004;
    m.examples_per_second = 10'400.0;
    batch.train.push_back(m);
  }
  batch.best_step = first_step + rows - 1;
  batch.best_value = *batch.train.back().loss;
  return batch;
}

// ---- child processes ----------------------------------------------------------------------------------------

// Blocks until the parent closes our stdin: the start signal shared by all children.
void WaitForGo() {
  char byte = 0;
  while (true) {
    const ssize_t got = read(STDIN_FILENO, &byte, 1);
    if (got == 0 || (got < 0 && errno != EINTR)) return;
  }
}

// --child insert URL STUDY WORKER ROWS: claims one trial, then records ROWS rows in batches of kBatchRows.
int ChildInsert(const std::string& url, const std::string& study_name, const std::string& worker, std::int64_t rows) {
  auto store = dltune::OpenStore(url);
  const auto study = store->FindStudy(study_name);
  if (!study) throw dltune::Error("no study " + study_name);
  const auto claim = store->ClaimNext(study->id, worker);
  if (!claim) throw dltune::Error("no pending trial left for writer " + worker);
  std::printf("ready\n");
  std::fflush(stdout);
  WaitForGo();
  const auto start = Clock::now();
  const std::int64_t start_ns = NowNs();
  std::int64_t written = 0;
  while (written < rows && SecondsSince(start) < kWorkSeconds) {
    const std::int64_t n = std::min(kBatchRows, rows - written);
    store->Record(claim->second, TrainBatch(written + 1, n));
    written += n;
  }
  const std::int64_t end_ns = NowNs();
  std::printf("done count=%" PRId64 " start=%" PRId64 " end=%" PRId64 " trial=%" PRId64 "\n", written, start_ns, end_ns,
              claim->second.trial_id);
  return 0;
}

// --child drain URL STUDY WORKER: claims and finishes trials until none is pending; lists the numbers it got.
int ChildDrain(const std::string& url, const std::string& study_name, const std::string& worker) {
  auto store = dltune::OpenStore(url);
  const auto study = store->FindStudy(study_name);
  if (!study) throw dltune::Error("no study " + study_name);
  std::printf("ready\n");
  std::fflush(stdout);
  WaitForGo();
  const auto start = Clock::now();
  const std::int64_t start_ns = NowNs();
  std::vector<std::uint64_t> numbers;
  while (SecondsSince(start) < kWorkSeconds) {
    const auto claim = store->ClaimNext(study->id, worker);
    if (!claim) break;
    numbers.push_back(claim->first.number);
    store->Finish(claim->second, {dltune::TrialState::kCompleted, "", 0.5, std::nullopt, ""});
  }
  const std::int64_t end_ns = NowNs();
  std::printf("done count=%zu start=%" PRId64 " end=%" PRId64 " trial=0\nnumbers", numbers.size(), start_ns, end_ns);
  for (const std::uint64_t number : numbers) std::printf(" %" PRIu64, number);
  std::printf("\n");
  return 0;
}

int ChildMain(int argc, char** argv) {
  const std::string mode = argc > 2 ? argv[2] : "";
  try {
    if (mode == "insert" && argc == 7) return ChildInsert(argv[3], argv[4], argv[5], std::stoll(argv[6]));
    if (mode == "drain" && argc == 6) return ChildDrain(argv[3], argv[4], argv[5]);
    std::fprintf(stderr, "store bench: bad child arguments\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store bench: child %s %s: %s\n", mode.c_str(), argc > 5 ? argv[5] : "", e.what());
    return 1;
  }
}

// ---- parent side of child processes -----------------------------------------------------------------------

struct ChildResult {
  std::int64_t count = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
  std::int64_t trial_id = 0;
  std::vector<std::uint64_t> numbers;  // drain: the trial numbers this child claimed
};

struct Child {
  pid_t pid = -1;
  int to_child = -1;    // its stdin; closing it is the start signal
  int from_child = -1;  // its stdout
  std::string pending;  // bytes read but not yet consumed as lines
  bool eof = false;
};

// Starts this binary as a child with `args` after --child.
Child SpawnChild(const std::vector<std::string>& args) {
  int in_pipe[2];
  int out_pipe[2];
  if (pipe2(in_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    close(in_pipe[0]);
    close(in_pipe[1]);
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  std::vector<std::string> argv_strings{"dltune_bench_store", kChildFlag};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> child_argv;
  child_argv.reserve(argv_strings.size() + 1);
  for (auto& arg : argv_strings) child_argv.push_back(arg.data());
  child_argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(in_pipe[0], STDIN_FILENO);
    dup2(out_pipe[1], STDOUT_FILENO);
    execv("/proc/self/exe", child_argv.data());
    _exit(127);
  }
  close(in_pipe[0]);
  close(out_pipe[1]);
  return Child{pid, in_pipe[1], out_pipe[0], {}, false};
}

// The next line from the child, or nullopt at its end of output; throws past `deadline`.
std::optional<std::string> ReadLine(Child& child, Clock::time_point deadline) {
  while (true) {
    if (const std::size_t newline = child.pending.find('\n'); newline != std::string::npos) {
      std::string line = child.pending.substr(0, newline);
      child.pending.erase(0, newline + 1);
      return line;
    }
    if (child.eof) {
      if (child.pending.empty()) return std::nullopt;
      return std::exchange(child.pending, {});
    }
    if (received_signal != 0) throw std::runtime_error("interrupted by signal " + std::to_string(received_signal));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) throw std::runtime_error("timed out waiting for a child process");
    pollfd fd{child.from_child, POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(std::min<std::int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    char buffer[65536];
    const ssize_t got = read(child.from_child, buffer, sizeof buffer);
    if (got < 0 && errno != EINTR) throw std::runtime_error(std::string("read: ") + std::strerror(errno));
    if (got == 0) child.eof = true;
    if (got > 0) child.pending.append(buffer, static_cast<std::size_t>(got));
  }
}

// Runs one child per argument list: all get ready (open the store, claim), start together, and report.
// Children are always reaped; on a timeout or failure they are killed (by pid) and this throws.
std::vector<ChildResult> RunChildren(const std::vector<std::vector<std::string>>& child_args) {
  std::vector<Child> children;
  const auto kill_all = [&] {
    for (Child& child : children) {
      if (child.pid > 0) kill(child.pid, SIGKILL);
    }
  };
  const auto reap_all = [&]() -> std::string {
    std::string failures;
    for (Child& child : children) {
      if (child.to_child >= 0) close(child.to_child);
      if (child.from_child >= 0) close(child.from_child);
      child.to_child = child.from_child = -1;
      if (child.pid <= 0) continue;
      int status = 0;
      while (waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        failures += " pid " + std::to_string(child.pid) +
                    (WIFEXITED(status) ? " exit " + std::to_string(WEXITSTATUS(status))
                                       : " signal " + std::to_string(WTERMSIG(status)));
      }
      child.pid = -1;
    }
    return failures;
  };
  std::vector<ChildResult> results(child_args.size());
  try {
    for (const auto& args : child_args) children.push_back(SpawnChild(args));
    const auto ready_deadline = Clock::now() + std::chrono::duration<double>(kChildGraceSeconds);
    for (Child& child : children) {
      const auto line = ReadLine(child, std::chrono::time_point_cast<Clock::duration>(ready_deadline));
      if (!line || *line != "ready") throw std::runtime_error("a child process failed before starting");
    }
    for (Child& child : children) {
      close(child.to_child);
      child.to_child = -1;
    }
    const auto deadline = std::chrono::time_point_cast<Clock::duration>(
        Clock::now() + std::chrono::duration<double>(kWorkSeconds + kChildGraceSeconds));
    for (std::size_t i = 0; i < children.size(); ++i) {
      ChildResult& result = results[i];
      bool done = false;
      while (const auto line = ReadLine(children[i], deadline)) {
        if (std::sscanf(line->c_str(), "done count=%" SCNd64 " start=%" SCNd64 " end=%" SCNd64 " trial=%" SCNd64,
                        &result.count, &result.start_ns, &result.end_ns, &result.trial_id) == 4) {
          done = true;
        } else if (line->starts_with("numbers")) {
          std::istringstream numbers(line->substr(7));
          for (std::uint64_t number = 0; numbers >> number;) result.numbers.push_back(number);
        }
      }
      if (!done) throw std::runtime_error("a child process ended without reporting");
    }
  } catch (...) {
    kill_all();
    reap_all();
    throw;
  }
  if (const std::string failures = reap_all(); !failures.empty()) {
    throw std::runtime_error("child processes failed:" + failures);
  }
  return results;
}

// Aggregate seconds of a set of children: from the first start to the last end.
double WindowSeconds(const std::vector<ChildResult>& results) {
  std::int64_t first = results.front().start_ns;
  std::int64_t last = results.front().end_ns;
  for (const ChildResult& result : results) {
    first = std::min(first, result.start_ns);
    last = std::max(last, result.end_ns);
  }
  return static_cast<double>(last - first) / 1e9;
}

// ---- scenarios ----------------------------------------------------------------------------------------------

struct Row {
  std::string scenario;
  std::string backend;
  int processes = 1;
  std::string work;  // "200000 rows"
  double seconds = 0;
  double rate = 0;               // the figure: per second, or a ratio
  std::string unit;              // "rows/s", "claims/s", "x"
  std::optional<double> target;  // rate >= target; none for rows that only inform
  std::string problem;           // why the scenario could not be measured or misbehaved; empty when fine
  bool Met() const { return problem.empty() && (!target || rate >= *target); }
};

// 1234567 -> "1,234,567"; below 100 with one decimal.
std::string Figure(double value) {
  if (value < 100) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f", value);
    return text;
  }
  // Built char by char: GCC 12 gives a false -Wrestrict for std::string::insert at -O3.
  const std::string digits = std::to_string(std::llround(value));
  std::string grouped;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) grouped.push_back(',');
    grouped.push_back(digits[i]);
  }
  return grouped;
}

std::string SqliteUrl(const fs::path& file) { return "sqlite://" + file.string(); }

// 1: one process, one trial, Record batches.
Row InsertSingle(const fs::path& dir) {
  Row row{kInsertScenario, "sqlite", 1, "", 0, 0, "rows/s", kTargetRowsPerSecond, ""};
  const fs::path db = dir / "insert_single.db";
  auto store = dltune::OpenStore(SqliteUrl(db));
  const auto study = store->CreateStudy(BenchStudy("insert"));
  store->AddTrials(study.id, BenchTrials(1));
  const auto claim = store->ClaimNext(study.id, "writer");
  if (!claim) throw std::runtime_error("the one trial could not be claimed");
  const auto start = Clock::now();
  std::int64_t written = 0;
  while (written < kSingleWriterRows && SecondsSince(start) < kWorkSeconds) {
    store->Record(claim->second, TrainBatch(written + 1, kBatchRows));
    written += kBatchRows;
  }
  row.seconds = SecondsSince(start);
  row.rate = static_cast<double>(written) / row.seconds;
  row.work = std::to_string(written) + " rows";
  const std::size_t stored = store->TrainSeries(claim->second.trial_id).size();
  if (stored != static_cast<std::size_t>(written)) {
    row.problem = "stored " + std::to_string(stored) + " rows of " + std::to_string(written) + " written";
  }
  return row;
}

// 2: kProcesses writer processes on one SQLite file, each its own trial.
Row InsertParallel(const fs::path& dir) {
  Row row{kInsertScenario, "sqlite", kProcesses, "", 0, 0, "rows/s", kTargetRowsPerSecond, ""};
  const std::string url = SqliteUrl(dir / "insert_parallel.db");
  {
    auto store = dltune::OpenStore(url);
    const auto study = store->CreateStudy(BenchStudy("insert"));
    store->AddTrials(study.id, BenchTrials(kProcesses));
  }
  std::vector<std::vector<std::string>> args;
  args.reserve(kProcesses);
  for (int i = 0; i < kProcesses; ++i) {
    args.push_back({"insert", url, "insert", "writer-" + std::to_string(i), std::to_string(kRowsPerWriter)});
  }
  const auto results = RunChildren(args);
  std::int64_t written = 0;
  for (const ChildResult& result : results) written += result.count;
  row.seconds = WindowSeconds(results);
  row.rate = static_cast<double>(written) / row.seconds;
  row.work = std::to_string(written) + " rows";
  auto store = dltune::OpenStore(url);
  for (const ChildResult& result : results) {
    const std::size_t stored = store->TrainSeries(result.trial_id).size();
    if (stored != static_cast<std::size_t>(result.count)) {
      row.problem = "trial id " + std::to_string(result.trial_id) + " has " + std::to_string(stored) + " rows of " +
                    std::to_string(result.count) + " written";
    }
  }
  return row;
}

// 3: kProcesses workers drain a kDrainTrials-trial study with ClaimNext + Finish; checks nothing was handed twice.
Row DrainClaims(const std::string& url, const std::string& backend) {
  Row row{kClaimScenario, backend, kProcesses, "", 0, 0, "claims/s", kTargetClaimsPerSecond, ""};
  auto store = dltune::OpenStore(url);
  const auto study = store->CreateStudy(BenchStudy("drain"));
  store->AddTrials(study.id, BenchTrials(kDrainTrials));
  std::vector<std::vector<std::string>> args;
  args.reserve(kProcesses);
  for (int i = 0; i < kProcesses; ++i) args.push_back({"drain", url, "drain", "worker-" + std::to_string(i)});
  const auto results = RunChildren(args);
  std::int64_t claimed = 0;
  std::map<std::uint64_t, std::string> holder;  // trial number -> worker that claimed it
  std::string problems;
  for (std::size_t i = 0; i < results.size(); ++i) {
    claimed += results[i].count;
    for (const std::uint64_t number : results[i].numbers) {
      const auto [it, inserted] = holder.emplace(number, "worker-" + std::to_string(i));
      if (!inserted) problems += " trial " + std::to_string(number) + " claimed twice;";
    }
  }
  row.seconds = WindowSeconds(results);
  row.rate = static_cast<double>(claimed) / row.seconds;
  row.work = std::to_string(claimed) + " claims";
  int completed = 0;
  for (const dltune::TrialRecord& trial : store->ListTrials(study.id)) {
    if (trial.state != dltune::TrialState::kCompleted) continue;
    ++completed;
    const auto it = holder.find(trial.number);
    if (it == holder.end() || it->second != trial.worker) {
      problems += " trial " + std::to_string(trial.number) + " completed by unexpected worker '" + trial.worker + "';";
    }
  }
  if (completed != claimed) {
    problems += " " + std::to_string(completed) + " trials completed but " + std::to_string(claimed) + " claimed;";
  }
  if (claimed != kDrainTrials) {
    problems += " only " + std::to_string(claimed) + " of " + std::to_string(kDrainTrials) + " drained in " +
                std::to_string(static_cast<int>(kWorkSeconds)) + " s;";
  }
  if (!problems.empty()) row.problem = problems.substr(1, problems.size() - 2);
  return row;
}

// 4, dltune's side: kPeerTrials trials created, then claimed, recorded and finished sequentially. Returns seconds.
double DltuneSequential(const fs::path& dir) {
  const auto start = Clock::now();
  auto store = dltune::OpenStore(SqliteUrl(dir / "dltune_peer.db"));
  const auto study = store->CreateStudy(BenchStudy("bench"));
  store->AddTrials(study.id, BenchTrials(kPeerTrials));
  int finished = 0;
  while (const auto claim = store->ClaimNext(study.id, "worker")) {
    const double objective = std::get<double>(claim->first.params.at("x"));
    dltune::MeasurementBatch batch;
    batch.evals.push_back({0, "valid", "objective", objective, 1});
    batch.best_step = 0;
    batch.best_value = objective;
    store->Record(claim->second, batch);
    store->Finish(claim->second, {dltune::TrialState::kCompleted, "", objective, std::nullopt, ""});
    ++finished;
  }
  const double seconds = SecondsSince(start);
  if (finished != kPeerTrials) {
    throw std::runtime_error(std::to_string(finished) + " of " + std::to_string(kPeerTrials) + " trials finished");
  }
  return seconds;
}

std::string PythonInterpreter() {
  if (const char* configured = std::getenv("DLTUNE_PYTHON"); configured != nullptr && *configured != '\0') {
    return configured;
  }
  if (fs::exists("/usr/bin/python3")) return "/usr/bin/python3";
  return "python3";
}

std::string ShellQuote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  quoted += "'";
  return quoted;
}

// Runs a shell command; returns its exit status and its stdout (stderr passes through).
std::pair<int, std::string> RunCommand(const std::string& command) {
  std::fflush(stdout);
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int wait_status = pclose(pipe);
  return {WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1, output};
}

fs::path SourceFile(const char* argv0, const std::string& relative) {
  fs::path in_source = fs::path(DLTUNE_SOURCE_DIR) / relative;
  if (fs::exists(in_source)) return in_source;
  const fs::path binary_dir = fs::absolute(argv0).parent_path();
  for (const auto& candidate : {binary_dir / relative, binary_dir.parent_path() / relative,
                                binary_dir.parent_path().parent_path() / relative}) {
    if (fs::exists(candidate)) return candidate;
  }
  return {};
}

struct PeerResult {
  double seconds = 0;
  std::string line;  // the peer's report
};

// 4, Optuna's side; nullopt after setting `why` to one line saying why it could not run.
std::optional<PeerResult> RunOptuna(const char* argv0, const fs::path& dir, std::string& why) {
  const fs::path script = SourceFile(argv0, "bench/peers/optuna_store.py");
  if (script.empty()) {
    why = "peer script bench/peers/optuna_store.py not found";
    return std::nullopt;
  }
  std::string command = ShellQuote(PythonInterpreter());
  command += " " + ShellQuote(script.string());
  command += " --db " + ShellQuote((dir / "optuna_peer.db").string());
  command += " --trials " + std::to_string(kPeerTrials) + " 2>&1";
  const auto [status, output] = RunCommand(command);
  std::string line = output;  // the last non-empty line: the report, or the error
  while (!line.empty() && line.back() == '\n') line.pop_back();
  line = line.substr(line.rfind('\n') + 1);
  const std::string key = "seconds=";
  const std::size_t at = line.rfind(key);
  if (status != 0 || at == std::string::npos) {
    std::fprintf(stderr, "store bench: the Optuna peer failed running %s:\n%s", command.c_str(), output.c_str());
    why = "the Optuna peer exited with status " + std::to_string(status) + ": " +
          (line.empty() ? "no output; it needs python3 with python3-optuna (apt-get install python3-optuna, or set "
                          "DLTUNE_PYTHON)"
                        : line);
    return std::nullopt;
  }
  return PeerResult{std::stod(line.substr(at + key.size())), line};
}

// A throw-away PostgreSQL server in `dir`, stopped (and `dir` removed) when this goes out of scope.
class PgServer {
 public:
  PgServer(const char* argv0, fs::path dir) : dir_(std::move(dir)) {
    script_ = SourceFile(argv0, "scripts/pg-test-server");
    if (script_.empty()) throw std::runtime_error("scripts/pg-test-server not found");
    started_ = true;  // stop even after a partial start
    const auto [status, output] = RunCommand(ShellQuote(script_.string()) + " start " + ShellQuote(dir_.string()));
    if (status != 0)
      throw std::runtime_error("scripts/pg-test-server start failed (exit status " + std::to_string(status) + ")");
    url_ = output.substr(0, output.find('\n'));
    if (!url_.starts_with("postgresql://")) throw std::runtime_error("scripts/pg-test-server printed no URL");
  }
  ~PgServer() {
    if (!started_) return;
    const auto [status, output] = RunCommand(ShellQuote(script_.string()) + " stop " + ShellQuote(dir_.string()));
    if (status != 0) std::fprintf(stderr, "store bench: scripts/pg-test-server stop %s failed\n", dir_.c_str());
  }
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;
  const std::string& url() const { return url_; }

 private:
  fs::path dir_;
  fs::path script_;
  std::string url_;
  bool started_ = false;
};

// A fresh directory under $TMPDIR (default /tmp), removed with its contents when this goes out of scope.
class TempDir {
 public:
  TempDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        (tmp != nullptr && *tmp != '\0' ? std::string(tmp) : std::string("/tmp")) + "/dltune-store-bench-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("cannot create a directory like " + pattern + ": " + std::strerror(errno));
    }
    path_ = pattern;
    // The PostgreSQL server may run as another user (postgres, when we are root): it must reach its subdirectory.
    chmod(path_.c_str(), 0711);
  }
  ~TempDir() {
    std::error_code error;
    dltune::RemoveTree(path_, error);
    if (error) std::fprintf(stderr, "store bench: cannot remove %s: %s\n", path_.c_str(), error.message().c_str());
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string FilesystemName(const fs::path& path) {
  struct statfs info {};
  if (statfs(path.c_str(), &info) != 0) return "unknown filesystem";
  switch (static_cast<unsigned long>(info.f_type)) {
    case 0x01021994UL: return "tmpfs";
    case 0xEF53UL: return "ext4";
    case 0x9123683EUL: return "btrfs";
    case 0x58465342UL: return "xfs";
    case 0x794C7630UL: return "overlayfs";
    default:
      return "filesystem type 0x" + [&] {
        char hex[32];
        std::snprintf(hex, sizeof hex, "%lx", static_cast<unsigned long>(info.f_type));
        return std::string(hex);
      }();
  }
}

// Runs a scenario, turning an exception into a row that names the problem.
template <typename Function>
Row Measure(Row fallback, Function&& function) {
  if (received_signal != 0) {
    fallback.problem = "not run: interrupted by signal " + std::to_string(received_signal);
    return fallback;
  }
  try {
    return function();
  } catch (const std::exception& e) {
    fallback.problem = e.what();
    return fallback;
  }
}

void PrintTable(const std::vector<Row>& rows) {
  std::printf("\n%-46s %-8s %5s %13s %8s %18s %17s  %s\n", "scenario", "backend", "procs", "work", "seconds", "figure",
              "target", "met");
  std::printf("%s\n", std::string(127, '-').c_str());
  for (const Row& row : rows) {
    const std::string figure = row.problem.empty() && row.rate > 0 ? Figure(row.rate) + " " + row.unit : "-";
    char seconds[32] = "-";
    if (row.seconds > 0) std::snprintf(seconds, sizeof seconds, "%.2f", row.seconds);
    const std::string target = row.target ? ">= " + Figure(*row.target) + " " + row.unit : "-";
    const char* met = !row.problem.empty() ? "FAILED" : !row.target ? "-" : row.Met() ? "yes" : "NO";
    std::printf("%-46s %-8s %5d %13s %8s %18s %17s  %s\n", row.scenario.c_str(), row.backend.c_str(), row.processes,
                row.work.c_str(), seconds, figure.c_str(), target.c_str(), met);
    if (!row.problem.empty()) std::printf("    problem: %s\n", row.problem.c_str());
  }
}

// "0.52 0.61 0.70" from /proc/loadavg: other work on the machine skews the figures.
std::string LoadAverage() {
  std::FILE* file = std::fopen("/proc/loadavg", "r");
  if (file == nullptr) return "unknown";
  double one = 0;
  double five = 0;
  double fifteen = 0;
  const int read = std::fscanf(file, "%lf %lf %lf", &one, &five, &fifteen);
  std::fclose(file);
  if (read != 3) return "unknown";
  char text[64];
  std::snprintf(text, sizeof text, "%.2f %.2f %.2f", one, five, fifteen);
  return text;
}

const char* MetText(bool met) { return met ? "met" : "NOT MET"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], kChildFlag) == 0) return ChildMain(argc, argv);
  if (argc > 1) {
    std::fprintf(stderr, "usage: %s   (no arguments: runs every store scenario and the Optuna peer)\n", argv[0]);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  InstallSignalHandlers();
  std::vector<Row> rows;
  std::string filesystem;
  bool peer_ran = false;
  try {
    const TempDir temp;
    filesystem = FilesystemName(temp.path());
    std::printf("dltune store bench: %d processes on %ld cores, load average %s; files in %s (%s)\n", kProcesses,
                sysconf(_SC_NPROCESSORS_ONLN), LoadAverage().c_str(), temp.path().c_str(), filesystem.c_str());

    std::printf("[1/5] sqlite inserts, 1 process ...\n");
    rows.push_back(Measure(Row{kInsertScenario, "sqlite", 1, "", 0, 0, "rows/s", kTargetRowsPerSecond, ""},
                           [&] { return InsertSingle(temp.path()); }));
    std::printf("[2/5] sqlite inserts, %d processes ...\n", kProcesses);
    rows.push_back(Measure(Row{kInsertScenario, "sqlite", kProcesses, "", 0, 0, "rows/s", kTargetRowsPerSecond, ""},
                           [&] { return InsertParallel(temp.path()); }));
    std::printf("[3/5] sqlite claims, %d processes ...\n", kProcesses);
    rows.push_back(Measure(Row{kClaimScenario, "sqlite", kProcesses, "", 0, 0, "claims/s", kTargetClaimsPerSecond, ""},
                           [&] { return DrainClaims(SqliteUrl(temp.path() / "drain.db"), "sqlite"); }));
    std::printf("[4/5] postgresql claims, %d processes (starting a throw-away server) ...\n", kProcesses);
    rows.push_back(
        Measure(Row{kClaimScenario, "postgres", kProcesses, "", 0, 0, "claims/s", kTargetClaimsPerSecond, ""}, [&] {
          const PgServer server(argv[0], temp.path() / "pg");
          return DrainClaims(server.url(), "postgres");
        }));

    std::printf("[5/5] %d trials sequentially: dltune, then Optuna ...\n", kPeerTrials);
    Row dltune_row{kPeerScenario, "sqlite", 1, std::to_string(kPeerTrials) + " trials", 0, 0, "trials/s", {}, ""};
    dltune_row = Measure(dltune_row, [&] {
      Row row = dltune_row;
      row.seconds = DltuneSequential(temp.path());
      row.rate = kPeerTrials / row.seconds;
      return row;
    });
    Row optuna_row{"  peer: optuna create_study + optimize",
                   "sqlite",
                   1,
                   std::to_string(kPeerTrials) + " trials",
                   0,
                   0,
                   "trials/s",
                   {},
                   ""};
    Row ratio_row{"  speed-up: optuna seconds / dltune seconds", "sqlite", 1, "", 0, 0, "x", kTargetPeerRatio, ""};
    std::string peer_problem = "not run: interrupted";
    const auto optuna =
        received_signal == 0 ? RunOptuna(argv[0], temp.path(), peer_problem) : std::optional<PeerResult>{};
    if (optuna) {
      peer_ran = true;
      optuna_row.seconds = optuna->seconds;
      optuna_row.rate = kPeerTrials / optuna->seconds;
      std::printf("peer: %s\n", optuna->line.c_str());
    } else {
      optuna_row.problem = peer_problem;
    }
    if (optuna && dltune_row.problem.empty()) {
      ratio_row.rate = optuna->seconds / dltune_row.seconds;
    } else {
      ratio_row.problem = optuna ? "no comparison: dltune's side failed" : "no comparison: the peer did not run";
    }
    rows.push_back(dltune_row);
    rows.push_back(optuna_row);
    rows.push_back(ratio_row);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store bench: %s\n", e.what());
    return 1;
  }

  PrintTable(rows);
  const Row& single = rows[0];
  const Row& parallel = rows[1];
  const Row& sqlite_claims = rows[2];
  const Row& pg_claims = rows[3];
  const Row& dltune_row = rows[4];
  const Row& optuna_row = rows[5];
  const Row& ratio_row = rows[6];
  std::printf("\n");
  if (single.problem.empty() && parallel.problem.empty()) {
    std::printf(
        "store inserts (sqlite): 1 process %s rows/s, %d processes %s rows/s aggregate, ratio %.2fx "
        "(target >= %s rows/s: %s / %s)\n",
        Figure(single.rate).c_str(), kProcesses, Figure(parallel.rate).c_str(), parallel.rate / single.rate,
        Figure(kTargetRowsPerSecond).c_str(), MetText(single.Met()), MetText(parallel.Met()));
  }
  if (sqlite_claims.problem.empty() && pg_claims.problem.empty()) {
    std::printf(
        "store claims (%d workers, %d trials): postgresql %s claims/s, sqlite %s claims/s, postgresql/sqlite "
        "%.2fx (target >= %s claims/s: %s / %s)\n",
        kProcesses, kDrainTrials, Figure(pg_claims.rate).c_str(), Figure(sqlite_claims.rate).c_str(),
        pg_claims.rate / sqlite_claims.rate, Figure(kTargetClaimsPerSecond).c_str(), MetText(pg_claims.Met()),
        MetText(sqlite_claims.Met()));
  }
  if (ratio_row.problem.empty()) {
    std::printf(
        "store vs optuna (%d trials, sqlite, RandomSampler): optuna %.2f s, dltune %.2f s, ratio %.1fx "
        "(target >= %.1fx: %s)\n",
        kPeerTrials, optuna_row.seconds, dltune_row.seconds, ratio_row.rate, kTargetPeerRatio,
        MetText(ratio_row.Met()));
  }
  if (ratio_row.problem.empty()) {
    std::printf(
        "note: optuna's SQLite storage commits with journal_mode=delete, synchronous=FULL (fsyncs every "
        "commit); dltune's with WAL, synchronous=NORMAL (fsyncs at checkpoints)%s\n",
        filesystem == "tmpfs" ? "; on tmpfs fsync is free, so the ratio is the software cost alone."
                              : ". On tmpfs (TMPDIR=/dev/shm) the ratio shows the software cost alone.");
  }
  if (received_signal != 0) {
    std::printf("store bench: interrupted by signal %d; cleaned up\n", static_cast<int>(received_signal));
    return 128 + received_signal;
  }
  const bool all_met = std::all_of(rows.begin(), rows.end(), [](const Row& row) { return row.Met(); });
  if (!peer_ran) std::printf("store bench: FAILED: the Optuna peer could not run: %s\n", optuna_row.problem.c_str());
  if (!all_met) std::printf("store bench: FAILED: a target was missed or a scenario failed (see the table)\n");
  return all_met && peer_ran ? 0 : 1;
}
