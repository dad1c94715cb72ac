#!/usr/bin/python3
"""Informational: discrepancy of scipy's scrambled Halton over seeds, with and without a random shift modulo 1.

Background for the default of dltune's ScrambledHalton (include/dltune/search/halton.h): Owen-scrambled Halton
(scipy.stats.qmc.Halton(scramble=True), the same randomization as dltune's) already randomizes every point
uniformly; adding a per-dimension random shift modulo 1 on top raises the centered L2 discrepancy. Run with the
Debian interpreter that has python3-scipy:
    /usr/bin/python3 tools/halton_quality.py [--n 256] [--dims 4] [--seeds 100]
"""
import argparse

import numpy as np
from scipy.stats import qmc


def summarize(label, values):
    values = np.asarray(values)
    print(f"  {label:<44} {values.mean():.6f} +- {values.std():.6f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--dims", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=100)
    args = parser.parse_args()
    for method in ("CD", "L2-star"):
        print(f"N={args.n}, d={args.dims}, method={method}, mean +- sd over seeds 0..{args.seeds - 1}")
        scrambled, shifted, uniform = [], [], []
        for seed in range(args.seeds):
            x = qmc.Halton(d=args.dims, scramble=True, seed=seed).random(args.n)
            scrambled.append(qmc.discrepancy(x, method=method))
            shift = np.random.default_rng(10_000 + seed).random(args.dims)
            shifted.append(qmc.discrepancy(np.fmod(x + shift, 1.0), method=method))
            uniform.append(qmc.discrepancy(np.random.default_rng(seed).random((args.n, args.dims)), method=method))
        summarize("scipy Halton scramble=True", scrambled)
        summarize("same + random shift mod 1 per dimension", shifted)
        summarize("uniform random", uniform)


if __name__ == "__main__":
    main()
