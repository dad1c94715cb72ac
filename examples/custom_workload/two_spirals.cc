// Trains the two_spirals workload (two_spirals.h) with dltune's trainer: one trial alone, then four trials with
// their own optimizers and learning rates fused into one array model, each checked against the same trial trained
// alone. Exit status 0 when the lone trial learned the spirals and every fused member equals its lone trial.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "dltune/workloads/train.h"
#include "two_spirals.h"

namespace {

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

dltune::HyperParams Params(const std::string& optimizer, double learning_rate) {
  return dltune::HyperParams(nlohmann::json::object(), {{"optimizer", dltune::Value(optimizer)},
                                                        {"learning_rate", dltune::Value(learning_rate)},
                                                        {"width", dltune::Value(std::int64_t{64})},
                                                        {"batch_size", dltune::Value(std::int64_t{64})}});
}

// Four trials trained as one fused group, then each alone: true when every member's result is its lone trial's.
bool FusedMembersEqualTheirLoneTrials(dltune::TrainerOptions options) {
  options.checkpoint_dir.clear();
  // The validation loss as the objective: a best value of many bits to compare.
  options.objective = {"valid", "loss", dltune::Direction::kMinimize};
  std::vector<dltune::FusedMember> members;
  const std::vector<std::pair<std::string, double>> optimizers = {
      {"adam", 0.003}, {"adam", 0.01}, {"nesterov", 0.05}, {"nesterov", 0.2}};
  for (std::size_t m = 0; m < optimizers.size(); ++m) {
    members.push_back(
        {.params = Params(optimizers[m].first, optimizers[m].second), .init_seed = 10 + m, .data_seed = 20 + m});
  }
  dltune::MemberCallbacks quiet;
  const std::vector<dltune::TrainResult> fused =
      dltune::TrainFusedTrials("two_spirals", nlohmann::json::object(), members, options, quiet);
  bool equal = true;
  for (std::size_t m = 0; m < members.size(); ++m) {
    options.init_seed = members[m].init_seed;
    options.data_seed = members[m].data_seed;
    dltune::TrainerCallbacks none;
    const dltune::TrainResult alone =
        dltune::Train("two_spirals", nlohmann::json::object(), members[m].params, options, none);
    const bool same = fused[m].outcome == alone.outcome && fused[m].best_step == alone.best_step &&
                      fused[m].best_value == alone.best_value && fused[m].final_value == alone.final_value;
    std::printf("fused member %zu (%s, learning rate %g): best valid loss %.6f at step %lld, %s its lone trial\n", m,
                optimizers[m].first.c_str(), optimizers[m].second, fused[m].best_value.value_or(NAN),
                static_cast<long long>(fused[m].best_step.value_or(0)), same ? "as" : "NOT as");
    equal = equal && same;
  }
  return equal;
}

}  // namespace

int main() {
  two_spirals::Register();

  dltune::TrainerOptions options;
  options.max_train_steps = 1500;
  options.training.eval_every_steps = 500;
  options.training.threads = 1;
  options.checkpoint_dir = (std::filesystem::temp_directory_path() / "two_spirals_checkpoints").string();
  std::filesystem::remove_all(options.checkpoint_dir);
  Printer printer;
  const dltune::TrainResult result =
      dltune::Train("two_spirals", nlohmann::json::object(), Params("adam", 0.01), options, printer);
  std::printf("two_spirals: best valid error %.3f at step %lld\n", result.best_value.value_or(1.0),
              static_cast<long long>(result.best_step.value_or(0)));
  std::filesystem::remove_all(options.checkpoint_dir);

  const bool fused = FusedMembersEqualTheirLoneTrials(options);
  std::printf("two_spirals fused: %s\n", fused ? "4 trials in one group, each as its lone trial" : "members differ");
  return result.best_value.value_or(1.0) < 0.1 && fused ? 0 : 1;
}
