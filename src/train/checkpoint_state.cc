#include "checkpoint_state.h"

#include <cmath>

namespace dltune {

void WriteProgress(torch::serialize::OutputArchive& archive, const TrainingProgress& progress, std::int64_t threads) {
  archive.write("step", torch::tensor(progress.step, torch::kLong));
  archive.write("best_step", torch::tensor(progress.best_step.value_or(-1), torch::kLong));
  archive.write("best_value", torch::tensor(progress.best_value.value_or(std::nan("")), torch::kDouble));
  archive.write("initial_loss", torch::tensor(progress.initial_loss.value_or(std::nan("")), torch::kDouble));
  archive.write("cpu_generator", progress.cpu_generator);
  archive.write("threads", torch::tensor(threads, torch::kLong));
}

TrainingProgress ReadProgress(torch::serialize::InputArchive& archive) {
  // Each read needs a fresh tensor: reading into a defined one replaces its storage.
  const auto read = [&](const char* key) {
    torch::Tensor value;
    archive.read(key, value);
    return value.to(torch::kCPU);
  };
  TrainingProgress progress;
  progress.step = read("step").item<std::int64_t>();
  if (const auto best_step = read("best_step").item<std::int64_t>(); best_step >= 0) progress.best_step = best_step;
  if (const auto best = read("best_value").item<double>(); !std::isnan(best)) progress.best_value = best;
  if (const auto initial = read("initial_loss").item<double>(); !std::isnan(initial)) progress.initial_loss = initial;
  progress.cpu_generator = read("cpu_generator");
  return progress;
}

}  // namespace dltune
