// One optimizer update of a contiguous slice of one parameter in a single pass over memory: the parameter, its
// gradient and its state buffers are each read once and written once, where a sequence of tensor operations reads
// and writes them several times (Adam as tensor operations is six kernels and a temporary). The rules are those of
// optimizer.h, in the same order of operations on each element as its tensor form, with every coefficient rounded
// to the element type first as LibTorch rounds scalars; only fused multiply-adds, where the CPU has them, may
// round differently. No torch here: Optimizer splits each parameter into slices across its threads.
#pragma once

#include <cstdint>

namespace dltune {

enum class UpdateRule { kSgd, kMomentum, kNesterov, kRmsProp, kAdam, kNadam };

// The scalars of one step, the same for every parameter (but `bias`, which depends on the parameter's t).
struct UpdateCoefficients {
  UpdateRule rule = UpdateRule::kSgd;
  double eta = 0;               // the step's learning rate
  double weight_decay = 0;      // wd
  bool coupled = false;         // g <- grad + wd * theta before the rule
  bool decay_in_place = false;  // theta <- theta * decay_factor before the rule's own change
  double decay_factor = 1;      // 1 - eta * wd
  double momentum = 0;          // gamma
  double rho = 0;               // rmsprop
  double beta1 = 0;             // adam, nadam
  double beta2 = 0;
  double epsilon = 0;  // rmsprop, adam, nadam
  double bias = 1;     // adam, nadam: sqrt(1 - beta2^t) / (1 - beta1^t)
};

// The buffers of one slice of `size` elements; `first` and `second` are the rule's state buffers in
// Optimizer::BufferNames() order (unused ones may be null).
template <typename T>
struct UpdateSlice {
  T* param = nullptr;
  const T* grad = nullptr;
  T* first = nullptr;
  T* second = nullptr;
  std::int64_t size = 0;
};

// Updates the slice and returns the sum of the squares of its `grad` (the gradient as given, before any coupled
// weight decay), taken in the same pass so the gradient norm costs no read of its own.
double OnePassUpdate(const UpdateCoefficients& c, const UpdateSlice<float>& slice);
double OnePassUpdate(const UpdateCoefficients& c, const UpdateSlice<double>& slice);

}  // namespace dltune
