#include "gpu/gpu_packing_cache.h"

#include <gtest/gtest.h>

#include <fstream>

#include "gpu/gpu_test_util.h"
#include "gpu/machine_cache.h"

namespace dltune {
namespace {

nlohmann::json FirstTrial(double learning_rate, std::int64_t batch_size) {
  return {{"workload", {{"name", "fashion_mnist_mlp"}, {"args", {{"hidden_sizes", {256}}}}}},
          {"training", {{"cuda_graph", "auto"}, {"fuse", "off"}}},
          {"params", {{"learning_rate", learning_rate}, {"batch_size", batch_size}, {"optimizer", "adam"}}},
          {"seed", 7}};
}

// A packing is the training's on a kind of GPU: the hyperparameters a study's trials differ in (the learning rate,
// the optimizer) do not change it; the batch size, the GPU's model, its driver and MPS do.
TEST(GpuPackingCache, KeysTheTrainingNotTheHyperparametersTrialsDifferIn) {
  const auto key = [](double lr, std::int64_t batch, const std::string& gpu, bool mps) {
    return PackingKey(FirstTrial(lr, batch), "", gpu, "580.159.04", mps);
  };
  EXPECT_EQ(key(0.1, 128, "H200", false), key(0.001, 128, "H200", false));
  EXPECT_NE(key(0.1, 128, "H200", false), key(0.1, 256, "H200", false));
  EXPECT_NE(key(0.1, 128, "H200", false), key(0.1, 128, "H100", false));
  EXPECT_NE(key(0.1, 128, "H200", false), key(0.1, 128, "H200", true));
  EXPECT_FALSE(key(0.1, 128, "H200", false)["params"].contains("optimizer"));
  EXPECT_NE(PackingKey(FirstTrial(0.1, 128), "python train.py", "H200", "580.159.04", false),
            PackingKey(FirstTrial(0.1, 128), "python other.py", "H200", "580.159.04", false))
      << "one program's packing is not another's";
}

// Both machine caches key the training alike: a packing's key is the training's identity plus the GPU it ran on.
TEST(GpuPackingCache, KeysATrainingAsTheLayoutCacheDoes) {
  const nlohmann::json identity = TrainingIdentity(FirstTrial(0.1, 128), "");
  EXPECT_EQ(identity, TrainingIdentity(FirstTrial(0.001, 128), "")) << "the learning rate is not the training's";
  EXPECT_NE(identity, TrainingIdentity(FirstTrial(0.1, 256), ""));
  EXPECT_FALSE(identity.contains("seed")) << "a trial's seed does not change its speed";
  nlohmann::json longer = FirstTrial(0.1, 128);
  longer["training"]["eval_every_steps"] = 400;  // a longer study evaluates less often: its steps are as fast
  EXPECT_EQ(identity, TrainingIdentity(longer, ""));
  nlohmann::json graphed = FirstTrial(0.1, 128);
  graphed["training"]["cuda_graph"] = "true";
  EXPECT_NE(identity, TrainingIdentity(graphed, ""));
  nlohmann::json key = PackingKey(FirstTrial(0.1, 128), "", "H200", "580.159.04", false);
  for (const char* gpu_part : {"gpu", "driver", "mps"}) key.erase(gpu_part);
  EXPECT_EQ(key, identity);
}

TEST(GpuPackingCache, KeepsAPackingAndGivesItBackForItsKeyOnly) {
  test::TempDir dir;
  const std::filesystem::path file = dir.dir() / "cache" / "gpu-packings.json";
  const nlohmann::json key = PackingKey(FirstTrial(0.1, 128), "", "H200", "580.159.04", false);
  const nlohmann::json other = PackingKey(FirstTrial(0.1, 64), "", "H200", "580.159.04", false);
  EXPECT_FALSE(CachedPacking(file, key)) << "no file yet";
  StorePacking(file, key, 16);
  StorePacking(file, other, 8);
  EXPECT_EQ(CachedPacking(file, key), 16);
  EXPECT_EQ(CachedPacking(file, other), 8);
  StorePacking(file, key, 12);  // measured again
  EXPECT_EQ(CachedPacking(file, key), 12);
  std::ofstream(file) << "{not json";
  EXPECT_FALSE(CachedPacking(file, key)) << "an unreadable file is measured again";
  StorePacking(file, key, 4);
  EXPECT_EQ(CachedPacking(file, key), 4);
}

}  // namespace
}  // namespace dltune
