// A user's own workload: the two-spirals problem with a small MLP, registered under a name and trained with the
// playbook trainer (evaluation at step intervals, checkpoints, resume) — no change to dltune needed.
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <torch/torch.h>

#include "dltune/train/workload.h"
#include "dltune/workloads/registry.h"
#include "dltune/workloads/train.h"

namespace {

// Points on two interleaved spirals, labelled by spiral; a little noise.
dltune::Dataset Spirals(std::int64_t count, std::uint64_t seed) {
  torch::manual_seed(seed);
  const torch::Tensor t = torch::rand({count}) * 3 * M_PI + 0.5;
  const torch::Tensor label = torch::randint(0, 2, {count}, torch::kLong);
  const torch::Tensor sign = label.to(torch::kFloat) * 2 - 1;
  const torch::Tensor x = sign * t * torch::cos(t) / 10 + torch::randn({count}) * 0.02;
  const torch::Tensor y = sign * t * torch::sin(t) / 10 + torch::randn({count}) * 0.02;
  return {torch::stack({x, y}, 1), label};
}

class SpiralNet : public dltune::Model {
 public:
  explicit SpiralNet(std::int64_t width) {
    hidden1_ = register_module("hidden1", torch::nn::Linear(2, width));
    hidden2_ = register_module("hidden2", torch::nn::Linear(width, width));
    output_ = register_module("output", torch::nn::Linear(width, 2));
  }
  torch::Tensor Forward(const torch::Tensor& inputs) override {
    return output_->forward(torch::tanh(hidden2_->forward(torch::tanh(hidden1_->forward(inputs)))));
  }

 private:
  torch::nn::Linear hidden1_{nullptr}, hidden2_{nullptr}, output_{nullptr};
};

class TwoSpirals : public dltune::Workload {
 public:
  std::string name() const override { return "two_spirals"; }
  std::int64_t num_classes() const override { return 2; }
  const dltune::WorkloadData& Data() override {
    if (!data_) data_ = dltune::WorkloadData{Spirals(4000, 1), Spirals(1000, 2), Spirals(1000, 3)};
    return *data_;
  }
  // Reads its own hyperparameter: `width` of the hidden layers.
  std::shared_ptr<dltune::Model> BuildModel(const dltune::HyperParams& params) override {
    return std::make_shared<SpiralNet>(params.Int("width", 64));
  }

 private:
  std::optional<dltune::WorkloadData> data_;
};

// Prints each evaluation.
class Printer : public dltune::TrainerCallbacks {
 public:
  void OnEvaluation(std::int64_t step, const std::vector<dltune::EvalMetric>& metrics, std::int64_t, double) override {
    for (const auto& m : metrics) {
      if (m.split == "valid" && m.metric == "error_rate")
        std::printf("step %lld: valid error %.3f\n", static_cast<long long>(step), m.value);
    }
  }
};

}  // namespace

int main() {
  dltune::RegisterWorkload("two_spirals", [](const nlohmann::json&) { return std::make_unique<TwoSpirals>(); });

  dltune::TrainerOptions options;
  options.max_train_steps = 1500;
  options.training.eval_every_steps = 500;
  options.checkpoint_dir = (std::filesystem::temp_directory_path() / "two_spirals_checkpoints").string();
  std::filesystem::remove_all(options.checkpoint_dir);
  const dltune::HyperParams params(nlohmann::json::object(), {{"optimizer", dltune::Value(std::string("adam"))},
                                                              {"learning_rate", dltune::Value(0.01)},
                                                              {"width", dltune::Value(std::int64_t{64})},
                                                              {"batch_size", dltune::Value(std::int64_t{64})}});
  Printer printer;
  const dltune::TrainResult result = dltune::Train("two_spirals", nlohmann::json::object(), params, options, printer);
  std::printf("two_spirals: best valid error %.3f at step %lld\n", result.best_value.value_or(1.0),
              static_cast<long long>(result.best_step.value_or(0)));
  std::filesystem::remove_all(options.checkpoint_dir);
  return result.best_value.value_or(1.0) < 0.1 ? 0 : 1;
}
