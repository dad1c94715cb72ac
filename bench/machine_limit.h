// The machine's limit for the benchmarks that train the Fashion-MNIST MLP (bench/train_bench.cc and
// bench/runner_bench.cc): what the hardware could do with the arithmetic they run, so that each can print its figures
// as a share of it.
//
// - the CPU model ("model name" of /proc/cpuinfo) and the cores this process may run on;
// - the OpenBLAS kernel set a process runs, from the "Core: NAME" line OpenBLAS prints when it loads with
//   OPENBLAS_VERBOSE=2 (it reads OPENBLAS_CORETYPE only then, so each kernel set is measured in a fresh process);
// - float32 matrix products (sgemm through torch::mm, one thread per process) at the shapes the MLP's training steps
//   and evaluations run, as LibTorch's Linear layers pass them to the BLAS (an operand stored transposed where they
//   give one), and 2048 x 2048 x 2048 for reference; on 1 core (one process) and on all cores (one process per core
//   at once, their GFLOP/s summed, as a study's single-thread trial processes run side by side). Each product runs in
//   3 windows of 0.4 s, the same windows in every process (they start together after loading LibTorch and a
//   warm-up); the figure is the best window's: products done x 2 m k n FLOP / seconds. Each process also reports the
//   CPU seconds it got per second: below 1, other load shared its core, and the GFLOP/s over that share (per CPU
//   second) estimate what the hardware does;
// - the seconds a study's work (training steps and evaluated examples) needs at those speeds: the sum over its
//   products of their FLOP / GFLOP/s. This counts the products only, none of the element-wise work around them (bias,
//   ReLU, loss, optimizer update), so it is a limit no trainer reaches.
// The child-process helpers both benchmarks use to run and time dltune and the peers are here too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dltune::bench {

// ---- child processes ----------------------------------------------------------------------------------------

// Variables set in a child process's environment, beside those it inherits.
using Environment = std::vector<std::pair<std::string, std::string>>;

// A finished child process: exit status and its stdout+stderr lines, each with the seconds since spawn it arrived at.
struct ProcessRun {
  int status = -1;  // exit status, or -1 when killed by a signal
  double wall_seconds = 0;
  std::vector<std::pair<double, std::string>> lines;
  std::string Output() const;
};

// Runs argv[0] (found on PATH) with its stdout and stderr piped to us; returns when it has exited. Lines are
// timestamped on arrival.
ProcessRun RunTimed(const std::vector<std::string>& argv, const Environment& environment);

// "NAME=value " for printing before a command.
std::string EnvironmentText(const Environment& environment);

// The environment plus OPENBLAS_VERBOSE=2: OpenBLAS then prints "Core: NAME" when it loads (and nothing else).
Environment WithCoreReport(Environment environment);

// The kernel set of the last "Core: NAME" line of `text` (a restarted dltune prints two); empty when none.
std::string CoreIn(std::string_view text);
std::string CoreOf(const ProcessRun& run);

// ---- the MLP's products -------------------------------------------------------------------------------------

// C (m x n) = A (m x k) B (k x n) in float32.
struct Gemm {
  std::string name;
  std::int64_t m = 0;
  std::int64_t k = 0;
  std::int64_t n = 0;
  bool a_transposed = false;  // A is a view of a stored k x m matrix, as a weight gradient's A is
  bool b_transposed = false;  // B is a view of a stored n x k matrix, as a forward product's weight is
  double Flop() const { return 2.0 * static_cast<double>(m) * static_cast<double>(k) * static_cast<double>(n); }
};

// The MLP inputs-hidden-outputs (one hidden layer) dltune's fashion_mnist_mlp and the peers train.
struct Mlp {
  std::int64_t inputs = 784;
  std::int64_t hidden = 256;
  std::int64_t outputs = 10;
  std::int64_t batch = 128;
  std::int64_t eval_batch = 256;  // dltune's default: twice the training batch

  double Weights() const;
  // The products of one training step: both layers' forward and weight gradients, and the output layer's input
  // gradient (the hidden layer's is never computed: the input needs no gradient).
  std::vector<Gemm> TrainStep() const;
  // The products of one evaluation batch (forward only).
  std::vector<Gemm> EvalBatch() const;
  // Every product measured: those of TrainStep and EvalBatch, and the 2048-cube reference.
  std::vector<Gemm> Measured() const;
  // FLOP of one training step by the usual count, 6 x batch x weights (forward 2 FLOP per multiply-add, backward
  // twice the forward); TrainStep's products are fewer, the hidden layer's input gradient not being computed.
  double TrainStepFormulaFlop() const;
  double TrainStepProductFlop() const;
  // FLOP of one evaluated example: 2 x weights.
  double EvalExampleFlop() const;
};

// What a training run or a study did with the MLP.
struct MlpWork {
  double train_steps = 0;
  double eval_examples = 0;
};

// GFLOP/s of each product in one kernel set on `processes` processes at once (summed over them).
struct SgemmRates {
  std::string core;  // OpenBLAS's "Core:" line in the measuring processes; empty when none printed one
  int processes = 1;
  std::map<std::string, double> gflops;  // by Gemm::name
  // CPU seconds per wall second of a measuring process in its windows: the mean over processes and windows (below 1
  // when other load shared its core) and the most of any (above 1 for a process that ran more than one thread).
  double cpu_share = 0;
  double cpu_share_most = 0;
  std::string problem;  // why it could not be measured; empty when it was

  // Seconds `work` needs at these rates: the sum of its products' FLOP / GFLOP/s (nullopt when one is missing). With
  // `per_cpu_second`, at the rates divided by cpu_share: what the processes would have done with a core each, the
  // hardware's speed when other load shared the cores while measuring.
  std::optional<double> Seconds(const Mlp& mlp, const MlpWork& work, bool per_cpu_second = false) const;
};

// Measures `gemms` in `processes` copies of this binary run with kSgemmWorkerFlag and `environment`.
SgemmRates MeasureSgemm(const std::vector<Gemm>& gemms, const Environment& environment, int processes);

// The hidden mode of a benchmark binary that MeasureSgemm runs: main() calls RunSgemmWorker when argv[1] is this.
inline constexpr char kSgemmWorkerFlag[] = "--sgemm-worker";
int RunSgemmWorker(int argc, char** argv);

// ---- the machine's limit ------------------------------------------------------------------------------------

// A side of a benchmark and the environment its training processes get (OPENBLAS_CORETYPE when chosen).
struct KernelUser {
  std::string who;
  Environment environment;
};

// A measuring process that got less of its core than this shared it with other load.
inline constexpr double kIdleCpuShare = 0.9;

// The products measured in each kernel set the sides use, on 1 core and on all cores.
struct MachineLimit {
  struct KernelSet {
    std::string core;  // as OpenBLAS reports it
    std::vector<std::string> users;
    SgemmRates one_core;
    SgemmRates all_cores;
  };
  std::string cpu;
  int cores = 1;
  Mlp mlp;
  std::vector<KernelSet> sets;

  // The kernel set whose rates need the fewest seconds for `work` (the machine's limit), or null when none was
  // measured.
  const KernelSet* Fastest(const MlpWork& work, bool all_cores, bool per_cpu_second = false) const;
  const KernelSet* Find(const std::string& core) const;
  // Seconds `work` needs at the fastest kernel set's rates (SgemmRates::Seconds).
  std::optional<double> Seconds(const MlpWork& work, bool all_cores, bool per_cpu_second = false) const;
  // The least cpu_share of the measurements on 1 core or all cores: below kIdleCpuShare, other load shared the cores
  // while measuring, and the limit measured is below the hardware's.
  double CpuShare(bool all_cores) const;
  // Problems measuring, one line each; empty when everything was measured.
  std::string Problems() const;
};

// Measures the kernel sets of `users` (each distinct kernel set once) and prints what it measures as it goes.
MachineLimit MeasureMachineLimit(const Mlp& mlp, const std::vector<KernelUser>& users);

// Prints the CPU, the kernel sets and who uses them, the products' GFLOP/s and the FLOP and limit seconds of one
// training step and one evaluated example.
void PrintMachineLimit(const MachineLimit& limit);

}  // namespace dltune::bench
