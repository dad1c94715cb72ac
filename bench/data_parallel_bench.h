// `dltune_bench_train --processes LIST`: data-parallel training of the Fashion-MNIST MLP and CNN by `dltune train
// --processes P` against PyTorch's DistributedDataParallel over gloo (bench/peers/pytorch_ddp.py), for each P, in the
// same run: steps/s, scaling efficiency (steps/s at P over steps/s at 1, divided by P) and dltune's ratio.
#pragma once

#include <string>
#include <vector>

namespace dltune::bench {

struct DataParallelBenchOptions {
  std::vector<int> processes = {1, 2};
  int repeats = 1;  // each side's fastest of this many runs
  bool keep = false;
};

// Runs the comparison and prints its tables; returns the exit status (0: everything ran, 1: something could not).
int RunDataParallelBench(const DataParallelBenchOptions& options, const char* argv0);

}  // namespace dltune::bench
