#!/usr/bin/python3
"""Peer for bench/halton_bench.cc: scipy.stats.qmc.Halton(d, scramble=True) points per second.

Times construction plus .random(n) (what a caller pays for n fresh points), best of --repeats runs, and prints one
line the benchmark parses:
    scipy_halton d=8 n=65536 repeats=5 best_seconds=0.0712 points_per_second=920312.5
Exits 3 with a message on stderr if scipy is not importable (Debian: apt-get install python3-scipy).
"""
import argparse
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=8)
    parser.add_argument("--n", type=int, default=1 << 16)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    try:
        import scipy
        from scipy.stats import qmc
    except ImportError as error:
        print(f"scipy_halton: cannot import scipy with {sys.executable}: {error}; "
              "install python3-scipy or set DLTUNE_PYTHON", file=sys.stderr)
        return 3

    best = float("inf")
    for repeat in range(args.repeats):
        start = time.perf_counter()
        sample = qmc.Halton(d=args.dims, scramble=True, seed=repeat).random(args.n)
        elapsed = time.perf_counter() - start
        assert sample.shape == (args.n, args.dims)
        best = min(best, elapsed)
    print(f"scipy_halton d={args.dims} n={args.n} repeats={args.repeats} scipy={scipy.__version__} "
          f"best_seconds={best:.6g} points_per_second={args.n / best:.6g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
