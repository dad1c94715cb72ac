// A user's own LibTorch training loop in a dltune study, through the ask/tell API: open the study (created from
// its spec if needed), ask for trials until none is left, report training losses, evaluations and checkpoints,
// and tell how each trial ended. Any number of copies of this program, on any number of machines sharing a
// PostgreSQL store, share the study's trials; none is trained twice.
//
//   sine_ask_tell SPEC [STORE_URL]      (default store: $DLTUNE_STORAGE, else ./dltune.db)
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <torch/torch.h>

#include "dltune/run/study_session.h"
#include "dltune/store/store.h"

namespace {

// sin(x) on [-pi, pi] with a little noise; the same points for every trial.
std::pair<torch::Tensor, torch::Tensor> Data(std::int64_t count, std::uint64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor x = torch::rand({count, 1}) * 2 * M_PI - M_PI;
  return {x, torch::sin(x) + torch::randn({count, 1}) * 0.05};
}

// Trains one trial; returns false when the loss diverged.
bool TrainTrial(dltune::ActiveTrial& trial, std::int64_t max_steps, std::int64_t eval_every,
                const std::filesystem::path& checkpoints) {
  const auto params = trial.ParamsByName();
  const auto width = std::get<std::int64_t>(params.at("width"));
  const double learning_rate = std::get<double>(params.at("learning_rate"));
  torch::manual_seed(trial.record().seed);
  torch::nn::Sequential model(torch::nn::Linear(1, width), torch::nn::Tanh(), torch::nn::Linear(width, width),
                              torch::nn::Tanh(), torch::nn::Linear(width, 1));
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(learning_rate));
  const auto [train_x, train_y] = Data(1024, 1);
  const auto [valid_x, valid_y] = Data(256, 2);

  trial.Begin(0);  // this program does not resume from checkpoints: it always starts at step 0
  for (std::int64_t step = 1; step <= max_steps; ++step) {
    const torch::Tensor batch = torch::randint(0, train_x.size(0), {64}, torch::kLong);
    optimizer.zero_grad();
    const torch::Tensor loss = torch::mse_loss(model->forward(train_x.index({batch})), train_y.index({batch}));
    loss.backward();
    optimizer.step();
    const double value = loss.item<double>();
    if (!std::isfinite(value)) {
      trial.Infeasible("the training loss is not finite at step " + std::to_string(step));
      return false;
    }
    trial.ReportTrain({.step = step, .loss = value, .learning_rate = learning_rate});
    if (step % eval_every == 0 || step == max_steps) {
      torch::NoGradGuard no_grad;
      const double valid = torch::mse_loss(model->forward(valid_x), valid_y).item<double>();
      trial.ReportEval(step, "valid", {{"loss", valid}}, valid_x.size(0));
      const auto path = checkpoints / ("step_" + std::to_string(step) + ".pt");
      torch::save(model, path.string());
      trial.ReportCheckpoint({.step = step, .path = path.string(), .objective = valid});
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SPEC [STORE_URL]\n", argv[0]);
    return 2;
  }
  try {
    const dltune::StudySpec spec = dltune::LoadStudySpec(argv[1]);
    const auto store = dltune::OpenStore(argc > 2 ? argv[2] : dltune::DefaultStoreUrl());
    dltune::StudySession session = dltune::StudySession::OpenOrCreate(*store, spec, "sine_ask_tell " + spec.file);
    const std::string worker = dltune::DefaultWorkerId();
    torch::set_num_threads(1);
    int trained = 0;
    while (auto trial = session.Ask(worker)) {
      // The trial's own directory: <run_dir>/<study uid>/trial_<n>, never shared with another study.
      const auto checkpoints = dltune::TrialDirectory(spec, session.study(), trial->number());
      std::filesystem::create_directories(checkpoints);
      if (TrainTrial(*trial, spec.max_train_steps, spec.training.eval_every_steps, checkpoints)) trial->Complete();
      std::printf("trial %llu (%s): best valid/loss %.4f at step %lld\n",
                  static_cast<unsigned long long>(trial->number()), trial->record().substudy_label.c_str(),
                  trial->best_value().value_or(NAN), static_cast<long long>(trial->best_step().value_or(0)));
      ++trained;
    }
    std::printf("sine_ask_tell: trained %d trials; no trial left\n", trained);
  } catch (const dltune::Error& e) {
    std::fprintf(stderr, "sine_ask_tell: %s\n", e.what());
    return 1;
  }
  return 0;
}
