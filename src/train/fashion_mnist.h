// Fashion-MNIST (Xiao et al. 2017) from Debian's dataset-fashion-mnist package, decoded into memory.
//
// Splits are fixed so every trial of every study sees the same data: train = the first 50,000 images of the
// official training file, valid = its LAST 10,000 (held out from training), test = the official t10k file (10,000).
// Pixels are float32 in [0, 1] (value / 255), not standardized: models that want zero-mean inputs subtract the
// training pixels' mean (0.2860) and divide by their std (0.3530) themselves. Labels are int64 in [0, 10).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "dltune/train/workload.h"

namespace dltune {

// Where dataset-fashion-mnist installs the four .gz IDX files.
inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";
inline constexpr std::int64_t kFashionMnistTrainSize = 50000;
inline constexpr std::int64_t kFashionMnistValidSize = 10000;
inline constexpr std::int64_t kFashionMnistTestSize = 10000;
// Class names by label.
inline constexpr std::array<const char*, 10> kFashionMnistClasses = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};

struct FashionMnistSplits {
  Dataset train;  // 50,000 examples
  Dataset valid;  // 10,000 examples
  Dataset test;   // 10,000 examples
};

// Reads and decodes the four files of `dir` (train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
// t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz). Inputs are [N, 1, 28, 28], or [N, 784] with `flatten`;
// train and valid are views of one tensor. The first call takes ~0.4 s (mostly zlib inflating the training images);
// the decoded tensors are kept, and later calls (while the files are unchanged) return views of them, to be read
// and never written. Thread-safe.
// Throws Error naming the file when one is missing ("...: Fashion-MNIST not found; install it with: apt-get install
// dataset-fashion-mnist"), corrupt, or not Fashion-MNIST's shape (60,000 / 10,000 images of 28 x 28, labels 0-9).
FashionMnistSplits LoadFashionMnist(const std::string& dir = kFashionMnistDir, bool flatten = false);

}  // namespace dltune
