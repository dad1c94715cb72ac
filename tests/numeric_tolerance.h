// Tolerances for comparing two float32 trainings that differ only in the order of their sums: one process against
// data-parallel ranks (the batch's sum split over them), 1 thread against 2, one OpenBLAS kernel set against another
// (each blocks a dot product its own way). They are derived from the arithmetic, not from one machine's run, so that
// they hold on every machine and kernel set (scripts/check-kernel-sets runs the numerical tests under each):
//   - a sum of n float32 terms added in another order differs by at most about log2(n) roundings, each at most u =
//     2^-24 of the result (float32's unit roundoff). The MLP's longest sums are its 784-long dot products and the
//     batch's 64 rows, log2(784) + log2(64) < 16 roundings: a step's loss and gradients differ by at most 16 u;
//   - the weights carry a step's difference into the next, so that while the loss is smooth (no ReLU kink crossed by
//     a difference that small, the common case) the differences add up: at step s, at most s x 16 u.
// A model whose kinks do get crossed (a CNN's max-pools, which amplify a difference to a whole branch) needs a
// tolerance of its own, stated beside its test.
#pragma once

#include <cstdint>

namespace dltune::test {

inline constexpr double kFloat32Roundoff = 1.0 / 16777216.0;  // u = 2^-24

// The relative difference two smooth float32 trainings may reach by step `steps`, `roundings_per_step` u per step.
inline double SmoothTrainingTolerance(std::int64_t steps, int roundings_per_step = 16) {
  return static_cast<double>(steps < 1 ? 1 : steps) * roundings_per_step * kFloat32Roundoff;
}

}  // namespace dltune::test
