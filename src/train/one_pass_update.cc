#include "one_pass_update.h"

#include <algorithm>
#include <cmath>

namespace dltune {
namespace {

// Every loop below is one pass with no aliasing between its buffers, so the compiler vectorizes it; this file is
// built with -O3 -fno-math-errno (std::sqrt as one instruction) and each entry point is cloned for the vector
// extensions the CPU may have (chosen once, at load).
template <typename T>
[[gnu::always_inline]] inline void Update(const UpdateCoefficients& c, const UpdateSlice<T>& s) {
  T* __restrict p = s.param;
  const T* __restrict g = s.grad;
  T* __restrict first = s.first;
  T* __restrict second = s.second;
  const std::int64_t n = s.size;
  const auto eta = static_cast<T>(c.eta);
  const auto wd = static_cast<T>(c.weight_decay);
  const auto decay = static_cast<T>(c.decay_in_place ? c.decay_factor : 1.0);
  const bool coupled = c.coupled;
  // The gradient the rule sees: grad + wd * theta_t under coupled decay.
  auto gradient = [&](std::int64_t i) { return coupled ? g[i] + wd * p[i] : g[i]; };

  switch (c.rule) {
    case UpdateRule::kSgd:
      for (std::int64_t i = 0; i < n; ++i) p[i] = p[i] * decay + -eta * g[i];
      break;

    case UpdateRule::kMomentum:
    case UpdateRule::kNesterov: {
      const auto gamma = static_cast<T>(c.momentum);
      const T eta_gamma = static_cast<T>(-c.eta * c.momentum);
      const bool nesterov = c.rule == UpdateRule::kNesterov;
      for (std::int64_t i = 0; i < n; ++i) {
        T v = g[i] + gamma * first[i];   // v = g + gamma * v
        if (coupled) v = v + wd * p[i];  // ... + wd * theta_t
        first[i] = v;
        const T theta = p[i] * decay;
        p[i] = nesterov ? (theta + -eta * g[i]) + eta_gamma * v : theta + -eta * v;
      }
      break;
    }

    case UpdateRule::kRmsProp: {
      const auto rho = static_cast<T>(c.rho);
      const auto one_minus_rho = static_cast<T>(1.0 - c.rho);
      const auto gamma = static_cast<T>(c.momentum);
      const auto epsilon = static_cast<T>(c.epsilon);
      for (std::int64_t i = 0; i < n; ++i) {
        const T gi = gradient(i);
        const T v = first[i] * rho + one_minus_rho * gi * gi;
        first[i] = v;
        const T m = second[i] * gamma + eta * gi / std::sqrt(v + epsilon);
        second[i] = m;
        p[i] = p[i] * decay - m;
      }
      break;
    }

    case UpdateRule::kAdam:
    case UpdateRule::kNadam: {
      const auto weight = static_cast<T>(1.0 - c.beta1);  // of lerp(m, g, 1 - beta1), < 0.5 for beta1 > 0.5
      const bool small_weight = 1.0 - c.beta1 < 0.5;
      const auto beta2 = static_cast<T>(c.beta2);
      const auto one_minus_beta2 = static_cast<T>(1.0 - c.beta2);
      const auto epsilon = static_cast<T>(c.epsilon);
      const bool nadam = c.rule == UpdateRule::kNadam;
      const auto step = static_cast<T>(-c.eta * c.bias * (nadam ? c.beta1 : 1.0));
      const auto gradient_step = static_cast<T>(-c.eta * c.bias * (1.0 - c.beta1));
      for (std::int64_t i = 0; i < n; ++i) {
        const T gi = gradient(i);
        // LibTorch's lerp: from the nearer end, so a weight of 0 or 1 is exact.
        const T m =
            small_weight ? first[i] + weight * (gi - first[i]) : gi - (gi - first[i]) * (static_cast<T>(1) - weight);
        first[i] = m;
        const T v = second[i] * beta2 + one_minus_beta2 * gi * gi;
        second[i] = v;
        const T denominator = std::sqrt(v) + epsilon;
        T theta = p[i] * decay + step * m / denominator;
        if (nadam) theta = theta + gradient_step * gi / denominator;
        p[i] = theta;
      }
      break;
    }
  }
}

// The sum of x[i]^2 in double precision. Eight independent partial sums (one per lane; the order of additions
// within each is fixed) let the compiler vectorize without reassociating.
template <typename T>
[[gnu::always_inline]] inline double SumOfSquares(const T* __restrict x, std::int64_t n) {
  constexpr std::int64_t kLanes = 8;
  double lanes[kLanes] = {};
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (std::int64_t j = 0; j < kLanes; ++j) {
      const auto v = static_cast<double>(x[i + j]);
      lanes[j] += v * v;
    }
  }
  for (; i < n; ++i) lanes[0] += static_cast<double>(x[i]) * static_cast<double>(x[i]);
  double sum = 0;
  for (const double lane : lanes) sum += lane;
  return sum;
}

// Updates in chunks small enough to stay in L1, and sums each chunk's gradient squares right after its update
// read it: one trip through memory for both.
template <typename T>
[[gnu::always_inline]] inline double UpdateAndMeasure(const UpdateCoefficients& c, const UpdateSlice<T>& s) {
  constexpr std::int64_t kChunk = 2048;
  double squares = 0;
  for (std::int64_t begin = 0; begin < s.size; begin += kChunk) {
    const std::int64_t size = std::min(kChunk, s.size - begin);
    Update(c, UpdateSlice<T>{s.param + begin, s.grad + begin, s.first ? s.first + begin : nullptr,
                             s.second ? s.second + begin : nullptr, size});
    squares += SumOfSquares(s.grad + begin, size);
  }
  return squares;
}

}  // namespace

[[gnu::target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")]] double OnePassUpdate(
    const UpdateCoefficients& c, const UpdateSlice<float>& slice) {
  return UpdateAndMeasure(c, slice);
}

[[gnu::target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")]] double OnePassUpdate(
    const UpdateCoefficients& c, const UpdateSlice<double>& slice) {
  return UpdateAndMeasure(c, slice);
}

}  // namespace dltune
