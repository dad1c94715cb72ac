#include "train/fashion_mnist.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <future>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "dltune/core/error.h"
#include "idx.h"

namespace dltune {
namespace {

constexpr std::int64_t kImageSide = 28;
constexpr std::int64_t kClasses = 10;
// Images inflated per chunk: small enough to stay in the CPU cache while they are converted.
constexpr std::int64_t kChunkImages = 256;

// Asks for transparent huge pages behind a tensor not yet written: training gathers random rows of the images, and
// with 2 MB pages those reads miss the TLB far less (a batch gathers in about three quarters of the time).
void AdviseHugePages(const torch::Tensor& tensor) {
  constexpr std::uintptr_t kHugePage = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(tensor.data_ptr());
  const std::uintptr_t end = begin + static_cast<std::uintptr_t>(tensor.nbytes());
  const std::uintptr_t first = (begin + kHugePage - 1) & ~(kHugePage - 1), last = end & ~(kHugePage - 1);
  // Advice only: a kernel without transparent huge pages refuses it, and nothing changes.
  if (first < last) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
}

// Images float32 [N, 1, 28, 28] in [0, 1], converted chunk by chunk as they are inflated (no uint8 copy).
torch::Tensor DecodeImages(const std::string& path, std::int64_t expected_size) {
  IdxReader reader(path, 3);
  const std::vector<std::int64_t>& shape = reader.shape();
  if (shape[0] != expected_size || shape[1] != kImageSide || shape[2] != kImageSide) {
    throw Error(fmt::format("{}: not Fashion-MNIST: {} images of {} x {}, expected {} of 28 x 28", path, shape[0],
                            shape[1], shape[2], expected_size));
  }
  std::array<float, 256> scaled{};
  for (std::size_t value = 0; value < scaled.size(); ++value) scaled[value] = static_cast<float>(value) / 255.0f;
  torch::Tensor images = torch::empty({expected_size, 1, kImageSide, kImageSide}, torch::kFloat32);
  AdviseHugePages(images);
  float* out = images.data_ptr<float>();
  std::vector<std::uint8_t> chunk(static_cast<std::size_t>(kChunkImages * kImageSide * kImageSide));
  for (std::int64_t done = 0; done < reader.values();) {
    const std::int64_t count = std::min(static_cast<std::int64_t>(chunk.size()), reader.values() - done);
    reader.Read(chunk.data(), count);
    for (std::int64_t i = 0; i < count; ++i) out[done + i] = scaled[chunk[static_cast<std::size_t>(i)]];
    done += count;
  }
  reader.Finish();
  return images;
}

// Labels int64 [N] in [0, 10).
torch::Tensor DecodeLabels(const std::string& path, std::int64_t expected_size) {
  const torch::Tensor labels = ReadIdxLabels(path);
  if (labels.size(0) != expected_size) {
    throw Error(fmt::format("{}: not Fashion-MNIST: {} labels, expected {}", path, labels.size(0), expected_size));
  }
  if (expected_size > 0 && labels.max().item<int>() >= kClasses) {
    throw Error(fmt::format("{}: not Fashion-MNIST: label {} is outside 0-9", path, labels.max().item<int>()));
  }
  return labels.to(torch::kInt64);
}

Dataset Decode(const std::string& images_path, const std::string& labels_path, std::int64_t expected_size) {
  return {DecodeImages(images_path, expected_size), DecodeLabels(labels_path, expected_size)};
}

// A file as it is now: a decoded copy of it is valid while these stay the same.
std::string FileIdentity(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return "";
  return fmt::format("{}:{}:{}:{}.{}", path, info.st_ino, info.st_size, info.st_mtim.tv_sec, info.st_mtim.tv_nsec);
}

}  // namespace

FashionMnistSplits LoadFashionMnist(const std::string& dir, bool flatten) {
  const std::filesystem::path root(dir);
  const std::string train_images = (root / "train-images-idx3-ubyte.gz").string();
  const std::string train_labels = (root / "train-labels-idx1-ubyte.gz").string();
  const std::string test_images = (root / "t10k-images-idx3-ubyte.gz").string();
  const std::string test_labels = (root / "t10k-labels-idx1-ubyte.gz").string();
  for (const std::string& path : {train_images, train_labels, test_images, test_labels}) {
    if (!std::filesystem::exists(path)) {
      throw Error(
          fmt::format("{}: Fashion-MNIST not found; install it with: apt-get install dataset-fashion-mnist", path));
    }
  }
  // Decoded once per process and kept (read-only: every caller gets views of the same tensors), so that trials
  // forked from a trial server that loaded it find it decoded.
  struct Decoded {
    std::string identity;  // of the four files when they were decoded
    FashionMnistSplits splits;
  };
  static std::mutex cache_mutex;
  static std::map<std::string, Decoded> cache;  // by directory
  std::string identity;
  for (const std::string& path : {train_images, train_labels, test_images, test_labels}) {
    identity += FileIdentity(path) + ";";
  }
  const std::lock_guard<std::mutex> lock(cache_mutex);
  auto cached = cache.find(dir);
  if (cached == cache.end() || cached->second.identity != identity) {
    // The two pairs decode in parallel: inflating the training images dominates.
    std::future<Dataset> test = std::async(std::launch::async, Decode, test_images, test_labels, kFashionMnistTestSize);
    Dataset train = Decode(train_images, train_labels, kFashionMnistTrainSize + kFashionMnistValidSize);
    FashionMnistSplits decoded{train.Slice(0, kFashionMnistTrainSize),
                               train.Slice(kFashionMnistTrainSize, kFashionMnistTrainSize + kFashionMnistValidSize),
                               test.get()};
    cached = cache.insert_or_assign(dir, Decoded{identity, std::move(decoded)}).first;
  }
  FashionMnistSplits splits = cached->second.splits;
  if (flatten) {
    for (Dataset* split : {&splits.train, &splits.valid, &splits.test}) {
      split->inputs = split->inputs.flatten(1);
    }
  }
  return splits;
}

}  // namespace dltune
