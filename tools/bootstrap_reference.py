#!/usr/bin/python3
"""Reference values for src/analyze/bootstrap_test.cc: the bootstrap of "How many trials are needed to get good
results with quasi-random search?" (Figure 3), computed independently of the C++ code.

Run with the Debian interpreter (numpy 1.24):
    /usr/bin/python3 tools/bootstrap_reference.py
and paste its output into the test.

Only the random numbers are shared with C++ by design: the draws must be the same to compare results exactly, so
this file reimplements dltune's Rng (xoshiro256** seeded through SplitMix64, MixSeed, Below with rejection) from its
specification in include/dltune/core/rng.h and src/core/rng.cc. Everything else is independent: the draws of
`budget` trials with replacement (each resample one growing sequence of draws, budget k its first k), the best of each
draw, and the quartiles by numpy.percentile (method "linear").
"""
import numpy as np

MASK = (1 << 64) - 1


def splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def mix_seed(seed, stream):
    x = seed ^ ((stream * 0xD1B54A32D192ED03) & MASK)
    x, _ = splitmix64(x)
    x, out = splitmix64(x)
    return out


def rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & MASK


class Rng:
    def __init__(self, seed):
        self.s = []
        for _ in range(4):
            seed, word = splitmix64(seed)
            self.s.append(word)

    def next_u64(self):
        s = self.s
        result = (rotl((s[1] * 5) & MASK, 7) * 9) & MASK
        t = (s[1] << 17) & MASK
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        threshold = ((1 << 64) - n) % n
        while True:
            x = self.next_u64()
            if x >= threshold:
                return x % n


def bootstrap(values, resamples, seed, substudy_index, maximize):
    """Each resample is one sequence of draws with replacement; budget k keeps its first k draws."""
    rng = Rng(mix_seed(seed, substudy_index))
    n = len(values)
    draws = [[] for _ in range(resamples)]
    boxes = []
    for budget in range(1, n + 1):
        for draw in draws:
            draw.append(values[rng.below(n)])
        best = np.array([max(draw) if maximize else min(draw) for draw in draws])
        q1, median, q3 = np.percentile(best, [25, 50, 75], method="linear")
        boxes.append((budget, best.min(), q1, median, q3, best.max()))
    return boxes


def report(name, values, resamples, seed, substudy_index, maximize):
    print(f"// {name}: values {values}, resamples {resamples}, seed {seed}, sub-study {substudy_index}, "
          f"{'maximize' if maximize else 'minimize'}")
    print(f"// budget, min, q1, median, q3, max")
    print(f"constexpr double {name}[][6] = {{")
    for box in bootstrap(values, resamples, seed, substudy_index, maximize):
        print("    {" + ", ".join(repr(float(v)) for v in box) + "},")
    print("};")


def main():
    print(f"// numpy {np.__version__}")
    print(f"// Rng(MixSeed(7, 0)) first NextU64: {Rng(mix_seed(7, 0)).next_u64()}")
    report("kMinimizeBoxes", [0.31, 0.27, 0.35, 0.22, 0.29], 200, 42, 0, False)
    report("kMaximizeBoxes", [0.61, 0.74, 0.58, 0.7], 101, 7, 1, True)
    # Few resamples of many distinct values: quartiles fall between draws, so the interpolation shows.
    report("kInterpolatedBoxes", [0.5, 0.125, 0.875, 0.25, 0.625, 0.375, 0.75], 6, 3, 0, False)


if __name__ == "__main__":
    main()
