// A small generated classification problem: trains in seconds, for smoke tests, examples and CI.
//
// Each class is a mixture of two Gaussian clusters (unit noise) whose centers lie about 4 noise-widths from the
// origin in random directions. With 16 features and 4 classes a tiny MLP (16-32-4) reaches ~95% test accuracy in
// a hundred or so steps while a linear model stays near 88%, so there is something for tuning to find. Examples are
// i.i.d. and generated in order from the platform-independent dltune::Rng (no std:: distributions, no transcendental
// functions), so the data are bit-identical on every machine, and the first n examples do not depend on how many are
// generated.
#pragma once

#include <cstdint>

#include "dltune/train/workload.h"

namespace dltune {

// `examples` examples with inputs float32 [examples, features] and labels int64 in [0, classes). Thread-safe.
// Throws Error unless examples >= 0, features >= 1 and classes >= 2.
Dataset MakeSyntheticClassification(std::int64_t examples, std::int64_t features, std::int64_t classes,
                                    std::uint64_t seed);

struct SyntheticSplits {
  Dataset train;
  Dataset valid;
  Dataset test;
};

// Disjoint train / valid / test splits of one generated problem (consecutive ranges of
// MakeSyntheticClassification(train + valid + test, ...); views of one tensor). Same errors as above.
SyntheticSplits MakeSyntheticSplits(std::int64_t train, std::int64_t valid, std::int64_t test, std::int64_t features,
                                    std::int64_t classes, std::uint64_t seed);

}  // namespace dltune
