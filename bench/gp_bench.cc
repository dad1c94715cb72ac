// The `gp` sampler's search quality and suggestion latency on standard test functions, against dltune's `halton`
// and `random` samplers and Optuna 3.1's TPESampler and RandomSampler, in one invocation.
//
//   build/release/bench/dltune_bench_gp                     # everything: 20 seeds x 8 functions x 100 evaluations
//   build/release/bench/dltune_bench_gp --seeds 3 --evals 50 --functions branin,branin_infeasible
//
// Functions (bench/test_functions.cc; the same in bench/peers/optuna_functions.py, compared at fixed points before
// every run, or alone with --check-functions): branin (2-D), hartmann6 (6-D), rosenbrock4 (4-D), ackley5 (5-D), and
// NAME_infeasible: the same with an infeasible box covering about a quarter of the domain, next to the minimum,
// where evaluation "diverges". dltune's samplers then get the trial as ObservationKind::kInfeasible; the Optuna
// objective returns NaN, which Optuna records as a failed trial (its documented way; its samplers ignore them).
//
// Each run: one sampler, one function, one seed (0 .. seeds-1; dltune's target seed, Optuna's sampler seed), `evals`
// evaluations in sequence, each suggestion made from every earlier result. dltune's samplers run in this process
// (--jobs runs at once, in threads); Optuna's in bench/peers/optuna_functions.py (--jobs worker processes), started
// afterwards, with $DLTUNE_PYTHON, else /usr/bin/python3 (Debian's, which has python3-optuna), else python3.
//
// Reading the output: per function, one row per sampler with the best value found after 20, 50 and 100 evaluations
// as "median [q1, q3]" over the seeds (quantiles by linear interpolation between order statistics, numpy's default:
// q(p) = x[k] + f (x[k+1] - x[k]) with k + f = p (n - 1)); "none" when no evaluation had a value yet. Infeasible
// variants add the evaluations spent inside the infeasible region, "median [q1, q3]". After the table, per function,
// whether gp's median after 50 evaluations beats TPE's (strictly lower) and, on the infeasible variants, whether gp
// spends fewer evaluations in the infeasible region (lower median); then the suggestion latency with 200 completed
// trials of hartmann6 (6 dims) at uniformly random points: one dltune gp SuggestFromHistory and one Optuna TPE
// study.ask(), median of --latency-repeats after an untimed warm-up, each side alone and pinned to one core,
// with the ratio; then the wall time per sampler, to size a full run. Progress goes to stderr.
//
// Options: --seeds N (20), --evals N (100), --functions a,b,... (all 8), --samplers gp,halton,random,tpe,optuna_random
// (all), --jobs N (2), --latency-repeats N (5; 0: none), --json FILE (every run and the summary), --check-functions.
// Exits 0 when everything ran (goals met or not), 1 when something could not run, 2 on a bad option.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "core/rng.h"
#include "dltune/search/sampler.h"
#include "dltune/space/search_space.h"
#include "test_functions.h"

namespace {

namespace fs = std::filesystem;
using dltune::SteadySeconds;
using dltune::bench::TestFunction;
using Json = nlohmann::json;

constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<std::string> kDltuneSamplers = {"gp", "halton", "random"};
const std::vector<std::string> kOptunaSamplers = {"tpe", "optuna_random"};
constexpr int kGoalEvals = 50;                     // gp's median must beat TPE's after this many evaluations
constexpr double kLatencyGoal = 0.5;               // seconds per gp suggestion with kLatencyHistory completed trials
constexpr int kLatencyHistory = 200;               // completed trials ...
const char* const kLatencyFunction = "hartmann6";  // ... of this 6-D function

std::string Python() {
  if (const char* python = std::getenv("DLTUNE_PYTHON")) return python;
  return fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
}

std::string PeerScript() { return std::string(DLTUNE_SOURCE_DIR) + "/bench/peers/optuna_functions.py"; }

// Runs a shell command and returns its stdout, or nullopt when it fails. Its stderr passes through.
std::optional<std::string> Capture(const std::string& command) {
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return std::nullopt;
  std::string out;
  char buffer[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  const int status = pclose(pipe);
  if (status == -1 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "failed (status %d): %s\n", status, command.c_str());
    return std::nullopt;
  }
  return out;
}

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    if (comma > start) items.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

std::string JoinList(const std::vector<std::string>& items) {
  std::string text;
  for (const auto& item : items) text += (text.empty() ? "" : ",") + item;
  return text;
}

bool Contains(const std::vector<std::string>& items, const std::string& item) {
  return std::find(items.begin(), items.end(), item) != items.end();
}

// The p-quantile of `values` by linear interpolation between order statistics (numpy's default, Hyndman & Fan
// type 7). +inf (no value yet) sorts last; interpolating towards it gives +inf.
double Quantile(std::vector<double> values, double p) {
  if (values.empty()) return std::nan("");
  std::sort(values.begin(), values.end());
  const double h = p * static_cast<double>(values.size() - 1);
  const auto k = static_cast<std::size_t>(std::floor(h));
  const double f = h - static_cast<double>(k);
  if (k + 1 >= values.size() || f == 0) return values[k];
  if (std::isinf(values[k + 1])) return values[k + 1];
  return values[k] + f * (values[k + 1] - values[k]);
}

struct Quartiles {
  double q1 = 0;
  double median = 0;
  double q3 = 0;
};

Quartiles Summarize(const std::vector<double>& values) {
  return {Quantile(values, 0.25), Quantile(values, 0.5), Quantile(values, 0.75)};
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "-";
  if (std::isinf(v)) return v > 0 ? "none" : "-inf";
  return fmt::format("{:.4g}", v);
}

// "12.3 ms", "1.23 s".
std::string FormatSeconds(double seconds) {
  return seconds < 1 ? fmt::format("{:.3g} ms", 1000 * seconds) : fmt::format("{:.3g} s", seconds);
}

std::string FormatQuartiles(const Quartiles& q) {
  return fmt::format("{} [{}, {}]", FormatValue(q.median), FormatValue(q.q1), FormatValue(q.q3));
}

Json JsonNumber(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json QuartilesJson(const Quartiles& q) {
  return {{"q1", JsonNumber(q.q1)}, {"median", JsonNumber(q.median)}, {"q3", JsonNumber(q.q3)}};
}

// Prints rows of cells in left-aligned columns as wide as their widest cell, indented by 2.
void PrintTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()));
    for (std::size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t c = 0; c < row.size(); ++c) {
      line += "  " + row[c];
      if (c + 1 < row.size()) line.append(widths[c] - row[c].size(), ' ');
    }
    std::printf("%s\n", line.c_str());
  }
}

// One run of one sampler on one function with one seed.
struct Run {
  std::string function;
  std::string sampler;
  int seed = 0;
  std::vector<double> best;  // best value after each checkpoint; +inf while no evaluation had a value
  int infeasible = 0;        // evaluations inside the infeasible region
  double seconds = 0;        // wall time of the run (dltune: suggestions and evaluations)
  std::string error;         // why the run could not finish; empty when it did
};

Json RunJson(const Run& run) {
  Json best = Json::array();
  for (const double v : run.best) best.push_back(JsonNumber(v));
  Json json = {{"function", run.function},     {"sampler", run.sampler}, {"seed", run.seed}, {"best", best},
               {"infeasible", run.infeasible}, {"seconds", run.seconds}};
  if (!run.error.empty()) json["error"] = run.error;
  return json;
}

// The function's space: params x1 .. xd, float, nuisance, linear over the function's domain.
dltune::SearchSpace MakeSpace(const TestFunction& function) {
  std::vector<dltune::Param> params;
  for (std::size_t d = 0; d < function.dims(); ++d) {
    dltune::Param param;
    param.id = param.name = fmt::format("x{}", d + 1);
    param.kind = dltune::ParamKind::kFloat;
    param.role = dltune::Role::kNuisance;
    param.min = function.domain[d].lo;
    param.max = function.domain[d].hi;
    params.push_back(std::move(param));
  }
  return dltune::SearchSpace(std::move(params));
}

std::vector<double> PointOf(const TestFunction& function, const dltune::Assignment& assignment) {
  std::vector<double> x(function.dims());
  for (std::size_t d = 0; d < x.size(); ++d) x[d] = std::get<double>(assignment.at(fmt::format("x{}", d + 1)));
  return x;
}

std::unique_ptr<dltune::Sampler> MakeDltuneSampler(const std::string& name, const dltune::SearchSpace& space, int seed,
                                                   int trials) {
  dltune::SamplerOptions options;
  options.name = name;
  const dltune::SamplingTarget target{
      &space, {}, false, static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(trials)};
  return dltune::MakeSampler(options, target);
}

Run RunDltune(const TestFunction& function, const dltune::SearchSpace& space, const std::string& sampler_name, int seed,
              int evals, const std::vector<int>& checkpoints) {
  Run run{.function = function.name, .sampler = sampler_name, .seed = seed};
  const double start = SteadySeconds();
  try {
    const auto sampler = MakeDltuneSampler(sampler_name, space, seed, evals);
    std::vector<dltune::Observation> history;
    history.reserve(static_cast<std::size_t>(evals));
    double best = kInf;
    std::size_t next_checkpoint = 0;
    for (int i = 0; i < evals; ++i) {
      dltune::Assignment params = sampler->SuggestFromHistory(static_cast<std::uint64_t>(i), history);
      const std::vector<double> x = PointOf(function, params);
      if (function.Infeasible(x)) {
        ++run.infeasible;
        history.push_back({std::move(params), dltune::ObservationKind::kInfeasible, 0});
      } else {
        const double value = function.evaluate(x);
        best = std::min(best, value);
        history.push_back({std::move(params), dltune::ObservationKind::kCompleted, value});
      }
      while (next_checkpoint < checkpoints.size() && checkpoints[next_checkpoint] == i + 1) {
        run.best.push_back(best);
        ++next_checkpoint;
      }
    }
  } catch (const std::exception& e) {
    run.error = e.what();
  }
  run.seconds = SteadySeconds() - start;
  return run;
}

// Every (sampler, function, seed) run of dltune's samplers, `jobs` at once in threads.
std::vector<Run> RunAllDltune(const std::vector<const TestFunction*>& functions,
                              const std::vector<std::string>& samplers, int seeds, int evals,
                              const std::vector<int>& checkpoints, int jobs) {
  struct Task {
    const TestFunction* function;
    std::string sampler;
    int seed;
  };
  std::vector<Task> tasks;
  for (const auto& sampler : samplers) {
    for (const TestFunction* function : functions) {
      for (int seed = 0; seed < seeds; ++seed) tasks.push_back({function, sampler, seed});
    }
  }
  std::map<std::string, dltune::SearchSpace> spaces;
  for (const TestFunction* function : functions) spaces.emplace(function->name, MakeSpace(*function));

  std::vector<Run> runs(tasks.size());
  std::atomic<std::size_t> next{0};
  std::mutex progress_mutex;
  std::size_t done = 0;
  const double start = SteadySeconds();
  double last_report = start;
  auto work = [&] {
    for (std::size_t t = next++; t < tasks.size(); t = next++) {
      const Task& task = tasks[t];
      runs[t] = RunDltune(*task.function, spaces.at(task.function->name), task.sampler, task.seed, evals, checkpoints);
      const std::lock_guard lock(progress_mutex);
      ++done;
      const double now = SteadySeconds();
      if (!runs[t].error.empty()) {
        std::fprintf(stderr, "dltune: %s %s seed %d failed: %s\n", task.sampler.c_str(), task.function->name.c_str(),
                     task.seed, runs[t].error.c_str());
      }
      if (now - last_report >= 5 || done == tasks.size()) {
        std::fprintf(stderr,
                     "dltune: %zu/%zu runs done (%.0f s; last: %s %s seed %d, %.1f s, %.1f ms per evaluation)\n", done,
                     tasks.size(), now - start, task.sampler.c_str(), task.function->name.c_str(), task.seed,
                     runs[t].seconds, 1000 * runs[t].seconds / evals);
        last_report = now;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(work);
  work();
  for (auto& thread : threads) thread.join();
  return runs;
}

// Keeps the calling thread (and the threads it starts) on one core while it lives: the latency goal is for one core.
class OneCore {
 public:
  OneCore() {
    pinned_ = sched_getaffinity(0, sizeof saved_, &saved_) == 0;
    if (!pinned_) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(std::max(sched_getcpu(), 0), &one);
    pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~OneCore() {
    if (pinned_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  OneCore(const OneCore&) = delete;
  OneCore& operator=(const OneCore&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

// Seconds of one gp suggestion with kLatencyHistory completed trials of hartmann6 at uniformly random points (dltune's
// `random` sampler), per repeat, after one untimed warm-up; on one core.
std::vector<double> GpLatency(int repeats) {
  const OneCore one_core;
  const TestFunction& function = *dltune::bench::FindTestFunction(kLatencyFunction);
  const dltune::SearchSpace space = MakeSpace(function);
  std::vector<double> seconds;
  for (int repeat = 0; repeat <= repeats; ++repeat) {
    const auto random = MakeDltuneSampler("random", space, repeat, kLatencyHistory);
    std::vector<dltune::Observation> history;
    for (int i = 0; i < kLatencyHistory; ++i) {
      dltune::Assignment params = random->Suggest(static_cast<std::uint64_t>(i));
      const double value = function.evaluate(PointOf(function, params));
      history.push_back({std::move(params), dltune::ObservationKind::kCompleted, value});
    }
    const auto gp = MakeDltuneSampler("gp", space, repeat, kLatencyHistory + 1);
    const double start = SteadySeconds();
    const dltune::Assignment suggestion = gp->SuggestFromHistory(kLatencyHistory, history);
    const double elapsed = SteadySeconds() - start;
    if (suggestion.size() != function.dims()) throw std::runtime_error("gp suggested an incomplete assignment");
    if (repeat > 0) seconds.push_back(elapsed);
  }
  return seconds;
}

// The fixed points at which the two definitions of a function are compared: its minimizers, the domain's center
// and two corners, the infeasible region's lower corner (on its boundary), and 6 pseudo-random points.
std::vector<std::vector<double>> CheckPoints(const TestFunction& function) {
  std::vector<std::vector<double>> points = function.minimizers;
  std::vector<double> center, lo, hi;
  for (const auto& interval : function.domain) {
    center.push_back((interval.lo + interval.hi) / 2);
    lo.push_back(interval.lo);
    hi.push_back(interval.hi);
  }
  points.push_back(center);
  points.push_back(lo);
  points.push_back(hi);
  if (!function.region.empty()) {
    std::vector<double> corner = center;
    for (const auto& side : function.region) corner[side.dim] = side.range.lo;
    points.push_back(corner);
  }
  dltune::Rng rng(1234);
  for (int k = 0; k < 6; ++k) {
    std::vector<double> x;
    for (const auto& interval : function.domain) x.push_back(interval.lo + rng.Uniform() * (interval.hi - interval.lo));
    points.push_back(x);
  }
  return points;
}

// Checks each C++ function at its minimizers, then compares it with the Python definition at CheckPoints. Prints
// the comparison; returns false on a mismatch or when the peer cannot run.
bool CheckFunctions(const std::vector<const TestFunction*>& functions, bool verbose) {
  bool ok = true;
  Json points = Json::object();
  for (const TestFunction* function : functions) {
    for (const auto& x : function->minimizers) {
      const double value = function->evaluate(x);
      if (std::abs(value - function->minimum) > 1e-5 || function->Infeasible(x)) {
        std::printf("check: %s at its minimizer: %.10g (expected %.10g, feasible)\n", function->name.c_str(), value,
                    function->minimum);
        ok = false;
      }
    }
    points[function->name] = CheckPoints(*function);
  }
  const fs::path file = fs::temp_directory_path() / fmt::format("dltune_bench_gp_points_{}.json", ::getpid());
  std::ofstream(file) << points.dump();
  const auto out = Capture(Python() + " " + PeerScript() + " --check " + file.string());
  fs::remove(file);
  if (!out) return false;
  Json peer;
  try {
    peer = Json::parse(*out);
  } catch (const Json::exception& e) {
    std::fprintf(stderr, "unreadable output of %s --check: %s\n", PeerScript().c_str(), e.what());
    return false;
  }
  std::size_t compared = 0;
  double worst = 0;
  for (const TestFunction* function : functions) {
    const auto xs = CheckPoints(*function);
    const Json& values = peer.at(function->name);
    for (std::size_t k = 0; k < xs.size(); ++k) {
      const bool infeasible = function->Infeasible(xs[k]);
      const double mine = infeasible ? std::nan("") : function->evaluate(xs[k]);
      const bool peer_infeasible = values[k].at("infeasible").get<bool>();
      const double theirs = values[k].at("value").is_null() ? std::nan("") : values[k].at("value").get<double>();
      const double difference = infeasible ? 0 : std::abs(mine - theirs) / std::max(1.0, std::abs(mine));
      const bool match = infeasible == peer_infeasible && (infeasible || difference <= 1e-12);
      if (!std::isnan(difference)) worst = std::max(worst, difference);
      if (verbose || !match) {
        std::string where;
        for (const double v : xs[k]) where += fmt::format("{}{:.6g}", where.empty() ? "" : ", ", v);
        std::printf("  %-22s (%s): C++ %s, Python %s%s\n", function->name.c_str(), where.c_str(),
                    infeasible ? "infeasible" : fmt::format("{:.17g}", mine).c_str(),
                    peer_infeasible ? "infeasible" : fmt::format("{:.17g}", theirs).c_str(), match ? "" : "  MISMATCH");
      }
      ok = ok && match;
      ++compared;
    }
  }
  std::printf("function check: C++ and Python definitions %s at %zu points (largest relative difference %.2g)\n",
              ok ? "agree" : "DISAGREE", compared, worst);
  return ok;
}

struct PeerResult {
  std::vector<Run> runs;
  std::vector<double> tpe_latency;
  std::string optuna_version;
};

// Reads the peer's JSON into `out`. Throws Json::exception when it is not what optuna_functions.py writes.
void ParsePeerOutput(const Json& json, PeerResult& out) {
  out.optuna_version = json.at("optuna").get<std::string>();
  for (const Json& r : json.at("runs")) {
    Run run{.function = r.at("function").get<std::string>(),
            .sampler = r.at("sampler").get<std::string>(),
            .seed = r.at("seed").get<int>()};
    for (const Json& v : r.at("best")) run.best.push_back(v.is_null() ? kInf : v.get<double>());
    run.infeasible = r.at("infeasible");
    run.seconds = r.at("seconds");
    out.runs.push_back(std::move(run));
  }
  if (json.contains("tpe_latency")) out.tpe_latency = json["tpe_latency"].at("seconds").get<std::vector<double>>();
}

std::optional<PeerResult> RunPeer(const std::vector<const TestFunction*>& functions,
                                  const std::vector<std::string>& samplers, int seeds, int evals,
                                  const std::vector<int>& checkpoints, int jobs, int latency_repeats) {
  std::vector<std::string> names, checkpoint_texts;
  for (const TestFunction* function : functions) names.push_back(function->name);
  for (const int c : checkpoints) checkpoint_texts.push_back(std::to_string(c));
  const auto out = Capture(fmt::format(
      "{} {} --seeds {} --evals {} --checkpoints {} --functions {} --samplers {} --jobs {} --latency-history {} "
      "--latency-repeats {}",
      Python(), PeerScript(), seeds, evals, JoinList(checkpoint_texts), JoinList(names), JoinList(samplers), jobs,
      kLatencyHistory, latency_repeats));
  if (!out) return std::nullopt;
  PeerResult result;
  try {
    ParsePeerOutput(Json::parse(*out), result);
  } catch (const Json::exception& e) {
    std::fprintf(stderr, "unreadable output of %s: %s\n", PeerScript().c_str(), e.what());
    return std::nullopt;
  }
  return result;
}

struct Options {
  int seeds = 20;
  int evals = 100;
  std::vector<std::string> functions;
  std::vector<std::string> samplers = {"gp", "halton", "random", "tpe", "optuna_random"};
  int jobs = 2;
  int latency_repeats = 5;
  std::string json_file;
  bool check_only = false;
};

int Usage(const char* program, const std::string& problem) {
  std::fprintf(stderr,
               "%s\nusage: %s [--seeds N] [--evals N] [--functions a,b,...] [--samplers gp,halton,random,tpe,"
               "optuna_random] [--jobs N] [--latency-repeats N] [--json FILE] [--check-functions]\n",
               problem.c_str(), program);
  return 2;
}

std::string SamplerLabel(const std::string& sampler) {
  if (sampler == "tpe") return "Optuna TPE";
  if (sampler == "optuna_random") return "Optuna random";
  return "dltune " + sampler;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (const auto& function : dltune::bench::TestFunctions()) options.functions.push_back(function.name);
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    try {
      if (arg == "--check-functions") {
        options.check_only = true;
      } else if (arg == "--seeds" && has_value) {
        options.seeds = std::stoi(argv[++i]);
      } else if (arg == "--evals" && has_value) {
        options.evals = std::stoi(argv[++i]);
      } else if (arg == "--functions" && has_value) {
        options.functions = SplitList(argv[++i]);
      } else if (arg == "--samplers" && has_value) {
        options.samplers = SplitList(argv[++i]);
      } else if (arg == "--jobs" && has_value) {
        options.jobs = std::stoi(argv[++i]);
      } else if (arg == "--latency-repeats" && has_value) {
        options.latency_repeats = std::stoi(argv[++i]);
      } else if (arg == "--json" && has_value) {
        options.json_file = argv[++i];
      } else {
        return Usage(argv[0], "unknown option or missing value: " + arg);
      }
    } catch (const std::exception&) {
      return Usage(argv[0], fmt::format("{} needs a number, not '{}'", arg, argv[i]));
    }
  }
  if (options.seeds < 1 || options.evals < 1 || options.jobs < 1 || options.latency_repeats < 0) {
    return Usage(argv[0], "--seeds, --evals and --jobs must be >= 1, --latency-repeats >= 0");
  }
  std::vector<const TestFunction*> functions;
  for (const auto& name : options.functions) {
    const TestFunction* function = dltune::bench::FindTestFunction(name);
    if (function == nullptr) return Usage(argv[0], "unknown function: " + name);
    functions.push_back(function);
  }
  std::vector<std::string> dltune_samplers, optuna_samplers;
  for (const auto& sampler : options.samplers) {
    if (Contains(kDltuneSamplers, sampler)) {
      dltune_samplers.push_back(sampler);
    } else if (Contains(kOptunaSamplers, sampler)) {
      optuna_samplers.push_back(sampler);
    } else {
      return Usage(argv[0], "unknown sampler: " + sampler);
    }
  }
  if (functions.empty() || options.samplers.empty()) return Usage(argv[0], "no functions or no samplers");

  if (options.check_only) return CheckFunctions(functions, true) ? 0 : 1;
  bool ran = true;
  if (!optuna_samplers.empty() && !CheckFunctions(functions, false)) return 1;

  std::vector<int> checkpoints;
  for (const int c : {20, 50, 100}) {
    if (c <= options.evals) checkpoints.push_back(c);
  }
  if (checkpoints.empty() || checkpoints.back() != options.evals) checkpoints.push_back(options.evals);

  std::printf("%d seeds x %zu functions x %d evaluations; samplers %s; %d jobs\n", options.seeds, functions.size(),
              options.evals, JoinList(options.samplers).c_str(), options.jobs);
  std::fflush(stdout);
  std::vector<Run> runs;
  std::map<std::string, double> sampler_seconds;  // wall time of the runs' phase per side
  if (!dltune_samplers.empty()) {
    const double start = SteadySeconds();
    runs = RunAllDltune(functions, dltune_samplers, options.seeds, options.evals, checkpoints, options.jobs);
    sampler_seconds["dltune"] = SteadySeconds() - start;
  }
  std::vector<double> gp_latency;
  if (Contains(dltune_samplers, "gp") && options.latency_repeats > 0) {
    std::fprintf(stderr, "dltune: gp latency with %d completed trials in 6 dims ...\n", kLatencyHistory);
    try {
      gp_latency = GpLatency(options.latency_repeats);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "dltune: gp latency failed: %s\n", e.what());
      ran = false;
    }
  }
  std::optional<PeerResult> peer;
  if (!optuna_samplers.empty()) {
    const double start = SteadySeconds();
    peer = RunPeer(functions, optuna_samplers, options.seeds, options.evals, checkpoints, options.jobs,
                   Contains(optuna_samplers, "tpe") ? options.latency_repeats : 0);
    sampler_seconds["optuna"] = SteadySeconds() - start;
    if (peer) {
      runs.insert(runs.end(), peer->runs.begin(), peer->runs.end());
    } else {
      ran = false;
    }
  }

  // runs by function, then sampler.
  std::map<std::string, std::map<std::string, std::vector<const Run*>>> grouped;
  std::map<std::string, double> seconds_per_sampler;
  for (const Run& run : runs) {
    if (!run.error.empty()) {
      ran = false;
      continue;
    }
    grouped[run.function][run.sampler].push_back(&run);
    seconds_per_sampler[run.sampler] += run.seconds;
  }
  const auto best_after = [&](const std::vector<const Run*>& group, std::size_t c) {
    std::vector<double> values;
    values.reserve(group.size());
    for (const Run* run : group) values.push_back(run->best.at(c));
    return Summarize(values);
  };
  const auto infeasible_evals = [&](const std::vector<const Run*>& group) {
    std::vector<double> values;
    values.reserve(group.size());
    for (const Run* run : group) values.push_back(run->infeasible);
    return Summarize(values);
  };

  Json summary = Json::object();
  std::printf("\nbest value found: median [q1, q3] over %d seeds (linear interpolation)%s\n", options.seeds,
              peer ? fmt::format("; Optuna {}", peer->optuna_version).c_str() : "");
  for (const TestFunction* function : functions) {
    const bool has_region = !function->region.empty();
    std::printf("\n%s: %zu-D on %s, minimum %.6g", function->name.c_str(), function->dims(),
                function->DomainText().c_str(), function->minimum);
    if (has_region) {
      std::printf("; infeasible where %s (%.1f%% of the domain)", function->RegionText().c_str(),
                  100 * function->InfeasibleFraction());
    }
    std::vector<std::vector<std::string>> rows = {{"sampler"}};
    for (const int c : checkpoints) rows[0].push_back(fmt::format("after {}", c));
    if (has_region) rows[0].push_back(fmt::format("infeasible evals (of {})", options.evals));
    for (const auto& sampler : options.samplers) {
      const auto it = grouped[function->name].find(sampler);
      if (it == grouped[function->name].end()) continue;
      Json& entry = summary[function->name][sampler];
      rows.push_back({SamplerLabel(sampler)});
      for (std::size_t c = 0; c < checkpoints.size(); ++c) {
        const Quartiles q = best_after(it->second, c);
        rows.back().push_back(FormatQuartiles(q));
        entry["best"][std::to_string(checkpoints[c])] = QuartilesJson(q);
      }
      if (has_region) {
        const Quartiles q = infeasible_evals(it->second);
        rows.back().push_back(FormatQuartiles(q));
        entry["infeasible"] = QuartilesJson(q);
      }
      entry["runs"] = it->second.size();
    }
    std::printf("\n");
    PrintTable(rows);
  }

  // The goals: gp against TPE.
  const auto goal_checkpoint = std::find(checkpoints.begin(), checkpoints.end(), kGoalEvals);
  const std::size_t goal_index = goal_checkpoint != checkpoints.end()
                                     ? static_cast<std::size_t>(goal_checkpoint - checkpoints.begin())
                                     : checkpoints.size() - 1;
  Json goals = Json::object();
  if (Contains(options.samplers, "gp") && Contains(options.samplers, "tpe")) {
    std::printf(
        "\ngoals: dltune gp's median best value after %d evaluations below Optuna TPE's; on the infeasible "
        "variants, fewer evaluations in the infeasible region (median)\n",
        checkpoints[goal_index]);
    bool all_met = true;
    for (const TestFunction* function : functions) {
      const auto& by_sampler = grouped[function->name];
      if (!by_sampler.contains("gp") || !by_sampler.contains("tpe")) {
        all_met = false;
        continue;
      }
      const double gp = best_after(by_sampler.at("gp"), goal_index).median;
      const double tpe = best_after(by_sampler.at("tpe"), goal_index).median;
      const bool better = gp < tpe;
      std::printf("  %-22s gp %-10s vs TPE %-10s %s", function->name.c_str(), FormatValue(gp).c_str(),
                  FormatValue(tpe).c_str(), better ? "met" : "NOT met");
      Json& goal = goals[function->name];
      goal = {{"gp", JsonNumber(gp)}, {"tpe", JsonNumber(tpe)}, {"evals", checkpoints[goal_index]}, {"met", better}};
      all_met = all_met && better;
      if (!function->region.empty()) {
        const double gp_wasted = infeasible_evals(by_sampler.at("gp")).median;
        const double tpe_wasted = infeasible_evals(by_sampler.at("tpe")).median;
        const bool fewer = gp_wasted < tpe_wasted;
        std::printf("; infeasible evaluations gp %s vs TPE %s %s", FormatValue(gp_wasted).c_str(),
                    FormatValue(tpe_wasted).c_str(), fewer ? "met" : "NOT met");
        goal["infeasible"] = {{"gp", gp_wasted}, {"tpe", tpe_wasted}, {"met", fewer}};
        all_met = all_met && fewer;
      }
      std::printf("\n");
    }
    std::printf("  %s\n", all_met ? "all met" : "NOT all met");
  }

  Json latency = Json::object();
  if (!gp_latency.empty() || (peer && !peer->tpe_latency.empty())) {
    std::printf(
        "\nsuggestion latency: one suggestion with %d completed trials of %s (6 dims) at random points, median "
        "of %d, on one core\n",
        kLatencyHistory, kLatencyFunction, options.latency_repeats);
    const double gp = gp_latency.empty() ? std::nan("") : Quantile(gp_latency, 0.5);
    const double tpe = peer && !peer->tpe_latency.empty() ? Quantile(peer->tpe_latency, 0.5) : std::nan("");
    const auto range = [](const std::vector<double>& seconds) {
      return fmt::format("[{}, {}]", FormatSeconds(*std::min_element(seconds.begin(), seconds.end())),
                         FormatSeconds(*std::max_element(seconds.begin(), seconds.end())));
    };
    if (!gp_latency.empty()) {
      std::printf("  dltune gp:   %-10s %-22s SuggestFromHistory; goal < %s: %s\n", FormatSeconds(gp).c_str(),
                  range(gp_latency).c_str(), FormatSeconds(kLatencyGoal).c_str(),
                  gp < kLatencyGoal ? "met" : "NOT met");
      latency["gp"] = {{"seconds", gp_latency}, {"median", gp}, {"met", gp < kLatencyGoal}};
    }
    if (!std::isnan(tpe)) {
      std::printf("  Optuna TPE:  %-10s %-22s study.ask() sampling the 6 params\n", FormatSeconds(tpe).c_str(),
                  range(peer->tpe_latency).c_str());
      latency["tpe"] = {{"seconds", peer->tpe_latency}, {"median", tpe}};
    }
    if (!std::isnan(gp) && !std::isnan(tpe)) std::printf("  ratio gp / TPE: %.2fx\n", gp / tpe);
  }

  std::printf("\nwall time of the runs (sum over runs; %d jobs at once):", options.jobs);
  for (const auto& sampler : options.samplers) {
    if (!seconds_per_sampler.contains(sampler)) continue;
    const double total = seconds_per_sampler[sampler];
    const auto count = std::count_if(runs.begin(), runs.end(), [&](const Run& r) { return r.sampler == sampler; });
    std::printf("\n  %-15s %8.1f s  (%.2f s per run, %.2f ms per evaluation)", SamplerLabel(sampler).c_str(), total,
                total / static_cast<double>(count), 1000 * total / static_cast<double>(count) / options.evals);
  }
  std::printf("\n  phases: ");
  for (const auto& [side, seconds] : sampler_seconds) std::printf("%s %.1f s  ", side.c_str(), seconds);
  std::printf("\n");

  if (!options.json_file.empty()) {
    Json all_runs = Json::array();
    for (const Run& run : runs) all_runs.push_back(RunJson(run));
    const Json out = {{"seeds", options.seeds},
                      {"evals", options.evals},
                      {"checkpoints", checkpoints},
                      {"summary", summary},
                      {"goals", goals},
                      {"latency", latency},
                      {"runs", all_runs},
                      {"optuna", peer ? peer->optuna_version : ""}};
    std::ofstream(options.json_file) << out.dump(2) << "\n";
  }
  if (!ran) std::fprintf(stderr, "some runs could not run (see above)\n");
  return ran ? 0 : 1;
}
