#include "data_parallel_bench.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/files.h"
#include "core/machine.h"
#include "machine_limit.h"
#include "train/blas_kernels.h"

namespace dltune::bench {
namespace {

namespace fs = std::filesystem;

constexpr int kBatchSize = 128;  // the global batch, shared by the ranks
constexpr int kLogEvery = 50;    // steps per timed block on both sides

// A model both sides train, with its dltune arguments and its steps.
struct ModelSetting {
  std::string name;  // the peer's --model
  std::string workload;
  std::vector<std::string> sets;
  int steps = 0;
};

const std::vector<ModelSetting>& Models() {
  static const std::vector<ModelSetting> kModels = {
      {"mlp", "fashion_mnist_mlp", {"hidden_sizes=[256]"}, 1000},
      {"cnn", "fashion_mnist_cnn", {"conv_channels=[32,64]", "dense_size=128", "normalization=batch"}, 200},
  };
  return kModels;
}

// dltune's training steps/s: log_every over the median time of a logged block (metrics.jsonl's step_time is each
// step's share of its block), the first block (warm-up) left out.
std::optional<double> DltuneStepsPerSecond(const ModelSetting& model, int processes, const fs::path& out,
                                           std::string& problem) {
  std::vector<std::string> argv = {DLTUNE_CLI_PATH, "train", model.workload};
  for (const std::string& set : model.sets) argv.insert(argv.end(), {"--set", set});
  const std::vector<std::string> flags = {"--set",
                                          "optimizer=nesterov",
                                          "--set",
                                          "learning_rate=0.05",
                                          "--set",
                                          "momentum=0.9",
                                          "--set",
                                          "batch_size=" + std::to_string(kBatchSize),
                                          "--steps",
                                          std::to_string(model.steps),
                                          "--eval-every",
                                          std::to_string(model.steps),
                                          "--log-every",
                                          std::to_string(kLogEvery),
                                          "--train-eval-examples",
                                          "1000",
                                          "--threads",
                                          "1",
                                          "--processes",
                                          std::to_string(processes),
                                          "--out",
                                          out.string()};
  for (const std::string& arg : flags) {
    argv.push_back(arg);
  }
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  std::printf("  %s\n", command.c_str());
  const ProcessRun run = RunTimed(argv, {});
  if (run.status != 0) {
    problem = "dltune train exited with status " + std::to_string(run.status) + ":\n" + run.Output();
    return std::nullopt;
  }
  std::map<std::int64_t, double> block_seconds;  // by block
  std::ifstream metrics(out / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.value("type", "") != "train") continue;
    const std::int64_t step = record.value("step", std::int64_t{0});
    block_seconds[(step - 1) / kLogEvery] += record.value("step_time", 0.0);
  }
  std::vector<double> blocks;
  for (const auto& [block, seconds] : block_seconds) {
    if (block > 0) blocks.push_back(seconds);
  }
  if (blocks.empty()) {
    problem = "no training lines in " + (out / "metrics.jsonl").string();
    return std::nullopt;
  }
  std::nth_element(blocks.begin(), blocks.begin() + static_cast<std::ptrdiff_t>(blocks.size() / 2), blocks.end());
  return kLogEvery / blocks[blocks.size() / 2];
}

std::optional<double> PytorchStepsPerSecond(const ModelSetting& model, int processes, std::string& problem) {
  const char* python = std::getenv("DLTUNE_PYTHON");
  const std::string interpreter =
      python != nullptr && *python ? python : (fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3");
  const std::vector<std::string> argv = {interpreter,    std::string(DLTUNE_SOURCE_DIR) + "/bench/peers/pytorch_ddp.py",
                                         "--model",      model.name,
                                         "--processes",  std::to_string(processes),
                                         "--steps",      std::to_string(model.steps),
                                         "--batch-size", std::to_string(kBatchSize),
                                         "--log-every",  std::to_string(kLogEvery)};
  std::string command;
  for (const std::string& arg : argv) command += (command.empty() ? "" : " ") + arg;
  std::printf("  %s\n", command.c_str());
  const ProcessRun run = RunTimed(argv, {});
  for (const auto& [at, line] : run.lines) {
    const auto key = line.find(" steps_per_second=");
    if (run.status == 0 && line.starts_with("pytorch_ddp ") && key != std::string::npos) {
      return std::stod(line.substr(key + 18));
    }
  }
  problem = "the PyTorch peer exited with status " + std::to_string(run.status) + ":\n" + run.Output();
  return std::nullopt;
}

std::string Figure(const std::optional<double>& value, const char* format) {
  if (!value) return "-";
  char text[64];
  std::snprintf(text, sizeof(text), format, *value);
  return text;
}

}  // namespace

int RunDataParallelBench(const DataParallelBenchOptions& options, const char* argv0) {
  (void)argv0;
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (fs::path(tmp != nullptr && *tmp ? tmp : "/tmp") / "dltune_bench_dp.XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) {
    std::fprintf(stderr, "train bench: cannot create %s: %s\n", pattern.c_str(), std::strerror(errno));
    return 1;
  }
  const fs::path dir = pattern;
  std::printf(
      "dltune data-parallel bench: global batch %d, Nesterov, 1 thread per process, on %s (%d cores, OpenBLAS %s "
      "kernels, OPENBLAS_CORETYPE %s); dltune train --processes P against PyTorch DistributedDataParallel (gloo, "
      "127.0.0.1); steps/s from the median block of %d steps, best of %d run(s) per side\n",
      kBatchSize, CpuModelName().c_str(), AvailableCores(), OpenBlasCore().c_str(),
      std::getenv("OPENBLAS_CORETYPE") ? std::getenv("OPENBLAS_CORETYPE") : "unset", kLogEvery, options.repeats);
  bool failed = false;
  struct Row {
    std::optional<double> dltune, pytorch;
  };
  std::map<std::string, std::map<int, Row>> rows;
  for (const ModelSetting& model : Models()) {
    for (const int processes : options.processes) {
      Row& row = rows[model.name][processes];
      for (int repeat = 0; repeat < options.repeats; ++repeat) {
        std::string problem;
        const fs::path out = dir / (model.name + "_" + std::to_string(processes) + "_" + std::to_string(repeat));
        if (const auto sps = DltuneStepsPerSecond(model, processes, out, problem)) {
          row.dltune = std::max(row.dltune.value_or(0), *sps);
        } else {
          std::printf("  %s\n", problem.c_str());
          failed = true;
        }
        if (const auto sps = PytorchStepsPerSecond(model, processes, problem)) {
          row.pytorch = std::max(row.pytorch.value_or(0), *sps);
        } else {
          std::printf("  %s\n", problem.c_str());
          failed = true;
        }
      }
    }
  }
  std::printf("\n%-5s %9s %14s %11s %15s %11s %15s\n", "model", "processes", "dltune steps/s", "efficiency",
              "PyTorch steps/s", "efficiency", "dltune/PyTorch");
  for (const auto& [model, by_processes] : rows) {
    const Row& one = by_processes.begin()->second;
    const int base = by_processes.begin()->first;
    for (const auto& [processes, row] : by_processes) {
      const auto efficiency = [&](const std::optional<double>& value, const std::optional<double>& baseline) {
        return value && baseline ? std::optional<double>(*value / *baseline * base / processes) : std::nullopt;
      };
      const std::optional<double> ratio =
          row.dltune && row.pytorch ? std::optional<double>(*row.dltune / *row.pytorch) : std::nullopt;
      std::printf("%-5s %9d %14s %11s %15s %11s %15s\n", model.c_str(), processes, Figure(row.dltune, "%.1f").c_str(),
                  Figure(efficiency(row.dltune, one.dltune), "%.2f").c_str(), Figure(row.pytorch, "%.1f").c_str(),
                  Figure(efficiency(row.pytorch, one.pytorch), "%.2f").c_str(), Figure(ratio, "%.2fx").c_str());
    }
  }
  std::printf(
      "efficiency: steps/s at P processes over steps/s at %d, times %d / P (1.00: each process added trains as fast "
      "as the first)\n",
      options.processes.front(), options.processes.front());
  if (!options.keep) dltune::RemoveTree(dir);
  return failed ? 1 : 0;
}

}  // namespace dltune::bench
