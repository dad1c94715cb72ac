// A workload's SplitOverlap (CheckSplitOverlap, dltune/train/trainer.h) as text, for `dltune space check`.
#pragma once

#include <string>

#include "dltune/train/trainer.h"

namespace dltune {

// "data: 60000 train, 5000 valid, 10000 test examples" and that no example is in two splits, or a warning naming the
// examples the splits share; ends with a newline.
std::string SplitOverlapText(const SplitOverlap& overlap);

}  // namespace dltune
