// ScrambledHalton throughput in 8 dims, side by side with scipy.stats.qmc.Halton(d=8, scramble=True).
//
// Runs the Google Benchmark cases, then the peer script bench/peers/scipy_halton.py for the same batch size, and
// prints one summary line with both rates and their ratio. Exits 1 if the peer cannot run (no python3 or no scipy)
// or if dltune is below its target. The interpreter is $DLTUNE_PYTHON, else /usr/bin/python3 (Debian's, which has
// python3-scipy), else python3 on PATH.
#include <benchmark/benchmark.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "search/halton.h"

namespace {

constexpr std::size_t kDims = 8;
constexpr std::int64_t kSummaryBatch = 1 << 16;  // the batch compared with scipy
constexpr double kTargetPointsPerSecond = 1e6;

// Constructing the sequence and filling a batch of points (what scipy's Halton(...).random(n) does).
void BM_ScrambledHalton8d(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<double> points(n * kDims);
  std::uint64_t seed = 0;
  for (auto _ : state) {
    const dltune::ScrambledHalton halton(kDims, seed++);
    for (std::size_t i = 0; i < n; ++i) halton.Point(i, std::span<double>(points).subspan(i * kDims, kDims));
    benchmark::DoNotOptimize(points.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_ScrambledHalton8d)
    ->Arg(1 << 10)
    ->Arg(kSummaryBatch)
    ->Arg(1 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// Console output as usual, plus the points/s of the batch compared with scipy.
class CapturingReporter : public benchmark::ConsoleReporter {
 public:
  // Colors only on a terminal (a custom display reporter does not see --benchmark_color).
  CapturingReporter() : ConsoleReporter(isatty(fileno(stdout)) ? OO_ColorTabular : OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.run_type == Run::RT_Iteration && !run.error_occurred &&
          run.benchmark_name() == "BM_ScrambledHalton8d/" + std::to_string(kSummaryBatch) + "/real_time") {
        const auto it = run.counters.find("items_per_second");
        if (it != run.counters.end()) points_per_second = it->second.value;
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::optional<double> points_per_second;
};

std::string FindPeerScript(const char* argv0) {
  const std::filesystem::path in_source = std::filesystem::path(DLTUNE_SOURCE_DIR) / "bench/peers/scipy_halton.py";
  if (std::filesystem::exists(in_source)) return in_source.string();
  // Installed or relocated: look beside the binary and one level up.
  const std::filesystem::path binary_dir = std::filesystem::absolute(argv0).parent_path();
  for (const auto& candidate :
       {binary_dir / "peers/scipy_halton.py", binary_dir.parent_path() / "bench/peers/scipy_halton.py"}) {
    if (std::filesystem::exists(candidate)) return candidate.string();
  }
  return {};
}

std::string PythonInterpreter() {
  if (const char* configured = std::getenv("DLTUNE_PYTHON"); configured != nullptr && *configured != '\0') {
    return configured;
  }
  if (std::filesystem::exists("/usr/bin/python3")) return "/usr/bin/python3";
  return "python3";
}

// Runs the peer and returns its points/s, or nullopt after printing why not.
std::optional<double> RunScipyPeer(const char* argv0) {
  const std::string script = FindPeerScript(argv0);
  if (script.empty()) {
    std::fprintf(stderr, "halton bench: peer script bench/peers/scipy_halton.py not found\n");
    return std::nullopt;
  }
  // Appended piecewise: GCC 12 gives a false -Wrestrict for "literal" + std::string at -O3.
  std::string command = "'";
  command += PythonInterpreter();
  command += "' '";
  command += script;
  command += "' --dims ";
  command += std::to_string(kDims);
  command += " --n ";
  command += std::to_string(kSummaryBatch);
  command += " --repeats 5";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    std::fprintf(stderr, "halton bench: cannot run %s\n", command.c_str());
    return std::nullopt;
  }
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  const int wait_status = pclose(pipe);
  const int status = WIFEXITED(wait_status) ? WEXITSTATUS(wait_status) : -1;
  const std::string key = "points_per_second=";
  const std::size_t at = output.find(key);
  if (status != 0 || at == std::string::npos) {
    std::fprintf(stderr,
                 "halton bench: the scipy peer failed (exit status %d) running: %s\n%s"
                 "halton bench: python3 with python3-scipy is required for the comparison "
                 "(apt-get install python3-scipy, or set DLTUNE_PYTHON to an interpreter that has scipy)\n",
                 status, command.c_str(), output.c_str());
    return std::nullopt;
  }
  std::printf("peer: %s", output.c_str());
  return std::stod(output.substr(at + key.size()));
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  CapturingReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  if (!reporter.points_per_second) {
    std::printf("halton 8-d: the %lld-point batch was filtered out; no comparison with scipy\n",
                static_cast<long long>(kSummaryBatch));
    return 0;
  }
  const double dltune = *reporter.points_per_second;
  const std::optional<double> scipy = RunScipyPeer(argv[0]);
  if (!scipy) return 1;
  std::printf("halton 8-d: dltune %.1f M points/s, scipy %.2f M points/s, ratio %.1fx (target >= %.0f M points/s)%s\n",
              dltune / 1e6, *scipy / 1e6, dltune / *scipy, kTargetPointsPerSecond / 1e6,
              dltune >= kTargetPointsPerSecond ? "" : "  BELOW TARGET");
  return dltune >= kTargetPointsPerSecond ? 0 : 1;
}
