// The built-in workloads: Fashion-MNIST MLP and CNN, and a small synthetic problem for fast tests.
#include "builtin.h"

#include <fmt/format.h>

#include "dltune/core/error.h"
#include "models.h"
#include "train/fashion_mnist.h"
#include "train/synthetic_data.h"

namespace dltune::internal {
namespace {

std::string ArgText(const nlohmann::json& args, const std::string& key, const std::string& fallback) {
  const auto it = args.find(key);
  if (it == args.end()) return fallback;
  if (!it->is_string()) throw Error(fmt::format("workload argument {} must be text, not {}", key, it->dump()));
  return it->get<std::string>();
}

std::int64_t ArgInt(const nlohmann::json& args, const std::string& key, std::int64_t fallback) {
  const auto it = args.find(key);
  if (it == args.end()) return fallback;
  if (!it->is_number_integer()) throw Error(fmt::format("workload argument {} must be a whole number", key));
  return it->get<std::int64_t>();
}

// An MLP's hidden layer widths: `hidden_sizes` as a list, or `num_layers` layers of `width` units each (the playbook's
// "number of layers" as a hyperparameter). Naming both is refused, as one would silently win.
std::vector<std::int64_t> ReadHiddenSizes(const HyperParams& params, std::int64_t default_width,
                                          std::int64_t default_layers) {
  const bool by_depth = params.Has("num_layers") || params.Has("width");
  // Read either way, so that a misspelt one gets a "did you mean".
  const std::int64_t layers = params.Int("num_layers", default_layers);
  const std::int64_t width = params.Int("width", default_width);
  if (!by_depth) return params.IntList("hidden_sizes", std::vector<std::int64_t>(default_layers, default_width));
  if (params.Has("hidden_sizes")) {
    throw Error("hyperparameters hidden_sizes and num_layers/width both set the MLP's layers: use one or the other");
  }
  if (layers < 1 || layers > 64) throw Error(fmt::format("num_layers must be in [1, 64], not {}", layers));
  return std::vector<std::int64_t>(layers, width);
}

// Fashion-MNIST from Debian's dataset-fashion-mnist; the model is chosen by the subclass.
class FashionMnistWorkload : public Workload {
 public:
  explicit FashionMnistWorkload(const nlohmann::json& args)
      : data_dir_(ArgText(args, "data_dir", "/usr/share/datasets/fashion-mnist")),
        train_examples_(ArgInt(args, "train_examples", 0)) {
    if (train_examples_ < 0) throw Error("fashion_mnist's train_examples must be positive (0: all 50,000)");
  }

  std::int64_t num_classes() const override { return 10; }
  std::vector<std::string> ArgumentNames() const override { return {"data_dir", "train_examples"}; }

  const WorkloadData& Data() override {
    if (!data_) {
      FashionMnistSplits splits = LoadFashionMnist(data_dir_);
      // A small project: the first N training images (the validation and test splits stay whole).
      Dataset train = train_examples_ > 0 && train_examples_ < splits.train.size()
                          ? splits.train.Slice(0, train_examples_)
                          : std::move(splits.train);
      data_ = WorkloadData{std::move(train), std::move(splits.valid), std::move(splits.test)};
    }
    return *data_;
  }

 private:
  std::string data_dir_;
  std::int64_t train_examples_;  // 0: every training image
  std::optional<WorkloadData> data_;
};

class FashionMnistMlp final : public FashionMnistWorkload {
 public:
  using FashionMnistWorkload::FashionMnistWorkload;
  std::string name() const override { return "fashion_mnist_mlp"; }

  std::shared_ptr<Model> BuildModel(const HyperParams& params) override {
    MlpOptions options;
    options.inputs = 28 * 28;
    options.hidden_sizes = ReadHiddenSizes(params, 256, 1);
    options.activation = params.Text("activation", "relu");
    options.dropout = params.Real("dropout", 0.0);
    options.outputs = 10;
    options.standardize = kFashionMnistStandardization;
    return MakeMlp(options);
  }

  std::optional<ArrayNetwork> Fusion() const override {
    return ArrayNetwork{.kind = ArrayNetwork::Kind::kMlp, .standardize = kFashionMnistStandardization};
  }

  std::string DefaultSpace() const override {
    return "learning_rate: {min: 1.0e-3, max: 1.0, scale: log}\n"
           "one_minus_momentum: {min: 0.01, max: 0.5, scale: log}\n"
           "optimizer: nesterov\n";
  }
};

class FashionMnistCnn final : public FashionMnistWorkload {
 public:
  using FashionMnistWorkload::FashionMnistWorkload;
  std::string name() const override { return "fashion_mnist_cnn"; }

  std::shared_ptr<Model> BuildModel(const HyperParams& params) override {
    CnnOptions options;
    options.conv_channels = params.IntList("conv_channels", {32, 64});
    options.dense_size = params.Int("dense_size", 128);
    options.normalization = params.Text("normalization", "none");
    options.virtual_batch_size = params.Int("virtual_batch_size", 32);
    options.activation = params.Text("activation", "relu");
    options.dropout = params.Real("dropout", 0.0);
    options.standardize = kFashionMnistStandardization;
    return MakeCnn(options);
  }

  std::optional<ArrayNetwork> Fusion() const override {
    return ArrayNetwork{.kind = ArrayNetwork::Kind::kCnn, .standardize = kFashionMnistStandardization};
  }
};

// A small generated classification problem: trains in seconds, for smoke tests and examples.
class SyntheticWorkload final : public Workload {
 public:
  explicit SyntheticWorkload(const nlohmann::json& args)
      : examples_(ArgInt(args, "examples", 4000)),
        features_(ArgInt(args, "features", 16)),
        classes_(ArgInt(args, "classes", 4)),
        seed_(static_cast<std::uint64_t>(ArgInt(args, "data_seed", 0))) {
    if (examples_ < 100 || features_ < 1 || classes_ < 2) {
      throw Error("synthetic workload needs examples >= 100, features >= 1 and classes >= 2");
    }
  }
  std::string name() const override { return "synthetic"; }
  std::int64_t num_classes() const override { return classes_; }
  std::vector<std::string> ArgumentNames() const override { return {"examples", "features", "classes", "data_seed"}; }

  const WorkloadData& Data() override {
    if (!data_) {
      const Dataset all = MakeSyntheticClassification(examples_, features_, classes_, seed_);
      const std::int64_t valid = examples_ / 5;
      const std::int64_t test = examples_ / 10;
      const std::int64_t train = examples_ - valid - test;
      data_ = WorkloadData{all.Slice(0, train), all.Slice(train, train + valid), all.Slice(train + valid, examples_)};
    }
    return *data_;
  }

  std::shared_ptr<Model> BuildModel(const HyperParams& params) override {
    MlpOptions options;
    options.inputs = features_;
    options.hidden_sizes = ReadHiddenSizes(params, 32, 1);
    options.activation = params.Text("activation", "relu");
    options.dropout = params.Real("dropout", 0.0);
    options.normalization = params.Text("normalization", "none");
    options.outputs = classes_;
    return MakeMlp(options);
  }

  // Its MLP takes the generated features as they are.
  std::optional<ArrayNetwork> Fusion() const override { return ArrayNetwork{.kind = ArrayNetwork::Kind::kMlp}; }

 private:
  std::int64_t examples_;
  std::int64_t features_;
  std::int64_t classes_;
  std::uint64_t seed_;
  std::optional<WorkloadData> data_;
};

template <typename T>
std::unique_ptr<Workload> Make(const nlohmann::json& args) {
  return std::make_unique<T>(args);
}

}  // namespace

std::map<std::string, BuiltinWorkloadMaker> BuiltinWorkloads() {
  return {{"fashion_mnist_mlp", &Make<FashionMnistMlp>},
          {"fashion_mnist_cnn", &Make<FashionMnistCnn>},
          {"synthetic", &Make<SyntheticWorkload>}};
}

}  // namespace dltune::internal
