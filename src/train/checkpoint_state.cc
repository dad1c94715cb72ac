#include "checkpoint_state.h"

#include <cmath>
#include <sstream>

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

std::string WriteTrainingState(const torch::nn::Module& model,
                               const std::function<void(torch::serialize::OutputArchive&)>& save_optimizer,
                               const TrainingProgress& progress, std::int64_t threads,
                               const std::function<void(torch::serialize::OutputArchive&)>& more) {
  torch::serialize::OutputArchive archive;
  torch::serialize::OutputArchive model_archive;
  model.save(model_archive);
  archive.write("model", model_archive);
  torch::serialize::OutputArchive optimizer_archive;
  save_optimizer(optimizer_archive);
  archive.write("optimizer", optimizer_archive);
  WriteProgress(archive, progress, threads);
  if (more) more(archive);
  std::ostringstream bytes;
  archive.save_to(bytes);
  return std::move(bytes).str();
}

TrainingProgress ReadTrainingState(const std::string& bytes, c10::optional<torch::Device> device,
                                   torch::nn::Module& model,
                                   const std::function<void(torch::serialize::InputArchive&)>& load_optimizer,
                                   torch::serialize::InputArchive& archive) {
  std::istringstream in(bytes);
  archive.load_from(in, device);
  torch::serialize::InputArchive model_archive;
  archive.read("model", model_archive);
  model.load(model_archive);
  torch::serialize::InputArchive optimizer_archive;
  archive.read("optimizer", optimizer_archive);
  load_optimizer(optimizer_archive);
  return ReadProgress(archive);
}

}  // namespace dltune
