#include "train/synthetic_data.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "core/rng.h"
#include "dltune/core/error.h"

namespace dltune {
namespace {

constexpr std::int64_t kClustersPerClass = 2;
// Expected distance of a cluster center from the origin, in units of the noise's standard deviation.
constexpr double kCenterRadius = 4.0;

// An approximately standard normal number: the Irwin-Hall sum of 12 uniforms minus 6 (additions only, so the
// result is the same on every platform; its tails stop at +-6, which a toy problem does not miss).
double StandardNormal(Rng& rng) {
  double sum = 0;
  for (int i = 0; i < 12; ++i) sum += rng.Uniform();
  return sum - 6.0;
}

}  // namespace

Dataset MakeSyntheticClassification(std::int64_t examples, std::int64_t features, std::int64_t classes,
                                    std::uint64_t seed) {
  if (examples < 0 || features < 1 || classes < 2) {
    throw Error(fmt::format(
        "synthetic data: need examples >= 0, features >= 1 and classes >= 2, not {} examples, {} features, {} classes",
        examples, features, classes));
  }
  const auto width = static_cast<std::size_t>(features);
  // Centers: independent normal coordinates scaled so the expected squared norm is kCenterRadius^2.
  const double scale = kCenterRadius / std::sqrt(static_cast<double>(features));
  std::vector<float> centers(static_cast<std::size_t>(classes * kClustersPerClass) * width);
  Rng center_rng(MixSeed(seed, 0));
  for (float& value : centers) value = static_cast<float>(StandardNormal(center_rng) * scale);

  torch::Tensor inputs = torch::empty({examples, features}, torch::kFloat32);
  torch::Tensor labels = torch::empty({examples}, torch::kInt64);
  float* input = inputs.data_ptr<float>();
  std::int64_t* label = labels.data_ptr<std::int64_t>();
  Rng rng(MixSeed(seed, 1));
  for (std::int64_t i = 0; i < examples; ++i) {
    const auto cluster = static_cast<std::size_t>(rng.Below(static_cast<std::uint64_t>(classes * kClustersPerClass)));
    label[i] = static_cast<std::int64_t>(cluster) % classes;
    const float* center = centers.data() + cluster * width;
    for (std::size_t j = 0; j < width; ++j) {
      input[static_cast<std::size_t>(i) * width + j] = static_cast<float>(center[j] + StandardNormal(rng));
    }
  }
  return {inputs, labels};
}

SyntheticSplits MakeSyntheticSplits(std::int64_t train, std::int64_t valid, std::int64_t test, std::int64_t features,
                                    std::int64_t classes, std::uint64_t seed) {
  if (train < 0 || valid < 0 || test < 0) {
    throw Error(fmt::format("synthetic data: split sizes must be >= 0, not {} / {} / {}", train, valid, test));
  }
  const Dataset all = MakeSyntheticClassification(train + valid + test, features, classes, seed);
  return {all.Slice(0, train), all.Slice(train, train + valid), all.Slice(train + valid, train + valid + test)};
}

}  // namespace dltune
